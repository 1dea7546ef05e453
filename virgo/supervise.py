"""`python -m virgo.supervise "NAME: COMMAND" ...`: keep processes running (make serve, VX-REL-4).

Each program (a Procfile-like `name: command line`, split as a POSIX shell would) runs in a
session of its own, so a terminal's Ctrl-C reaches only this supervisor, which stops them in
order. A program that dies is started again after a delay that doubles with each quick death
(1 s, 2 s, 4 s ... at most 30 s; back to 1 s once it had run 30 s), with a log line saying what
ended it, while the others keep serving. What a dead program left behind in its session (the
workers of a web server or a Celery pool whose parent was killed) is killed with it, so the new
one finds its port and its queue free.

A program that exits with status 2 reported a setting it cannot use (virgo.startup): starting it
again cannot help, so everything is stopped and the supervisor exits 2 too. SIGINT or SIGTERM
stops everything: each program gets SIGTERM (or the signal `--stop-signal NAME=SIGNAL` names for
it) and up to STOP_SECONDS to finish (virgo-web's workers finish their requests), then SIGKILL.
Should the supervisor itself be killed, each program gets that signal from the kernel (Linux).
"""

import argparse
import asyncio
import contextlib
import ctypes
import functools
import os
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace

from virgo.startup import EXIT_MISCONFIGURED

FIRST_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 30.0
# A program that ran this long before it died is restarted after the first delay again.
STABLE_SECONDS = 30.0
# Longer than virgo-web's own graceful stop (virgo.web.GRACEFUL_STOP_SECONDS).
STOP_SECONDS = 25.0
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Program:
    name: str
    argv: list[str]
    # PostgreSQL takes SIGTERM as "wait for every client to leave"; its fast stop is SIGINT.
    stop_signal: signal.Signals = signal.SIGTERM


def parse_program(text: str) -> Program:
    name, separator, command = text.partition(":")
    argv = shlex.split(command)
    if not separator or not name.strip() or not argv:
        raise ValueError(f"{text!r} is not NAME: COMMAND")
    return Program(name.strip(), argv)


def parse_stop_signal(text: str) -> tuple[str, signal.Signals]:
    name, _, signame = text.partition("=")
    if not name.strip() or signame not in signal.Signals.__members__:
        raise ValueError(f"--stop-signal {text!r} is not NAME=SIGNAL (e.g. postgres=SIGINT)")
    return name.strip(), signal.Signals[signame]


def log(message: str) -> None:
    print(f"serve: {message}", file=sys.stderr, flush=True)


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by {signal.Signals(-returncode).name}"
    return f"exited with status {returncode}"


def _end_with_the_supervisor(stop_signal: signal.Signals) -> None:
    """In the child before it execs: Linux sends it its stop signal should the supervisor die
    (even by SIGKILL), so no program runs on unsupervised, holding its port."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, stop_signal)


def kill_session(pid: int) -> None:
    """SIGKILL whatever is left of the session `pid` led (its process group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class Supervisor:
    def __init__(self, programs: Sequence[Program]) -> None:
        self.programs = list(programs)
        self.stopping = asyncio.Event()
        self.misconfigured: list[str] = []

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, self.stopping.set)
        await asyncio.gather(*(self.keep_running(program) for program in self.programs))
        return EXIT_MISCONFIGURED if self.misconfigured else 0

    async def keep_running(self, program: Program) -> None:
        delay = FIRST_DELAY_SECONDS
        while not self.stopping.is_set():
            started = time.monotonic()
            process = await asyncio.create_subprocess_exec(
                *program.argv,
                start_new_session=True,
                preexec_fn=(
                    functools.partial(_end_with_the_supervisor, program.stop_signal)
                    if sys.platform == "linux"
                    else None
                ),
            )
            log(f"{program.name} started (pid {process.pid})")
            if await self._stopped_before(process.wait()):
                await self._stop(program, process)
                return
            returncode = process.returncode
            assert returncode is not None
            kill_session(process.pid)
            if self.stopping.is_set():
                return
            if returncode == EXIT_MISCONFIGURED:
                log(
                    f"{program.name} exited with status 2: a setting it cannot use (its line "
                    "above); starting it again cannot help, so everything stops"
                )
                self.misconfigured.append(program.name)
                self.stopping.set()
                return
            ran = time.monotonic() - started
            if ran >= STABLE_SECONDS:
                delay = FIRST_DELAY_SECONDS
            log(
                f"{program.name} (pid {process.pid}) {how_it_ended(returncode)} after {ran:.0f}s; "
                f"starting it again in {delay:.0f}s, the others keep serving"
            )
            if await self._stopped_before(asyncio.sleep(delay)):
                return
            delay = min(delay * 2, MAX_DELAY_SECONDS)

    async def _stopped_before(self, work: Awaitable[object]) -> bool:
        """Wait for `work` or for the stop, whichever comes first; True if the stop did."""
        task = asyncio.ensure_future(work)
        stop = asyncio.ensure_future(self.stopping.wait())
        done, _ = await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            stop.cancel()
            return False
        task.cancel()
        return True

    async def _stop(self, program: Program, process: asyncio.subprocess.Process) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(program.stop_signal)
        try:
            await asyncio.wait_for(process.wait(), STOP_SECONDS)
        except TimeoutError:
            log(f"{program.name} (pid {process.pid}) did not stop in {STOP_SECONDS:.0f}s: killed")
        kill_session(process.pid)
        await process.wait()
        log(f"{program.name} stopped")


def _end_with_the_parent() -> None:
    """VIRGO_SUPERVISE_WITH_PARENT=1 (make serve, which starts this in a session of its own):
    SIGTERM to this supervisor should the script that started it die, even by SIGKILL, so it
    stops its programs rather than run on with nobody to stop it (VX-SCALE-3)."""
    if os.environ.pop("VIRGO_SUPERVISE_WITH_PARENT", "") != "1" or sys.platform != "linux":
        return
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        raise SystemExit(0)


def parse_arguments(arguments: Sequence[str]) -> list[Program]:
    parser = argparse.ArgumentParser(prog="python -m virgo.supervise")
    parser.add_argument("--stop-signal", action="append", default=[], metavar="NAME=SIGNAL")
    parser.add_argument("programs", nargs="+", metavar="NAME: COMMAND")
    # argparse itself exits 2 on a usage error, as a misconfigured program does.
    options = parser.parse_args(arguments)
    try:
        stop_signals = dict(parse_stop_signal(text) for text in options.stop_signal)
        programs = [parse_program(text) for text in options.programs]
    except ValueError as error:
        parser.exit(EXIT_MISCONFIGURED, f"{parser.prog}: {error}\n")
    return [
        replace(program, stop_signal=stop_signals.get(program.name, program.stop_signal))
        for program in programs
    ]


def main(argv: Sequence[str] | None = None) -> None:
    _end_with_the_parent()
    programs = parse_arguments(sys.argv[1:] if argv is None else argv)
    raise SystemExit(asyncio.run(Supervisor(programs).run()))


if __name__ == "__main__":
    main()
