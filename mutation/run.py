"""`make mutation`: mutmut over the enforcement code, then docs/mutation.md (issues 11, 22).

The modules are pyproject.toml's `[tool.mutmut] only_mutate`; of personas/services/ only the
subset and skill rules are mutated (FUNCTIONS: in its derivation.py and validation.py), and of
cards/views.py the tombstone answer. mutmut copies the packages into mutants/, runs the non-live
suite (and the live tests marked `mutation`, with a Redis this run starts) once to learn which
tests call which function, then runs each mutant against only those tests. A run starts from an
empty mutants/; --keep reuses the last one and runs again only the mutants it let through (for
tests added since; a changed source module needs a fresh run). mutmut's own runs are on SQLite;
--tests with DATABASE_URL naming a PostgreSQL runs those files on it, for the code only
PostgreSQL runs.

    .venv/bin/python -m mutation.run [--modules runtime/handler.py,...] [--children 2] [--keep]
        [--minutes 120]
"""

import argparse
import contextlib
import datetime
import fnmatch
import json
import os
import platform
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mutation import changes, report

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
DOC = ROOT / "docs" / "mutation.md"
MUTMUT = Path(sys.executable).parent / "mutmut"

# The rest of personas/services/ is write orchestration, not a guard; these are the rules
# that keep a persona inside its agent's grant (S9-REC-4) and derive its skills (S9-SKL-2).
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "personas/services/derivation.py": ("derive_skills", "provider_and_identity", "shown_subject"),
    "personas/services/validation.py": (
        "validate_scope",
        "validate_grant",
        "_require_string_list",
        # Two live personas of one owner never share an address (VX-GRANT-5).
        "_address_holder",
    ),
    # Who may write what of an owner's identity, and the OIDC account rule (VX-ID-1, VX-ID-4).
    "personas/services/identities.py": (
        "owner_identity_update",
        "identity_proven",
        "identity_signin",
    ),
    # The rest of the card view is the ordinary card response (tests/test_card_endpoint.py);
    # these answer for a revoked persona or generation, and for a machine that cannot sign or
    # whose public base URL differs from the installation's (VX-SCALE-4): a 503, never a 500.
    "cards/views.py": ("_gone", "_try_later", "cannot_sign", "base_url_mismatch"),
    # What a launch gives the agent; its MCP server's thread and the process it waits on are
    # the live tests' (tests/test_launch_server.py, test_launch_sandbox.py, test_agent_claude.py).
    "serving/launcher.py": (
        "allowlist",
        "server_settings",
        "passed_names",
        "agent_environment",
        "mcp_servers",
        "prepare_agent_home",
        "invocation",
    ),
    # What an agent host's launch refuses and where its agent's home is; the relay and the
    # process it waits on are the live tests' (tests/test_remote_launch.py).
    "serving/remote_launch.py": ("agent_command", "passed_names", "agent_home_of"),
    # The files and the environment a launch hands the agent; the loopback server is the live
    # tests' (tests/test_launch_server.py, test_remote_launch.py).
    "serving/handoff.py": (
        "visible_environment",
        "write_private",
        "write_private_json",
        "remote_mcp_config",
    ),
    # What an agent host keeps and whom it believes: its token file, the one redirect it takes
    # a code from, the issuer it trusts, refreshing; `host_parser` and `main` are its command
    # line (tests/test_remote_mcp_live.py runs it).
    "serving/connect.py": (
        "TokenFile.__init__",
        "TokenFile._read",
        "TokenFile.expired",
        "TokenFile.get_tokens",
        "TokenFile.set_tokens",
        "TokenFile.set_client_info",
        "TokenFile.forget",
        "Redirect.__init__",
        "Redirect.code",
        "Redirect.send_owner",
        "issuer_of",
        "default_tokens",
        "refresh_if_expired",
        "connect",
        "_no_owner",
        "_no_code",
    ),
    # What a call is decided under: the stamp verified, refused and quarantined, and the copy a
    # process keeps while the persona's token stands (issue 41: decide's cache). The rest
    # (the stamp's tool bindings and workspaces, the owner's words for a persona that does not
    # stand) is what the handler's and the workspace's rows already mutate through their tests.
    "runtime/stamp.py": (
        "load_active_stamp",
        "read_active_stamp",
        "revocation_of",
        "_refuse",
        "_quarantine",
    ),
    # The command's refusals and what it prints; `_run` starts the agent (the live tests').
    "serving/management/commands/launch.py": (
        "Command.handle",
        "Command._agent_command",
        "Command._confinement",
        "Command._sandbox",
        "Command._warn_and_audit",
        "Command._print_check",
    ),
}

_RESULT_LINE = re.compile(r"^\s+(\S+): (.+)$")


def configured_modules() -> list[str]:
    """The modules mutmut may mutate, in pyproject.toml's order."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(config["tool"]["mutmut"]["only_mutate"])


def selected_modules(requested: str, known: list[str]) -> list[str]:
    """The modules named (comma- or space-separated paths), or all; an unknown one is an error."""
    names = [name for name in re.split(r"[,\s]+", requested) if name]
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(
            f"MUTATION_MODULES: unknown module {', '.join(unknown)}; one of {', '.join(known)}"
        )
    return names or known


def patterns(module: str) -> list[str]:
    """mutmut's mutant-name globs for a module: the whole module or only FUNCTIONS."""
    dotted = module.removesuffix(".py").replace("/", ".")
    functions = FUNCTIONS.get(module)
    if functions is None:
        return [f"{dotted}.*"]
    return [f"{dotted}.{_mangled(name)}__mutmut_*" for name in functions]


def _mangled(name: str) -> str:
    """mutmut's name for a function (x_function) or a method named Class.method (xǁClassǁmethod)."""
    return f"xǁ{name.replace('.', 'ǁ')}" if "." in name else f"x_{name}"


def mangled_names(scope_cell: str) -> set[str] | None:
    """The functions a report row's `mutated` cell names, by mutmut's names (None: all)."""
    if scope_cell == "whole module":
        return None
    return {_mangled(name) for name in re.findall(r"`([^`]+)`", scope_cell)}


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def source_at(commit: str, module: str) -> str | None:
    """`module` as it was at `commit`, under the name it had then (git follows a rename);
    None when that commit is not here or the module did not exist at it."""
    renames = _git("log", "--follow", "--name-status", "--format=", f"{commit}..HEAD", "--", module)
    path = module
    for line in renames.stdout.splitlines():
        status, *paths = line.split("\t")
        if status.startswith("R") and len(paths) == 2 and paths[1] == path:
            path = paths[0]  # newest first: each rename leads to the name before it
    shown = _git("show", f"{commit}:{path}")
    return shown.stdout if shown.returncode == 0 else None


def carry_unchanged(module: str, kept: report.KeptModule) -> str | None:
    """Record as killed, in mutants/, the mutants of `module` that its kept row counted as
    killed and whose function has not changed since that row's commit (mutation/changes.py):
    only the rest then run again. The commit carried from; None when nothing can be carried
    (no such commit here, or a timeout or other outcome the row does not say which mutant had).
    """
    cells = report.row_cells(kept.row)
    if cells.timed_out or cells.other:
        return None
    before = source_at(cells.commit, module)
    if before is None:
        return None
    changed = changes.changed_functions(before, (ROOT / module).read_text())
    in_scope = mangled_names(cells.scope)
    survivors = set(report.survivor_names(kept))
    meta = MUTANTS / f"{module}.meta"
    record = json.loads(meta.read_text())
    carried = [
        name
        for name in record["exit_code_by_key"]
        if (function := changes.function_of(name)) not in changed
        and (in_scope is None or function in in_scope)
        and name not in survivors
    ]
    if len(carried) > cells.killed:
        raise SystemExit(
            f"{module}: {len(carried)} unchanged mutants but its row at {cells.commit} killed "
            f"{cells.killed}: mutants/ is not of the code that row ran"
        )
    for name in carried:
        record["exit_code_by_key"][name] = 1
    meta.write_text(json.dumps(record))
    # Kept beside mutmut's records (which take no key of ours), so a later run over the same
    # mutants/, one that reruns only what survived, still says where these came from.
    found = _carried()
    found[module] = {"commit": cells.commit, "mutants": carried}
    (MUTANTS / CARRIED_FILE).write_text(json.dumps(found))
    return cells.commit


# Which of mutants/'s outcomes MUTATION_CHANGED carried, and from which commit, by module.
CARRIED_FILE = "virgo-carried.json"


def _carried() -> dict[str, Any]:
    path = MUTANTS / CARRIED_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def carried_commits(modules: list[str]) -> dict[str, str]:
    """The commit each module's carried outcomes come from, while mutants/ still holds one of
    them (mutmut forgets a module's outcomes when it makes its mutants afresh)."""
    found = _carried()
    commits = {}
    for module in modules:
        meta = MUTANTS / f"{module}.meta"
        if module not in found or not meta.exists():
            continue
        outcomes = json.loads(meta.read_text())["exit_code_by_key"]
        if any(outcomes.get(name) == 1 for name in found[module]["mutants"]):
            commits[module] = found[module]["commit"]
    return commits


def scope(module: str) -> str:
    functions = FUNCTIONS.get(module)
    return ", ".join(f"`{name}`" for name in functions) if functions else "whole module"


def mutmut(*args: str, capture: bool = False) -> str:
    done = subprocess.run([str(MUTMUT), *args], cwd=ROOT, text=True, capture_output=capture)
    if done.returncode != 0:
        # mutmut has said why (a failing clean run, a test it cannot collect); no traceback.
        raise SystemExit(f"mutmut {args[0]} failed with exit status {done.returncode}")
    return done.stdout if capture else ""


def mutmut_run(args: list[str], minutes: float | None) -> None:
    """`mutmut run`, ended after `minutes` if given: what it finished by then stays in its
    records, and the report counts only the modules it finished."""
    # Its own session, so that stopping it stops its test processes and nothing else. Always
    # on SQLite, whatever the shell holds: its forked children would share one PostgreSQL test
    # database.
    process = subprocess.Popen(
        [str(MUTMUT), "run", *args],
        cwd=ROOT,
        start_new_session=True,
        env={name: value for name, value in os.environ.items() if name != "DATABASE_URL"},
    )
    try:
        code = process.wait(timeout=minutes * 60 if minutes else None)
    except subprocess.TimeoutExpired:
        _stop(process)
        return
    except BaseException:
        # Ctrl-C or SIGTERM reaches this process only, not the session mutmut runs in.
        _stop(process)
        raise
    if code != 0:
        raise SystemExit(f"mutmut run failed with exit status {code}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    # SIGINT is mutmut's Ctrl-C: it stops its workers and keeps what they finished.
    os.killpg(process.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=60)
    # Whatever of its session outlived it (a test's server, a worker that ignored SIGINT).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def results(globs: list[str]) -> list[report.Mutant]:
    """Every mutant matching the globs, with mutmut's word for its outcome."""
    mutants = []
    for line in mutmut("results", "--all", "true", capture=True).splitlines():
        match = _RESULT_LINE.match(line)
        if match and any(fnmatch.fnmatch(match[1], glob) for glob in globs):
            mutants.append(report.Mutant(match[1], match[2]))
    return mutants


def with_change(mutant: report.Mutant) -> report.Mutant:
    diff = mutmut("show", mutant.name, capture=True)
    return report.Mutant(mutant.name, mutant.status, report.one_line_change(diff))


def seconds_by_mutant(modules: list[str]) -> dict[str, float]:
    """How long each mutant's tests ran, from mutmut's per-file records (missing: none)."""
    seconds: dict[str, float] = {}
    for module in modules:
        meta = MUTANTS / f"{module}.meta"
        if meta.exists():
            seconds.update(json.loads(meta.read_text()).get("durations_by_key", {}))
    return seconds


@contextlib.contextmanager
def private_redis() -> Iterator[None]:
    """A Redis of the run's own (scripts/lib.sh, nothing kept on disk) for the tests marked
    `mutation` that need one: the guard code's Redis paths are mutated too, and only a real
    Redis tells their mutants apart. Stopped when the run ends or is interrupted, by Ctrl-C or
    by SIGTERM (which would otherwise end the process without unwinding)."""
    with tempfile.TemporaryDirectory(prefix="virgo-mutation-") as directory:
        redis = Path(directory) / "redis"
        subprocess.run(_redis_script("start", redis, "fast"), cwd=ROOT, check=True)
        previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
        try:
            found = dict(
                line.split("=", 1) for line in (redis / "env").read_text().splitlines() if line
            )
            os.environ["VIRGO_TEST_REDIS_URL"] = found["REDIS_URL"]
            os.environ["VIRGO_TEST_REDIS_CACHE_URL"] = found.get("REDIS_CACHE_URL", "")
            yield
        finally:
            subprocess.run(_redis_script("stop", redis), cwd=ROOT, check=False)
            signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _redis_script(action: str, *arguments: object) -> list[str]:
    """scripts/lib.sh's redis_start or redis_stop, as `make test` starts its Redis."""
    return ["bash", "-c", f'. scripts/lib.sh && redis_{action} "$@"', "bash", *map(str, arguments)]


# A mutant that loops or backtracks without end would hold its child for ever: one that runs
# this many times as long as the tests did without a mutant (and a minute more) is stopped and
# counted as mutmut counts a timeout.
TIMEOUT_FACTOR = 5
TIMEOUT_SLACK_SECONDS = 60.0
TIMED_OUT = 36


def run_against(names: list[str], tests: list[str], children: int) -> None:
    """Each mutant against `tests` alone, as mutmut runs one (its mutants/, MUTANT_UNDER_TEST,
    pytest -x with pyproject's arguments), `children` at a time; each outcome is written to
    mutmut's own record of the mutant's module, where `mutmut results` and this report read it.

    The tests run first with no mutant: they must pass (else every mutant would count as
    killed), and how long they take bounds each mutant's run.
    """
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    slots: queue.SimpleQueue[int] = queue.SimpleQueue()
    for slot in range(children):
        slots.put(slot)

    def pytest_exit(mutant: str, slot: int, timeout: float | None) -> int:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", *config["pytest_add_cli_args"], *tests],
            cwd=MUTANTS,
            env={**os.environ, "MUTANT_UNDER_TEST": mutant, **database_of_child(slot)},
            capture_output=True,
            timeout=timeout,
        )
        return done.returncode

    started = time.monotonic()
    clean_exit = pytest_exit("", 0, None)
    if clean_exit != 0:
        raise SystemExit(f"pytest exited {clean_exit} on {', '.join(tests)} with no mutant")
    timeout = TIMEOUT_FACTOR * (time.monotonic() - started) + TIMEOUT_SLACK_SECONDS

    def outcome(name: str) -> tuple[str, int, float]:
        started = time.monotonic()
        slot = slots.get()
        try:
            exit_code = pytest_exit(name, slot, timeout)
        except subprocess.TimeoutExpired:
            exit_code = TIMED_OUT
        finally:
            slots.put(slot)
        return name, exit_code, time.monotonic() - started

    with ThreadPoolExecutor(children) as pool:
        for name, exit_code, seconds in pool.map(outcome, names):
            # pytest's 1 is a failing test; anything but that, a pass or a timeout (no test
            # collected, a usage or internal error) says nothing of the mutant and must not
            # count as a kill.
            if exit_code not in (0, 1, TIMED_OUT):
                raise SystemExit(f"{name}: pytest exited {exit_code} on {', '.join(tests)}")
            meta = MUTANTS / f"{report.Mutant(name, '').module}.meta"
            record = json.loads(meta.read_text())
            record["exit_code_by_key"][name] = exit_code
            record.setdefault("durations_by_key", {})[name] = seconds
            meta.write_text(json.dumps(record))


def database_of_child(slot: int) -> dict[str, str]:
    """The DATABASE_URL of the child in `slot` when the run is given a PostgreSQL (the code
    only PostgreSQL runs, tests/test_ard_registry_postgres.py): a database of its own, so that
    children running at once never create or empty each other's test database. Nothing to
    change for SQLite, whose test databases live in each process's memory."""
    url = os.environ.get("DATABASE_URL", "")
    parts = urlsplit(url)
    if not parts.scheme.startswith(("postgres", "pgsql")):
        return {}
    return {"DATABASE_URL": urlunsplit(parts._replace(path=f"{parts.path}_mutant{slot}"))}


def git_commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, check=True, text=True, capture_output=True
        ).stdout.strip()

    # The report itself is edited between runs (the reasons are written by hand), so it does
    # not make the code the run mutated any different from the commit.
    changed = git("status", "--porcelain", "--", ".", f":!{DOC.relative_to(ROOT)}")
    dirty = " (with uncommitted changes)" if changed else ""
    return git("rev-parse", "--short", "HEAD") + dirty


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", default="", help="comma- or space-separated module paths")
    parser.add_argument("--children", type=int, default=2, help="mutants run at a time")
    parser.add_argument(
        "--keep", action="store_true", help="rerun only what the last run let through"
    )
    parser.add_argument(
        "--tests", default="", help="with --keep: run those mutants against these test files"
    )
    parser.add_argument(
        "--changed",
        action="store_true",
        help="with --keep: run again only the mutants of functions changed since each module's "
        "row; the others keep that row's outcome",
    )
    parser.add_argument(
        "--minutes", type=float, help="stop after this long; report the modules finished by then"
    )
    parser.add_argument("--report", type=Path, default=DOC)
    args = parser.parse_args(argv)
    tests = [name for name in re.split(r"[,\s]+", args.tests) if name]
    modules = selected_modules(args.modules, configured_modules())
    globs = [glob for module in modules for glob in patterns(module)]

    # The commit the mutants are copied from: one made while they run is not what they mutated.
    commit = git_commit()
    previous = args.report.read_text() if args.report.exists() else ""
    if args.changed:
        if not (args.keep and MUTANTS.exists()):
            raise SystemExit("MUTATION_CHANGED needs MUTATION_KEEP=1 and the last run's mutants/")
        kept = report.kept_modules(previous)
        for module in modules:
            if module in kept:
                carry_unchanged(module, kept[module])
    rerun: list[str] | None = None
    if args.keep and MUTANTS.exists():
        # Only what the last run let through: the tests added since are all that changed.
        rerun = [m.name for m in results(globs) if m.listed]
    elif tests:
        raise SystemExit("MUTATION_TESTS needs MUTATION_KEEP=1 and the last run's mutants/")
    else:
        shutil.rmtree(MUTANTS, ignore_errors=True)
    started = time.monotonic()
    if rerun != []:
        with private_redis():
            if tests and rerun is not None:
                run_against(rerun, tests, args.children)
            else:
                mutmut_run(
                    ["--max-children", str(args.children), *(globs if rerun is None else rerun)],
                    args.minutes,
                )
    wall_seconds = time.monotonic() - started

    everything = results(globs)
    unfinished = report.unfinished_modules(everything, modules)
    finished = [module for module in modules if module not in unfinished]
    mutants = sorted(
        (m for m in everything if m.module not in unfinished), key=lambda m: m.sort_key
    )
    listed = [with_change(m) for m in mutants if m.listed]
    rows = report.score_modules(
        mutants,
        {module: scope(module) for module in finished},
        seconds_by_mutant(finished),
        carried_commits(finished),
    )
    info = report.RunInfo(
        date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        tool=f"mutmut {metadata.version('mutmut')}",
        python=platform.python_version(),
        django=metadata.version("Django"),
        commit=commit,
        children=args.children,
        wall_seconds=wall_seconds,
        # What it ran, its unfinished modules' too, not only what the rows count.
        mutants_run=len(rerun)
        if rerun is not None
        else sum(m.status not in report.NOT_RUN for m in everything),
        command="make mutation"
        + (f" MUTATION_MODULES={','.join(modules)}" if args.modules else "")
        + (" MUTATION_KEEP=1" if args.keep else "")
        + (" MUTATION_CHANGED=1" if args.changed else "")
        + (f" MUTATION_TESTS={','.join(tests)}" if tests else "")
        + (" on PostgreSQL (DATABASE_URL)" if tests and database_of_child(0) else "")
        + (f" MUTATION_MINUTES={args.minutes:g}" if args.minutes else ""),
        unfinished=tuple(unfinished),
    )
    args.report.write_text(
        report.render(
            info,
            rows,
            listed,
            report.reasons_of(previous),
            kept=report.kept_modules(previous),
            order=configured_modules(),
        )
    )
    for row in rows:
        print(
            f"{row.module}: {row.killed}/{row.total} killed ({row.score:.1%}), "
            f"{row.survived} survived, {row.timed_out} timed out, {row.other} other"
        )
    if unfinished:
        print(f"stopped at {args.minutes:g} min before finishing: {', '.join(unfinished)}")
    print(f"wrote {args.report}")


if __name__ == "__main__":
    main()
