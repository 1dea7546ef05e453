"""MUTATION_CHANGED (mutation/changes.py, run.carry_unchanged): a module whose row is older than
its code runs again only the mutants of the functions that changed since; the others keep the
row's outcome, and the row says from which commit.

A carried kill is only as good as the claim that the function is the same code, so each way a
function can behave differently without its own lines changing (a constant, an import, a class
it reads, a statement of the module) is tried here, and so is a row that cannot be carried.
"""

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from mutation import changes, report, run, stale
from mutation.report import ModuleScore
from tests.test_mutation import INFO

BEFORE = '''"""A module."""

import json

LIMIT = 3


class Box:
    size = 1

    def fits(self, n: int) -> bool:
        return n <= LIMIT


def guard(n: int) -> bool:
    return n < LIMIT


def label(n: int) -> str:
    return json.dumps(n)


def plain(n: int) -> int:
    return n + 1
'''


def _changed(after: str) -> set[str]:
    return changes.changed_functions(BEFORE, after)


def test_only_the_function_whose_code_changed_is_changed() -> None:
    """A function's own code changing marks it alone; moving it, a comment or a blank line in
    it, or the module's docstring is no change at all."""
    assert _changed(BEFORE) == set()
    assert _changed(BEFORE.replace("return n + 1", "return n + 2")) == {"x_plain"}
    assert _changed(BEFORE.replace("return n + 1", "# why\n\n    return n + 1")) == set()
    assert _changed(BEFORE.replace('"""A module."""', '"""Another."""')) == set()
    moved = BEFORE.replace("def plain(n: int) -> int:\n    return n + 1\n", "").replace(
        "def guard", "def plain(n: int) -> int:\n    return n + 1\n\n\ndef guard"
    )
    assert _changed(moved) == set()
    assert _changed(BEFORE + "\n\ndef extra() -> None:\n    pass\n") == {"x_extra"}
    assert _changed(BEFORE.replace("return n <= LIMIT", "return n < LIMIT")) == {"xǁBoxǁfits"}


def test_a_function_reading_a_name_bound_differently_is_changed() -> None:
    """A constant, an import or a class attribute changed outside the functions changes every
    function that reads that name, and only those; a name added changes none."""
    assert _changed(BEFORE.replace("LIMIT = 3", "LIMIT = 4")) == {"x_guard", "xǁBoxǁfits"}
    assert _changed(BEFORE.replace("import json", "import simplejson as json")) == {"x_label"}
    assert _changed(BEFORE.replace("size = 1", "size = 2")) == set()
    assert _changed(BEFORE.replace("LIMIT = 3", "LIMIT = 3\nOTHER = 5")) == set()
    assert _changed(BEFORE.replace("import json", "import json\nimport os")) == set()


def test_a_statement_binding_no_one_name_changed_changes_every_function() -> None:
    """What a statement such as `a, b = ...` or an `if` at module level does cannot be told
    apart by name: when one changes or goes away, nothing is carried."""
    with_pair = BEFORE.replace("LIMIT = 3", "LIMIT = 3\nlow, high = 1, 2")
    assert changes.changed_functions(with_pair, with_pair) == set()
    assert changes.changed_functions(with_pair, with_pair.replace("1, 2", "1, 3")) == {
        "xǁBoxǁfits",
        "x_guard",
        "x_label",
        "x_plain",
    }


def test_a_mutant_names_its_function() -> None:
    assert changes.function_of("pkg.mod.x_guard__mutmut_12") == "x_guard"
    assert changes.function_of("pkg.mod.xǁBoxǁfits__mutmut_1") == "xǁBoxǁfits"


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def _repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Path]:
    """A git repository holding pkg/mod.py as BEFORE at its one commit, as run.ROOT, and its
    mutants/ with mutmut's record of pkg/mod.py (nothing run): the commit and the record."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(BEFORE)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "pkg/mod.py")
    _git(tmp_path, "commit", "-q", "-m", "first")
    monkeypatch.setattr(run, "ROOT", tmp_path)
    monkeypatch.setattr(run, "MUTANTS", tmp_path / "mutants")
    meta = tmp_path / "mutants" / "pkg" / "mod.py.meta"
    meta.parent.mkdir(parents=True)
    names = [
        f"pkg.mod.{function}__mutmut_{n}" for function in ("x_guard", "x_plain") for n in (1, 2)
    ]
    meta.write_text(json.dumps({"exit_code_by_key": dict.fromkeys(names)}))
    return _git(tmp_path, "rev-parse", "--short", "HEAD"), meta


def _kept(commit: str, row: ModuleScore, survivors: list[str]) -> report.KeptModule:
    """The row and survivors as a report at `commit` wrote them, as the next run reads them."""
    rendered = report.render(
        dataclasses.replace(INFO, commit=commit),
        [row],
        [report.Mutant(name, "survived", "a → b") for name in survivors],
        {},
        order=["pkg/mod.py"],
    )
    return report.kept_modules(rendered)["pkg/mod.py"]


def test_the_mutants_of_unchanged_functions_keep_their_kills_and_the_rest_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of a row at an older commit: the kills in functions unchanged since are recorded as
    kills; its survivors there, and every mutant of a changed function, run again."""
    commit, meta = _repository(tmp_path, monkeypatch)
    (tmp_path / "pkg" / "mod.py").write_text(BEFORE.replace("return n + 1", "return n + 2"))
    row = ModuleScore("pkg/mod.py", "whole module", 3, 1, 0, 0, 60.0)
    kept = _kept(commit, row, ["pkg.mod.x_guard__mutmut_2"])

    assert run.carry_unchanged("pkg/mod.py", kept) == commit

    assert json.loads(meta.read_text())["exit_code_by_key"] == {
        "pkg.mod.x_guard__mutmut_1": 1,
        "pkg.mod.x_guard__mutmut_2": None,
        "pkg.mod.x_plain__mutmut_1": None,
        "pkg.mod.x_plain__mutmut_2": None,
    }
    # The record says whence, for this run's row and any later one over the same mutants/.
    assert run.carried_commits(["pkg/mod.py", "pkg/other.py"]) == {"pkg/mod.py": commit}
    # mutmut making the module's mutants afresh forgets the outcomes, and with them whence.
    names = json.loads(meta.read_text())["exit_code_by_key"]
    meta.write_text(json.dumps({"exit_code_by_key": dict.fromkeys(names)}))
    assert run.carried_commits(["pkg/mod.py"]) == {}


def test_a_module_moved_since_its_row_is_compared_with_its_code_under_its_old_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git follows the move: the module as it was at the row's commit, under the name it had
    then, is what its functions are compared with."""
    commit, meta = _repository(tmp_path, monkeypatch)
    _git(tmp_path, "mv", "pkg/mod.py", "pkg/moved.py")
    _git(tmp_path, "commit", "-q", "-m", "moved")
    (tmp_path / "pkg" / "moved.py").write_text(BEFORE.replace("n + 1", "n + 2"))
    record = json.loads(meta.read_text())["exit_code_by_key"]
    moved_meta = meta.with_name("moved.py.meta")
    moved_meta.write_text(
        json.dumps(
            {"exit_code_by_key": {k.replace(".mod.", ".moved."): v for k, v in record.items()}}
        )
    )
    assert run.source_at(commit, "pkg/moved.py") == BEFORE
    row = ModuleScore("pkg/moved.py", "whole module", 4, 0, 0, 0, 60.0)
    rendered = report.render(dataclasses.replace(INFO, commit=commit), [row], [], {})
    kept = report.kept_modules(rendered)["pkg/moved.py"]

    assert run.carry_unchanged("pkg/moved.py", kept) == commit

    assert json.loads(moved_meta.read_text())["exit_code_by_key"] == {
        "pkg.moved.x_guard__mutmut_1": 1,
        "pkg.moved.x_guard__mutmut_2": 1,
        "pkg.moved.x_plain__mutmut_1": None,
        "pkg.moved.x_plain__mutmut_2": None,
    }
    assert run.source_at(commit, "pkg/never.py") is None


def test_a_row_that_cannot_say_which_mutant_had_what_is_not_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timeout or another outcome in the row is not listed by mutant, so no kill can be
    told from it; a commit this repository does not hold has no code to compare: either way
    the whole module runs again."""
    commit, meta = _repository(tmp_path, monkeypatch)
    for row, at in (
        (ModuleScore("pkg/mod.py", "whole module", 3, 0, 1, 0, 60.0), commit),
        (ModuleScore("pkg/mod.py", "whole module", 3, 0, 0, 1, 60.0), commit),
        (ModuleScore("pkg/mod.py", "whole module", 4, 0, 0, 0, 60.0), "0000000"),
    ):
        assert run.carry_unchanged("pkg/mod.py", _kept(at, row, [])) is None
    assert set(json.loads(meta.read_text())["exit_code_by_key"].values()) == {None}
    assert run.carried_commits(["pkg/mod.py"]) == {}


def test_only_the_functions_the_row_mutated_are_carried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row over some functions says nothing of the others: theirs run."""
    commit, meta = _repository(tmp_path, monkeypatch)
    row = ModuleScore("pkg/mod.py", "`guard`", 2, 0, 0, 0, 60.0)

    assert run.carry_unchanged("pkg/mod.py", _kept(commit, row, [])) == commit

    recorded = json.loads(meta.read_text())["exit_code_by_key"]
    assert recorded["pkg.mod.x_guard__mutmut_1"] == recorded["pkg.mod.x_guard__mutmut_2"] == 1
    assert recorded["pkg.mod.x_plain__mutmut_1"] is recorded["pkg.mod.x_plain__mutmut_2"] is None


def test_more_unchanged_mutants_than_the_row_killed_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mutants/ of other code than the row ran (more mutants to carry than it killed) would
    turn mutants never run into kills: the run stops and records nothing."""
    commit, meta = _repository(tmp_path, monkeypatch)
    row = ModuleScore("pkg/mod.py", "whole module", 3, 1, 0, 0, 60.0)

    with pytest.raises(SystemExit, match="mutants/ is not of the code that row ran"):
        run.carry_unchanged("pkg/mod.py", _kept(commit, row, []))
    assert set(json.loads(meta.read_text())["exit_code_by_key"].values()) == {None}


def test_a_row_says_whence_its_carried_outcomes_come_and_is_read_back() -> None:
    """The run cell names the commit the unchanged functions' outcomes were carried from; the
    next run reads the row's own commit from it, not that one."""
    row = ModuleScore("pkg/mod.py", "whole module", 9, 1, 0, 0, 60.0, carried_from="abc1234")
    rendered = report.render(
        dataclasses.replace(INFO, commit="def5678"),
        [row],
        [],
        {},
        order=["pkg/mod.py"],
    )
    kept = report.kept_modules(rendered)["pkg/mod.py"]

    assert kept.row.endswith(f"| {INFO.date}, def5678; unchanged functions as at abc1234 |")
    cells = report.row_cells(kept.row)
    assert (cells.commit, cells.killed, cells.scope) == ("def5678", 9, "whole module")
    dirty = kept.row.replace("def5678;", "def5678 (with uncommitted changes);")
    assert report.row_cells(dirty).commit == "def5678"


def test_carrying_needs_the_last_runs_mutants() -> None:
    """MUTATION_CHANGED without MUTATION_KEEP has no last run to carry from: refused before
    anything is deleted."""
    with pytest.raises(SystemExit, match="MUTATION_CHANGED needs MUTATION_KEEP"):
        run.main(["--changed", "--modules", "stamps/grant.py"])


def test_a_row_is_stale_once_a_function_it_mutated_changes_or_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make mutation-stale` names a module with no row, and one whose row's functions changed
    or went away since its commit; a change outside the row's scope, or none, is not stale."""
    commit, _ = _repository(tmp_path, monkeypatch)
    module = tmp_path / "pkg" / "mod.py"
    row = ModuleScore("pkg/mod.py", "`guard`", 2, 0, 0, 0, 60.0)
    document = report.render(dataclasses.replace(INFO, commit=commit), [row], [], {})
    modules = ["pkg/mod.py", "pkg/other.py"]

    assert stale.stale_modules(document, modules) == [("pkg/other.py", "no row")]
    module.write_text(BEFORE.replace("return n + 1", "return n + 2"))
    assert stale.stale_modules(document, modules[:1]) == []
    module.write_text(BEFORE.replace("return n < LIMIT", "return n <= LIMIT"))
    assert stale.stale_modules(document, modules[:1]) == [
        ("pkg/mod.py", f"changed since {commit}: x_guard")
    ]
    module.write_text(BEFORE.replace("def guard(", "def renamed("))
    assert stale.stale_modules(document, modules[:1]) == [
        ("pkg/mod.py", f"changed since {commit}: x_guard")
    ]
    elsewhere = document.replace(f", {commit} |", ", 0000000 |")
    assert stale.stale_modules(elsewhere, modules[:1]) == [
        ("pkg/mod.py", "its row's commit 0000000 is not in this repository")
    ]
