"""What a stamp check finds: coded problems, and the refusal that carries them.

The validator, the projections and the factory all report in these terms, so none of them has
to import another to name a problem.
"""

from dataclasses import dataclass
from enum import StrEnum


class Code(StrEnum):
    SCHEMA = "schema"
    DUPLICATE_NAME = "duplicate-name"
    DUPLICATE_ACTION = "duplicate-action"
    UNKNOWN_TOOL = "unknown-tool"
    ACTION_MISMATCH = "action-mismatch"
    BOUNDARY_MISMATCH = "boundary-mismatch"
    NOT_IN_CLASS = "not-in-class"
    MISSING_TOOL = "missing-tool"
    BAD_ACCESS = "bad-access"
    BOUNDARY_ALLOW = "boundary-allow"
    DENIED_EXPOSED = "denied-exposed"
    CONDITION = "condition"
    SCOPE = "scope"
    ADDRESS = "address"
    NOT_THE_OWNERS = "not-the-owners"
    PROJECTION_LOSS = "projection-loss"
    UNREGISTERED_HANDLER = "unregistered-handler"
    FILE_CONFLICT = "file-conflict"


@dataclass(frozen=True, slots=True)
class Problem:
    code: Code
    item: str
    message: str

    def __str__(self) -> str:
        return self.message


class StampRejected(Exception):
    """The stamp failed validation and must not be written."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(problem.message for problem in problems))
        self.problems = problems
