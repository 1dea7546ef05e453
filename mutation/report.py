"""docs/mutation.md from mutmut runs: counts per module, and every mutant the tests let through.

Pure functions of what mutmut reported, so they are tested on small inputs (tests/test_mutation.py)
without running mutmut. A reason written into the survivors table is kept on the next run for as
long as the same mutant (same id, same change) still survives. A run over some modules replaces
their rows and survivors and keeps the other modules' from the run that last mutated them (a
whole run takes hours), each row naming the run it comes from.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# mutmut's words for an outcome, grouped as the report counts them. "no tests" is a survivor: no
# test even runs the mutated code.
KILLED = frozenset({"killed", "caught by type check"})
TIMED_OUT = frozenset({"timeout"})
SURVIVED = frozenset({"survived", "no tests"})
# What mutmut says of a mutant a stopped run never reached (or was running when it stopped).
NOT_RUN = frozenset({"not checked", "check was interrupted by user"})
GOAL = 0.9

_CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True, slots=True)
class Mutant:
    name: str  # mutmut's id, e.g. stamps.validation.x_hierarchy_of__mutmut_3
    status: str  # mutmut's word for the outcome
    change: str = ""  # the one-line diff; filled in for the mutants listed in the report

    @property
    def module(self) -> str:
        """The source file, e.g. stamps/validation.py (a mangled function name holds no dot)."""
        return self.name.rsplit(".", 1)[0].replace(".", "/") + ".py"

    @property
    def sort_key(self) -> tuple[str, int]:
        """By function, then by mutmut's number within it (so _9 comes before _10)."""
        function, _, number = self.name.rpartition("__mutmut_")
        return function, int(number)

    @property
    def listed(self) -> bool:
        """Whether the report lists it: everything neither killed nor timed out."""
        return self.status not in KILLED | TIMED_OUT


@dataclass(frozen=True, slots=True)
class ModuleScore:
    module: str
    scope: str  # "whole module", or the functions mutated in it
    killed: int
    survived: int
    timed_out: int
    other: int  # suspicious, segfault, not checked: anything else mutmut can say
    seconds: float  # the mutants' test runs added up (not wall time: they run in parallel)
    # The commit whose row's outcomes the mutants of unchanged functions keep (run.py --changed).
    carried_from: str = ""

    @property
    def total(self) -> int:
        return self.killed + self.survived + self.timed_out + self.other

    @property
    def score(self) -> float:
        """Killed among all mutants; a timeout is not counted as a kill."""
        return self.killed / self.total if self.total else 0.0


@dataclass(frozen=True, slots=True)
class RunInfo:
    date: str
    tool: str
    python: str
    django: str
    commit: str
    children: int
    wall_seconds: float
    mutants_run: int
    command: str
    # Modules a run stopped at its time budget before finishing: they keep their earlier rows.
    unfinished: tuple[str, ...] = ()


def score_modules(
    mutants: Iterable[Mutant],
    scopes: Mapping[str, str],
    seconds_by_mutant: Mapping[str, float],
    carried_from: Mapping[str, str] | None = None,
) -> list[ModuleScore]:
    """One row per module of `scopes` (in its order), counted from the mutants run in it."""
    by_module: dict[str, list[Mutant]] = {module: [] for module in scopes}
    for mutant in mutants:
        by_module.setdefault(mutant.module, []).append(mutant)
    rows = []
    for module, found in by_module.items():
        statuses = [m.status for m in found]
        killed = sum(s in KILLED for s in statuses)
        survived = sum(s in SURVIVED for s in statuses)
        timed_out = sum(s in TIMED_OUT for s in statuses)
        rows.append(
            ModuleScore(
                module=module,
                scope=scopes.get(module, "whole module"),
                killed=killed,
                survived=survived,
                timed_out=timed_out,
                other=len(statuses) - killed - survived - timed_out,
                seconds=sum(seconds_by_mutant.get(m.name, 0.0) for m in found),
                carried_from=(carried_from or {}).get(module, ""),
            )
        )
    return rows


def unfinished_modules(mutants: Iterable[Mutant], modules: Sequence[str]) -> list[str]:
    """The modules of `modules` (in their order) with a mutant the run did not finish."""
    stopped = {mutant.module for mutant in mutants if mutant.status in NOT_RUN}
    return [module for module in modules if module in stopped]


def one_line_change(diff: str) -> str:
    """`mutmut show`'s unified diff as `old → new` (lines joined with ' / ')."""
    removed, added = [], []
    for line in diff.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("-"):
            removed.append(line[1:].strip())
        elif line.startswith("+"):
            added.append(line[1:].strip())
    return f"{' / '.join(removed) or '(nothing)'} → {' / '.join(added) or '(removed)'}"


def _code(text: str) -> str:
    text = text.replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _uncode(cell: str) -> str:
    if cell.startswith("`` ") and cell.endswith(" ``"):
        cell = cell[3:-3]
    elif cell.startswith("`") and cell.endswith("`"):
        cell = cell[1:-1]
    return cell.replace("\\|", "|")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in _CELL_SPLIT.split(line.strip())[1:-1]]


def reasons_of(document: str) -> dict[tuple[str, str], str]:
    """The reasons written in an earlier report's survivors table, by (mutant id, change)."""
    reasons = {}
    for line in document.splitlines():
        cells = _cells(line) if line.startswith("| `") else []
        if len(cells) == 4 and cells[3]:
            reasons[(_uncode(cells[0]), _uncode(cells[2]))] = cells[3]
    return reasons


@dataclass(frozen=True, slots=True)
class KeptModule:
    """A module's lines in an earlier report, as written there (its reasons included)."""

    row: str
    survivors: tuple[str, ...]


_HEADER_FIELD = re.compile(r"^- (date|commit): (.+)$", re.M)


def kept_modules(document: str) -> dict[str, KeptModule]:
    """Each module's score row and survivor rows in an earlier report, by module.

    A row written before rows named their run gets the run of that report's header.
    """
    header = dict(_HEADER_FIELD.findall(document))
    rows: dict[str, str] = {}
    survivors: dict[str, list[str]] = {}
    for line in document.splitlines():
        cells = _cells(line) if line.startswith("| `") else []
        if len(cells) in (9, 10) and cells[0].endswith(".py`"):
            if len(cells) == 9:
                line += f" {header.get('date', '?')}, {header.get('commit', '?')} |"
            rows[_uncode(cells[0])] = line
        elif len(cells) == 4:
            module = Mutant(_uncode(cells[0]), cells[1]).module
            survivors.setdefault(module, []).append(line)
    return {
        module: KeptModule(row, tuple(survivors.get(module, ()))) for module, row in rows.items()
    }


@dataclass(frozen=True, slots=True)
class RowCells:
    """What a kept score row says, as run.py --changed reads it."""

    scope: str
    killed: int
    timed_out: int
    other: int
    commit: str


def row_cells(row: str) -> RowCells:
    cells = _cells(row)
    # "date, commit", the commit perhaps followed by " (with uncommitted changes)", and after
    # a run with --changed "; ..." on what it carried.
    run = cells[9].split(";", 1)[0]
    return RowCells(
        scope=cells[1],
        killed=int(cells[3]),
        timed_out=int(cells[5]),
        other=int(cells[6]),
        commit=run.rsplit(", ", 1)[-1].split(" (", 1)[0].strip(),
    )


def survivor_names(kept: KeptModule) -> list[str]:
    return [_uncode(_cells(line)[0]) for line in kept.survivors]


def _percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def render(
    info: RunInfo,
    rows: Sequence[ModuleScore],
    listed: Sequence[Mutant],
    reasons: Mapping[tuple[str, str], str],
    kept: Mapping[str, KeptModule] | None = None,
    order: Sequence[str] = (),
) -> str:
    """The whole of docs/mutation.md: this run's modules, and of the others in `order` the rows
    and survivors `kept` from earlier runs."""
    ran = {row.module for row in rows}
    kept_here = {
        module: lines
        for module, lines in (kept or {}).items()
        if module not in ran and module in order
    }
    place = {module: index for index, module in enumerate(order)}
    minutes = info.wall_seconds / 60
    lines = [
        "# Mutation testing",
        "",
        "Written by `make mutation` (mutation/run.py); the reason column of the last table is",
        "written by hand and kept by the next run for as long as that mutant survives. A run over",
        "some modules keeps the others' rows and survivors from the run that last mutated them;",
        'the `run` column says which. A run cell ending "unchanged functions as at X" ran',
        "only the mutants of functions changed since commit X (`MUTATION_CHANGED=1`); the others",
        "keep the outcomes X's row had. The header is the last run's.",
        "",
        f"- date: {info.date}",
        f"- tool: {info.tool}",
        f"- Python {info.python}, Django {info.django}",
        f"- commit: {info.commit}",
        f"- command: `{info.command}`",
        f"- wall time: {minutes:.0f} min for {info.mutants_run} mutants, {info.children} at a time",
    ]
    if info.unfinished:
        lines.append(
            "- stopped at its time budget: "
            + ", ".join(f"`{module}`" for module in info.unfinished)
            + " did not finish and keep their earlier rows and survivors"
        )
    lines += [
        "- tests: the non-live suite on SQLite, and the live tests marked `mutation` (in-process",
        "  servers, a private Redis); each mutant runs only the tests that call the mutated",
        "  function, until the first failure",
        "",
        f"Score: killed / mutants (a timeout is not counted as killed). Goal: {_percent(GOAL)}.",
        "",
        "| module | mutated | mutants | killed | survived | timed out | other | score | ran "
        "| run |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    table: list[tuple[str, str]] = []
    for row in rows:
        mark = "" if row.score >= GOAL else " (below goal)"
        table.append(
            (
                row.module,
                f"| `{row.module}` | {row.scope} | {row.total} | {row.killed} | {row.survived} | "
                f"{row.timed_out} | {row.other} | {_percent(row.score)}{mark} | "
                f"{row.seconds / 60:.0f} min | {info.date}, {info.commit}"
                + (
                    f"; unchanged functions as at {row.carried_from} |"
                    if row.carried_from
                    else " |"
                ),
            )
        )
    table += [(module, lines_of.row) for module, lines_of in kept_here.items()]
    lines += [line for _, line in sorted(table, key=lambda entry: place.get(entry[0], -1))]
    survivor_lines: list[tuple[str, str]] = []
    for mutant in listed:
        reason = reasons.get((mutant.name, mutant.change), "")
        survivor_lines.append(
            (
                mutant.module,
                f"| {_code(mutant.name)} | {mutant.status} | {_code(mutant.change)} | {reason} |",
            )
        )
    survivor_lines += [
        (module, line) for module, lines_of in kept_here.items() for line in lines_of.survivors
    ]
    lines += ["", "## Mutants the tests let through", ""]
    if not survivor_lines:
        lines.append("None.")
    else:
        lines += [
            "Reason: why it is equivalent (no test can tell it apart), or what else it is.",
            "",
            "| mutant | status | change | reason |",
            "|---|---|---|---|",
        ]
        lines += [
            line for _, line in sorted(survivor_lines, key=lambda entry: place.get(entry[0], -1))
        ]
    return "\n".join(lines) + "\n"
