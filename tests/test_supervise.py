"""virgo.supervise, the supervisor of `make serve`, over small real programs (VX-REL-4): one that
dies is started again while the others run on, quick deaths wait longer each time, status 2
stops everything, and SIGTERM stops every program."""

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.live import wait_until

TIMEOUT = 60.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its parent) is not running.
    try:
        status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return status != "Z"


@dataclass
class Supervised:
    directory: Path
    process: subprocess.Popen[bytes]
    log: Path

    def pids(self, name: str) -> list[int]:
        path = self.directory / f"{name}.pids"
        return [int(line) for line in path.read_text().split()] if path.exists() else []

    def started(self, name: str, times: int) -> int:
        """The pid of the `times`-th start of program `name`, once it has started that often."""
        wait_until(lambda: len(self.pids(name)) >= times, what=f"{name} to start", timeout=TIMEOUT)
        return self.pids(name)[times - 1]

    def said(self) -> str:
        return self.log.read_text()


@pytest.fixture
def supervise(tmp_path: Path) -> Iterator:
    started: list[Supervised] = []

    def start(*options: str, **programs: str) -> Supervised:
        """Each program is `sh -c SCRIPT`, which first records its pid in NAME.pids; `options` go
        before them."""
        arguments = [
            f"{name}: sh -c 'echo $$ >> {tmp_path}/{name}.pids; {script}'"
            for name, script in programs.items()
        ]
        log = tmp_path / "supervisor.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "virgo.supervise", *options, *arguments],
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        supervised = Supervised(tmp_path, process, log)
        started.append(supervised)
        return supervised

    yield start
    for supervised in started:
        if supervised.process.poll() is None:
            supervised.process.terminate()
            supervised.process.wait(timeout=TIMEOUT)


def test_a_program_that_dies_is_started_again_while_the_others_run_on(supervise) -> None:
    """VX-REL-4: SIGKILL one program: a log line says so and it starts again; the other keeps
    its process all along."""
    supervised = supervise(worker="exec sleep 600", web="exec sleep 600")
    worker, web = supervised.started("worker", 1), supervised.started("web", 1)
    os.kill(worker, signal.SIGKILL)
    again = supervised.started("worker", 2)
    assert again != worker and alive(again)
    assert supervised.pids("web") == [web] and alive(web)
    # The program records its pid as it starts, which can be before the supervisor logs it.
    wait_until(
        lambda: f"worker started (pid {again})" in supervised.said(),
        what="the restart logged",
        timeout=TIMEOUT,
    )
    log = supervised.said()
    assert f"worker (pid {worker}) was killed by SIGKILL after " in log
    assert "starting it again in 1s, the others keep serving" in log


def test_what_a_dead_program_left_in_its_session_goes_with_it(supervise, tmp_path: Path) -> None:
    """VX-REL-4: a web server's own workers outlive their killed parent unless the supervisor
    ends them: the whole session of the dead program is killed before it starts again."""
    supervised = supervise(web=f"sleep 600 & echo $! > {tmp_path}/child.pid; wait")
    parent = supervised.started("web", 1)
    wait_until(lambda: (tmp_path / "child.pid").exists(), what="the child", timeout=TIMEOUT)
    child = int((tmp_path / "child.pid").read_text())
    os.kill(parent, signal.SIGKILL)
    supervised.started("web", 2)
    wait_until(lambda: not alive(child), what="the orphaned child to be killed", timeout=TIMEOUT)


def test_quick_deaths_wait_longer_each_time(supervise) -> None:
    """VX-REL-4: a program that keeps failing is started again after 1 s, then 2 s, then 4 s."""
    supervised = supervise(flaky="exit 1")
    supervised.started("flaky", 4)
    delays = [
        line.rsplit("starting it again in ", 1)[1].split("s,")[0]
        for line in supervised.said().splitlines()
        if "exited with status 1" in line
    ]
    assert delays[:3] == ["1", "2", "4"]


def test_a_misconfigured_program_stops_everything_with_status_2(supervise) -> None:
    """VX-REL-4, VX-OPS-2: status 2 says a setting is wrong: starting again cannot help, so
    every program is stopped and the supervisor exits 2."""
    supervised = supervise(worker="exec sleep 600", web="sleep 1; exit 2")
    worker = supervised.started("worker", 1)
    assert supervised.process.wait(timeout=TIMEOUT) == 2
    assert not alive(worker)
    assert len(supervised.pids("web")) == 1
    assert "web exited with status 2: a setting it cannot use" in supervised.said()
    assert "worker stopped" in supervised.said()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_stops_every_program(supervise, signum: signal.Signals) -> None:
    """VX-REL-4: the supervisor stops every program (SIGTERM each), then exits."""
    supervised = supervise(worker="exec sleep 600", web="exec sleep 600")
    pids = [supervised.started("worker", 1), supervised.started("web", 1)]
    supervised.process.send_signal(signum)
    assert supervised.process.wait(timeout=TIMEOUT) == 0
    assert not any(alive(pid) for pid in pids)
    assert "worker stopped" in supervised.said() and "web stopped" in supervised.said()


@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGKILL])
def test_a_program_is_stopped_with_the_signal_named_for_it(
    supervise, tmp_path: Path, ending: signal.Signals
) -> None:
    """VX-SCALE-4: `--stop-signal postgres=SIGINT` (PostgreSQL's fast stop; its SIGTERM waits
    for every client to leave): that program gets SIGINT, the others SIGTERM, whether the
    supervisor stops them (SIGTERM) or is killed (SIGKILL: the kernel sends them)."""

    def telling(name: str) -> str:
        got = tmp_path / f"{name}.got"
        # A short sleep at a time: the shell runs its trap between two, and leaves no child.
        return (
            f'trap "echo SIGINT > {got}; exit 0" INT; trap "echo SIGTERM > {got}; exit 0" TERM; '
            f"touch {tmp_path}/{name}.trapping; while :; do sleep 0.1; done"
        )

    supervised = supervise(
        "--stop-signal", "postgres=SIGINT", postgres=telling("postgres"), web=telling("web")
    )
    wait_until(
        lambda: all((tmp_path / f"{name}.trapping").exists() for name in ("postgres", "web")),
        what="both programs to trap their signals",
        timeout=TIMEOUT,
    )
    supervised.process.send_signal(ending)
    assert supervised.process.wait(timeout=TIMEOUT) == (0 if ending == signal.SIGTERM else -9)

    def got() -> dict[str, str]:
        return {
            name: (tmp_path / f"{name}.got").read_text().strip()
            for name in ("postgres", "web")
            if (tmp_path / f"{name}.got").exists()
        }

    wait_until(lambda: all(got().get(name) for name in ("postgres", "web")), what="the signals")
    assert got() == {"postgres": "SIGINT", "web": "SIGTERM"}


def test_a_stop_signal_that_is_no_signal_is_a_usage_error() -> None:
    """VX-SCALE-4, VX-OPS-2: a --stop-signal it cannot use is one line and status 2, before any
    program starts."""
    done = subprocess.run(
        [sys.executable, "-m", "virgo.supervise", "--stop-signal", "web=SIGNONE", "web: true"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "python -m virgo.supervise: --stop-signal 'web=SIGNONE' is not NAME=SIGNAL "
        "(e.g. postgres=SIGINT)"
    ]
    assert not done.stdout


def test_a_killed_supervisor_takes_its_programs_with_it(supervise) -> None:
    """VX-REL-4: SIGKILL the supervisor itself: its programs get SIGTERM from the kernel and
    end, instead of running on unsupervised, holding their ports."""
    supervised = supervise(worker="exec sleep 600", web="exec sleep 600")
    pids = [supervised.started("worker", 1), supervised.started("web", 1)]
    supervised.process.kill()
    supervised.process.wait(timeout=TIMEOUT)
    try:
        wait_until(
            lambda: not any(alive(pid) for pid in pids), what="the programs to end", timeout=10
        )
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_supervisor_in_a_session_of_its_own_ends_with_the_script_that_started_it(
    tmp_path: Path,
) -> None:
    """VX-SCALE-3: `make serve` starts the supervisor with setsid, out of reach of its process
    group's signals; should the script itself be SIGKILLed, the supervisor gets SIGTERM
    (VIRGO_SUPERVISE_WITH_PARENT) and stops its programs instead of running on alone."""
    pids = tmp_path / "pids"
    script = (
        f"VIRGO_SUPERVISE_WITH_PARENT=1 setsid {sys.executable} -m virgo.supervise "
        f"\"sleeper: sh -c 'echo $$ >> {pids}; exec sleep 600'\" & "
        f"echo $! > {tmp_path}/supervisor; wait"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    script_process = subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True)
    try:
        wait_until(lambda: pids.exists() and pids.read_text().strip(), what="the program")
        supervisor = int((tmp_path / "supervisor").read_text())
        sleeper = int(pids.read_text().split()[0])
        assert os.getpgid(supervisor) != script_process.pid
        script_process.kill()
        script_process.wait(timeout=TIMEOUT)
        wait_until(
            lambda: not alive(supervisor) and not alive(sleeper),
            what="the supervisor and its program to stop",
            timeout=TIMEOUT,
        )
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(script_process.pid, signal.SIGKILL)
