"""Verify any stamp file, v1, v2 or v3, without a database: what `virgo stamp verify` prints."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stamps.legacy import LegacyStamp, LegacyStampError, detect_version, legacy_from_bytes
from stamps.problems import Code, Problem
from stamps.projections import name_the_same_tools, project
from stamps.storage import FILE_MODE
from stamps.validation import schema_problems, semantic_problems
from virgo.canonical import MalformedStamp, canonical_bytes, parse_strict, sha256_hex


@dataclass
class Verification:
    path: Path
    version: int | None = None
    sha256: str = ""
    problems: list[Problem] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_file(path: Path) -> Verification:
    result = Verification(path)
    try:
        data = path.read_bytes()
        mode = path.stat().st_mode & 0o777
    except OSError as exc:
        result.problems.append(Problem(Code.SCHEMA, str(path), f"cannot read {path}: {exc}"))
        return result
    result.sha256 = sha256_hex(data)
    try:
        document = parse_strict(data)
    except MalformedStamp as exc:
        result.problems.append(Problem(Code.SCHEMA, "(file)", f"malformed: {exc}"))
        return result
    result.version = detect_version(document)
    if result.version in (1, 2):
        _verify_legacy(data, result)
    elif result.version == 3:
        _verify_v3(data, document, mode, result)
    else:
        result.problems.append(
            Problem(Code.SCHEMA, "version", "no schema_version 3 or 2, nor version 1: not a stamp")
        )
    return result


def _verify_legacy(data: bytes, result: Verification) -> None:
    try:
        stamp: LegacyStamp = legacy_from_bytes(data)
    except LegacyStampError as exc:
        result.problems += exc.problems
        return
    result.details += [
        f"legacy v{stamp.version} stamp of {stamp.persona_name!r}, read only (never rewritten)",
        f"class {stamp.persona_class} -> canonical role path {stamp.role_path}",
        f"{len(stamp.tools)} tools",
    ]


def _verify_v3(data: bytes, document: dict[str, Any], mode: int, result: Verification) -> None:
    problems = schema_problems(document)
    if problems:
        result.problems += problems
        return
    result.problems += semantic_problems(document)
    if canonical_bytes(document) != data:
        result.problems.append(
            Problem(
                Code.SCHEMA,
                "(file)",
                "the file is not in RFC 8785 canonical form, so its hash is not the stamp hash",
            )
        )
    if mode & ~FILE_MODE:
        message = f"the file is not owner-private (mode {mode:o}, not 600)"
        result.problems.append(Problem(Code.SCHEMA, "(file)", message))
    projections = project(data)
    if not name_the_same_tools(projections):
        result.problems.append(
            Problem(
                Code.PROJECTION_LOSS,
                "(projections)",
                "the MCP tool list, handler table and launcher allowlist do not name the same "
                "tools",
            )
        )
    persona = document["persona"]
    result.details += [
        f"v3 stamp of {persona['name']!r} ({persona['id']}) generation {persona['generation']}",
        f"class {persona['class']} at {document['hierarchy']['path']}",
        f"{len(projections.mcp_tools)} tools: {', '.join(projections.mcp_tools)}",
    ]
