"""The mutation report's pieces on tiny inputs (mutation/): counts, diffs, kept reasons, modules.

Nothing here runs mutmut: these prove that a run's outcomes are counted and written down
correctly, that a reason written by hand survives the next run, and that the plugin mutmut's
sessions load orders their tests and copies their database in.
"""

import dataclasses
import json
import os
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import redis

from mutation import order, report, run
from mutation.report import ModuleScore, Mutant, RunInfo

REPO = Path(__file__).resolve().parent.parent

DIFF = """\
--- stamps/validation.py
+++ stamps/validation.py
@@ -1,5 +1,5 @@
 def hierarchy_of(path: str) -> dict[str, Any]:
     segments = path.split("/")
-    project = segments[1] if len(segments) == 3 else None
+    project = segments[1] if len(segments) != 3 else None
     if segments[0] == ROOT_WORKSPACE:
"""

INFO = RunInfo(
    date="2026-11-02 09:00 UTC",
    tool="mutmut 3.8.1",
    python="3.13.0",
    django="6.1.3",
    commit="abc1234",
    children=2,
    wall_seconds=600.0,
    mutants_run=4,
    command="make mutation",
)


def test_mutants_sort_by_function_then_number() -> None:
    names = ["m.x_b__mutmut_1", "m.x_a__mutmut_10", "m.x_a__mutmut_9"]
    assert sorted(names, key=lambda name: Mutant(name, "killed").sort_key) == [
        "m.x_a__mutmut_9",
        "m.x_a__mutmut_10",
        "m.x_b__mutmut_1",
    ]


def test_a_mutant_belongs_to_its_source_file() -> None:
    assert Mutant("stamps.validation.x_hierarchy_of__mutmut_3", "killed").module == (
        "stamps/validation.py"
    )
    assert Mutant("runtime.tools.workspace.xǁWorkspaceǁwrite__mutmut_1", "survived").module == (
        "runtime/tools/workspace.py"
    )


def test_outcomes_are_counted_per_module_and_timeouts_are_not_kills() -> None:
    mutants = [
        Mutant("stamps.validation.x_a__mutmut_1", "killed"),
        Mutant("stamps.validation.x_a__mutmut_2", "survived"),
        Mutant("stamps.validation.x_a__mutmut_3", "no tests"),
        Mutant("stamps.validation.x_a__mutmut_4", "timeout"),
        Mutant("stamps.validation.x_a__mutmut_5", "suspicious"),
        Mutant("stamps.projections.x_b__mutmut_1", "killed"),
    ]
    rows = report.score_modules(
        mutants,
        {"stamps/validation.py": "whole module", "stamps/projections.py": "whole module"},
        {"stamps.validation.x_a__mutmut_1": 2.0, "stamps.validation.x_a__mutmut_2": 3.5},
    )
    assert rows == [
        ModuleScore("stamps/validation.py", "whole module", 1, 2, 1, 1, 5.5),
        ModuleScore("stamps/projections.py", "whole module", 1, 0, 0, 0, 0.0),
    ]
    assert rows[0].total == 5
    assert rows[0].score == pytest.approx(0.2)
    assert [m.listed for m in mutants] == [False, True, True, False, True, False]


def test_a_module_that_ran_no_mutant_still_has_its_row() -> None:
    [row] = report.score_modules([], {"runtime/policy.py": "whole module"}, {})
    assert (row.total, row.score) == (0, 0.0)


def test_a_diff_becomes_one_line() -> None:
    assert report.one_line_change(DIFF) == (
        "project = segments[1] if len(segments) == 3 else None → "
        "project = segments[1] if len(segments) != 3 else None"
    )
    assert report.one_line_change("--- a\n+++ a\n-    return x\n") == "return x → (removed)"


def test_the_report_lists_survivors_and_keeps_their_written_reasons() -> None:
    rows = [ModuleScore("stamps/validation.py", "whole module", 8, 2, 0, 0, 60.0)]
    piped = Mutant("stamps.validation.x_a__mutmut_2", "survived", "a | b → a & b")
    ticked = Mutant("stamps.validation.x_a__mutmut_3", "no tests", "f`x` → None")
    first = report.render(INFO, rows, [piped, ticked], {})
    row = "| `stamps/validation.py` | whole module | 10 | 8 | 2 | 0 | 0 | 80.0% (below goal) |"
    assert row in first
    assert "Python 3.13.0, Django 6.1.3" in first
    assert "10 min for 4 mutants, 2 at a time" in first
    assert report.reasons_of(first) == {}

    written = first.replace(
        "| `a \\| b → a & b` |  |", "| `a \\| b → a & b` | equivalent: both are ints |"
    ).replace("| `` f`x` → None `` |  |", "| `` f`x` → None `` | test_x added |")
    assert report.reasons_of(written) == {
        (piped.name, piped.change): "equivalent: both are ints",
        (ticked.name, ticked.change): "test_x added",
    }
    again = report.render(INFO, rows, [piped, ticked], report.reasons_of(written))
    assert again == written

    # The same id with another change is another mutant: its old reason does not carry over.
    moved = Mutant(piped.name, "survived", "a | b → a ^ b")
    assert "| `a \\| b → a ^ b` |  |" in report.render(
        INFO, rows, [moved], report.reasons_of(written)
    )


def test_nothing_let_through_says_so() -> None:
    rows = [ModuleScore("stamps/projections.py", "whole module", 3, 0, 0, 0, 1.0)]
    assert report.render(INFO, rows, [], {}).endswith("## Mutants the tests let through\n\nNone.\n")


def test_modules_are_the_configured_ones_and_services_only_its_rules() -> None:
    known = run.configured_modules()
    assert "stamps/validation.py" in known and "personas/services/validation.py" in known
    assert run.selected_modules("", known) == known
    assert run.selected_modules("stamps/validation.py, stamps/projections.py", known) == [
        "stamps/validation.py",
        "stamps/projections.py",
    ]
    with pytest.raises(SystemExit, match=r"unknown module stamps/nope\.py; one of runtime/"):
        run.selected_modules("stamps/nope.py", known)
    assert run.patterns("stamps/validation.py") == ["stamps.validation.*"]
    rules = run.patterns("personas/services/validation.py")
    assert "personas.services.validation.x_validate_scope__mutmut_*" in rules
    assert "personas.services.validation.x__address_holder__mutmut_*" in rules
    assert not any("_validate_persona" in glob for glob in rules)
    assert run.patterns("personas/services/derivation.py") == [
        "personas.services.derivation.x_derive_skills__mutmut_*",
        "personas.services.derivation.x_provider_and_identity__mutmut_*",
        "personas.services.derivation.x_shown_subject__mutmut_*",
    ]
    assert not any(
        "composition_of" in glob for glob in run.patterns("personas/services/derivation.py")
    )
    # A method is named as mutmut names its mutants: xǁClassǁmethod.
    command = run.patterns("serving/management/commands/launch.py")
    assert "serving.management.commands.launch.xǁCommandǁ_confinement__mutmut_*" in command
    assert not any("_run" in glob for glob in command)


class _Item:
    def __init__(self, name: str, *, marker: bool = False, fixtures: tuple[str, ...] = ()) -> None:
        self.name, self.marker, self.fixturenames = name, marker, fixtures

    def get_closest_marker(self, name: str) -> object:
        return object() if self.marker and name == "django_db" else None


def test_mutant_runs_take_the_tests_without_a_database_first() -> None:
    items = [
        _Item("marked", marker=True),
        _Item("pure"),
        _Item("uses db", fixtures=("db",)),
        _Item("also pure", fixtures=("tmp_path",)),
        _Item("transactional", fixtures=("transactional_db",)),
    ]
    order.pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [item.name for item in items] == [
        "pure",
        "also pure",
        "marked",
        "uses db",
        "transactional",
    ]


@pytest.mark.django_db
def test_a_second_session_in_the_same_process_reads_content_types_afresh() -> None:
    """mutmut's clean run follows its stats pass in one process, on a new test database."""
    from django.contrib.contenttypes.models import ContentType

    from personas.models import Persona

    cached = ContentType.objects.get_for_model(Persona)
    # As if this were the next session's database: the row the cache holds is not Persona's.
    ContentType.objects.filter(pk=cached.pk).update(model="renamed")
    assert ContentType.objects.get_for_model(Persona).pk == cached.pk
    try:
        order.pytest_sessionstart(None)  # type: ignore[arg-type]
        assert ContentType.objects.get_for_model(Persona).pk != cached.pk
    finally:
        # The row just made goes with this test's transaction: the process must not keep its
        # id (the admin log of a later test in this process would name a row that is gone).
        ContentType.objects.clear_cache()


def test_a_run_over_some_modules_keeps_the_others_from_their_last_run() -> None:
    """A run of one module replaces its row and survivors; another module's row, survivors and
    written reasons stay as the earlier run wrote them, named by that run, in configured order
    (a whole run takes hours, so the report is kept module by module)."""
    order = ["stamps/validation.py", "stamps/projections.py"]
    earlier_rows = [
        ModuleScore("stamps/validation.py", "whole module", 8, 2, 0, 0, 60.0),
        ModuleScore("stamps/projections.py", "whole module", 9, 1, 0, 0, 60.0),
    ]
    kept_survivor = Mutant("stamps.projections.x_b__mutmut_1", "survived", "x → y")
    old_survivor = Mutant("stamps.validation.x_a__mutmut_2", "survived", "a → b")
    earlier = report.render(INFO, earlier_rows, [old_survivor, kept_survivor], {}, order=order)
    earlier = earlier.replace("| `x → y` |  |", "| `x → y` | equivalent: same value |")

    later_info = dataclasses.replace(INFO, date="2026-11-03 10:00 UTC", commit="def5678")
    rows = [ModuleScore("stamps/validation.py", "whole module", 10, 0, 0, 0, 60.0)]
    later = report.render(
        later_info,
        rows,
        [],
        report.reasons_of(earlier),
        kept=report.kept_modules(earlier),
        order=order,
    )
    table = [line for line in later.splitlines() if line.startswith("| `stamps/")]
    assert table == [
        "| `stamps/validation.py` | whole module | 10 | 10 | 0 | 0 | 0 | 100.0% | 1 min "
        "| 2026-11-03 10:00 UTC, def5678 |",
        "| `stamps/projections.py` | whole module | 10 | 9 | 1 | 0 | 0 | 90.0% | 1 min "
        "| 2026-11-02 09:00 UTC, abc1234 |",
    ]
    assert (
        "| `stamps.projections.x_b__mutmut_1` | survived | `x → y` | equivalent: same value |"
        in (later)
    )
    assert old_survivor.name not in later
    # A report written before rows named their run: its rows take the run of its header.
    legacy = "\n".join(
        line.rsplit(" | 2026-11-02", 1)[0] + " |" if line.startswith("| `stamps/") else line
        for line in earlier.splitlines()
    )
    assert report.kept_modules(legacy)["stamps/projections.py"].row.endswith(
        "| 2026-11-02 09:00 UTC, abc1234 |"
    )


TEMPLATE_PROBE = """
import pytest

from personas.models import Skill


@pytest.mark.django_db
def test_the_default_skill_map_is_there() -> None:
    assert Skill.objects.exists()
"""

_TWO_SESSIONS = """
import os, subprocess, sys
command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "mutation.order",
           "-v", "-s", "--ds", "virgo.test_settings", "test_probe.py"]
for _ in range(2):
    done = subprocess.run(command, capture_output=True, text=True)
    print(done.returncode, "Creating test database" in done.stdout + done.stderr)
"""


@pytest.mark.live
def test_a_later_session_of_the_run_copies_the_first_migrated_database_in(tmp_path: Path) -> None:
    """Decision 246: of two sessions run by one process (as mutmut forks its clean run, stats
    pass and mutants), the first migrates and keeps its database as a file; the second copies it
    in without migrating, and finds what the migrations loaded (the default skill map)."""
    (tmp_path / "test_probe.py").write_text(TEMPLATE_PROBE)
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DATABASE_URL", "REDIS_URL", "REDIS_CACHE_URL"}
    }
    environment["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", _TWO_SESSIONS],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    assert done.stdout.split("\n")[:2] == ["0 True", "0 False"], done.stdout + done.stderr
    assert len(list(tmp_path.glob(".mutation-test-database-*.sqlite3"))) == 1


@pytest.mark.live
def test_the_run_has_a_redis_of_its_own_for_the_redis_tests_and_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tests marked `mutation` (the card fast path's Redis script) run in a mutation
    run on a Redis it starts: reachable over TCP and its Unix socket while the run lasts, gone
    after it, also when the run is interrupted."""
    monkeypatch.delenv("VIRGO_TEST_REDIS_URL", raising=False)
    monkeypatch.delenv("VIRGO_TEST_REDIS_CACHE_URL", raising=False)
    with pytest.raises(KeyboardInterrupt), run.private_redis():
        urls = [os.environ["VIRGO_TEST_REDIS_URL"], os.environ["VIRGO_TEST_REDIS_CACHE_URL"]]
        assert urls[0].startswith("redis://") and urls[1].startswith("unix://")
        for url in urls:
            assert redis.Redis.from_url(url).ping()
        raise KeyboardInterrupt
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(urls[0], socket_connect_timeout=2).ping()


@pytest.mark.live
def test_a_run_ended_by_sigterm_stops_its_redis() -> None:
    """`pkill`, a CI timeout or a closed terminal's SIGTERM ends a mutation run: its Redis is
    stopped on the way out, not left running."""
    waiting = (
        "import os, time\n"
        "from mutation import run\n"
        "with run.private_redis():\n"
        "    print(os.environ['VIRGO_TEST_REDIS_URL'], flush=True)\n"
        "    time.sleep(120)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", waiting], cwd=run.ROOT, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    assert redis.Redis.from_url(url).ping()
    process.terminate()
    assert process.wait(timeout=60) == 128 + 15
    with pytest.raises(redis.exceptions.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()


def recorded_mutants(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    test_file: str,
    source: str,
    numbers: Iterable[int],
) -> tuple[list[str], Path]:
    """A mutants/ in tmp_path holding one test file and mutmut's record of one module's mutants
    `numbers`, none run yet: their names and the record's path."""
    monkeypatch.setattr(run, "MUTANTS", tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(run.ROOT))
    (tmp_path / test_file).write_text(source)
    names = [f"pkg.mod.x_guard__mutmut_{number}" for number in numbers]
    meta = tmp_path / "pkg" / "mod.py.meta"
    meta.parent.mkdir()
    meta.write_text(json.dumps({"exit_code_by_key": dict.fromkeys(names)}))
    return names, meta


def test_mutants_run_against_named_test_files_are_recorded_where_mutmut_keeps_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with MUTATION_TESTS runs each mutant against those files alone, with mutmut's
    switch (MUTANT_UNDER_TEST) set, and writes a failing test as killed and a pass as survived
    in mutmut's record of the mutant's module; a run that tested nothing is refused, not
    counted as a kill."""
    names, meta = recorded_mutants(
        tmp_path,
        monkeypatch,
        "test_switch.py",
        "import os\n\n\ndef test_the_mutant():\n"
        "    assert not os.environ['MUTANT_UNDER_TEST'].endswith('__mutmut_2')\n",
        (1, 2),
    )

    run.run_against(names, ["test_switch.py"], 2)

    record = json.loads(meta.read_text())
    assert record["exit_code_by_key"] == {names[0]: 0, names[1]: 1}
    assert set(record["durations_by_key"]) == set(names)
    with pytest.raises(SystemExit, match="pytest exited 4"):
        run.run_against(names[:1], ["test_missing.py"], 1)
    assert json.loads(meta.read_text())["exit_code_by_key"][names[0]] == 0


def test_tests_that_fail_with_no_mutant_are_refused_before_any_mutant_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Named test files that fail on the code as it is would count every mutant as killed:
    they run first with no mutant, and the run stops there, recording nothing."""
    names, meta = recorded_mutants(
        tmp_path, monkeypatch, "test_broken.py", "def test_broken():\n    assert False\n", [1]
    )
    with pytest.raises(SystemExit, match=r"pytest exited 1 on test_broken\.py with no mutant"):
        run.run_against(names, ["test_broken.py"], 1)
    assert json.loads(meta.read_text())["exit_code_by_key"] == dict.fromkeys(names)


def test_a_mutant_that_never_ends_is_stopped_and_counted_a_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mutant whose tests run on far past the time they take with no mutant (a loop without
    end, a pattern backtracking for hours) is stopped and recorded as mutmut records a
    timeout, which the report does not count as killed; the other mutants run on."""
    monkeypatch.setattr(run, "TIMEOUT_SLACK_SECONDS", 3.0)
    names, meta = recorded_mutants(
        tmp_path,
        monkeypatch,
        "test_loop.py",
        "import os, time\n\n\ndef test_the_loop():\n"
        "    while os.environ['MUTANT_UNDER_TEST'].endswith('__mutmut_1'):\n"
        "        time.sleep(0.1)\n",
        (1, 2),
    )
    run.run_against(names, ["test_loop.py"], 2)
    record = json.loads(meta.read_text())
    assert record["exit_code_by_key"] == {names[0]: run.TIMED_OUT, names[1]: 0}
    assert record["durations_by_key"][names[0]] < 60


def test_children_on_postgresql_each_have_a_database_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With DATABASE_URL naming a PostgreSQL (how the PostgreSQL-only search code is mutated),
    each child of a run against named test files gets a database of its own, so two children
    at once never create or empty one test database; on SQLite nothing changes."""
    monkeypatch.setenv("DATABASE_URL", "postgres://virgo:pw@127.0.0.1:5433/virgo")
    assert run.database_of_child(1) == {
        "DATABASE_URL": "postgres://virgo:pw@127.0.0.1:5433/virgo_mutant1"
    }
    # Each test holds its database's name while it runs: a second holder at once fails.
    names, meta = recorded_mutants(
        tmp_path,
        monkeypatch,
        "test_database.py",
        "import os, time\n\n\ndef test_alone_on_its_database():\n"
        "    held = os.environ['DATABASE_URL'].rsplit('/', 1)[1]\n"
        "    fd = os.open(held, os.O_CREAT | os.O_EXCL)\n"
        "    time.sleep(0.3)\n"
        "    os.close(fd)\n"
        "    os.remove(held)\n"
        "    open('seen', 'a').write(held + '\\n')\n",
        range(1, 5),
    )
    run.run_against(names, ["test_database.py"], 2)
    assert json.loads(meta.read_text())["exit_code_by_key"] == dict.fromkeys(names, 0)
    assert set((tmp_path / "seen").read_text().split()) == {"virgo_mutant0", "virgo_mutant1"}
    for url in ("sqlite:///tmp/virgo.sqlite3", ""):
        monkeypatch.setenv("DATABASE_URL", url)
        assert run.database_of_child(0) == {}


def test_mutmuts_own_run_is_on_sqlite_whatever_the_shell_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mutmut forks its children from one process, which would share one PostgreSQL test
    database: its run never sees a DATABASE_URL the shell holds."""
    seen = tmp_path / "seen"
    fake = tmp_path / "mutmut"
    fake.write_text(f'#!/bin/bash\necho "${{DATABASE_URL-unset}}" > {seen}\n')
    fake.chmod(0o755)
    monkeypatch.setattr(run, "MUTMUT", fake)
    monkeypatch.setenv("DATABASE_URL", "postgres://virgo:pw@127.0.0.1:5433/virgo")
    run.mutmut_run(["--max-children"], minutes=None)
    assert seen.read_text() == "unset\n"


def test_named_test_files_need_the_last_runs_mutants() -> None:
    """MUTATION_TESTS re-runs what the last run let through; without MUTATION_KEEP there is no
    last run to take them from, and the run says so before it deletes anything."""
    with pytest.raises(SystemExit, match="MUTATION_KEEP"):
        run.main(["--tests", "tests/test_card_fastpath.py"])


def test_a_module_with_a_mutant_not_run_is_unfinished() -> None:
    """A run stopped at its budget counts only the modules it finished: one with a mutant
    mutmut never reached, or was running when it stopped, is unfinished."""
    mutants = [
        Mutant("stamps.validation.x_a__mutmut_1", "killed"),
        Mutant("stamps.validation.x_a__mutmut_2", "survived"),
        Mutant("stamps.projections.x_b__mutmut_1", "killed"),
        Mutant("stamps.projections.x_b__mutmut_2", "not checked"),
        Mutant("stamps.grant.x_c__mutmut_1", "check was interrupted by user"),
    ]
    modules = ["stamps/grant.py", "stamps/validation.py", "stamps/projections.py"]
    assert report.unfinished_modules(mutants, modules) == [
        "stamps/grant.py",
        "stamps/projections.py",
    ]
    assert report.unfinished_modules(mutants[:3], modules) == []


def test_a_stopped_runs_report_names_what_it_did_not_finish() -> None:
    """The header says which modules a stopped run did not finish; a finished run says nothing."""
    rows = [ModuleScore("stamps/validation.py", "whole module", 9, 1, 0, 0, 60.0)]
    stopped = dataclasses.replace(INFO, unfinished=("stamps/projections.py",))
    assert (
        "- stopped at its time budget: `stamps/projections.py` did not finish and keep their "
        "earlier rows and survivors" in report.render(stopped, rows, [], {})
    )
    assert "stopped at" not in report.render(INFO, rows, [], {})


def test_a_run_past_its_budget_is_stopped_with_its_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MUTATION_MINUTES: mutmut is interrupted as by Ctrl-C when the budget ends (so it keeps
    what it finished), and a worker it started stops with it; a run that fails still says so."""
    pid_file = tmp_path / "worker.pid"
    fake = tmp_path / "mutmut"
    fake.write_text(
        "#!/bin/bash\n"
        '[ "$2" = "fail" ] && exit 3\n'
        f"sleep 300 & echo $! > {pid_file}\n"
        "trap 'exit 0' INT\n"
        "while true; do sleep 0.1; done\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(run, "MUTMUT", fake)

    run.mutmut_run(["--max-children"], minutes=0.02)

    assert not _alive(int(pid_file.read_text()))
    pid_file.unlink()
    # A Ctrl-C or SIGTERM of the run (raised while it waits) stops mutmut's session too.
    monkeypatch.setattr(subprocess.Popen, "wait", _interrupted_once(subprocess.Popen.wait))
    with pytest.raises(KeyboardInterrupt):
        run.mutmut_run(["--max-children"], minutes=None)
    assert not _alive(int(pid_file.read_text()))
    with pytest.raises(SystemExit, match="exit status 3"):
        run.mutmut_run(["fail"], minutes=None)


def _interrupted_once(wait: Callable[..., int]) -> Callable[..., int]:
    """Popen.wait raising KeyboardInterrupt the first time it is called without a timeout, once
    the process has started its worker (as Ctrl-C interrupts a wait)."""
    interrupted = []

    def waiting(process: subprocess.Popen[bytes], timeout: float | None = None) -> int:
        if timeout is None and not interrupted:
            interrupted.append(True)
            time.sleep(1)
            raise KeyboardInterrupt
        return wait(process, timeout)

    return waiting


def _alive(pid: int) -> bool:
    """Whether `pid` still runs, given a moment to be reaped (a killed orphan is a zombie until
    its new parent waits for it)."""
    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in {"Z", "X"}:
            return False
        time.sleep(0.1)
    return True


def test_the_mutant_under_test_outlives_a_test_that_empties_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A launcher test deletes every environment variable to control what an agent sees: the
    plugin hands the mutant MUTANT_UNDER_TEST names at a session's start to mutmut's trampoline,
    which keeps it in the process, or that test would run the original code and pass any
    mutant. (mutmut itself is installed for `make mutation` only, so its trampoline is stood in
    for here; `make mutation` is the real run.)"""
    kept: list[str] = []
    trampoline = types.ModuleType("mutmut.mutation.trampoline")
    trampoline.set_mutant_under_test = kept.append  # type: ignore[attr-defined]
    for name in ("mutmut", "mutmut.mutation"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "mutmut.mutation.trampoline", trampoline)
    monkeypatch.delenv("MUTANT_UNDER_TEST", raising=False)
    order.keep_mutant_under_test()
    assert kept == []
    monkeypatch.setenv("MUTANT_UNDER_TEST", "serving.handoff.x_visible_environment__mutmut_4")
    order.keep_mutant_under_test()
    assert kept == ["serving.handoff.x_visible_environment__mutmut_4"]
