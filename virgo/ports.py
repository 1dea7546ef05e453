"""Whether a server can listen on its port, asked before anything is set up for it (VX-OPS-7).

`make run` asks first (`python -m virgo.ports 127.0.0.1 $(PORT) --for "make run"`): a port
another process holds is one line on stderr naming the port and the fix, with a free port to
paste, and exit status 2, before `var/virgo.env` is rewritten for that port, the database
migrated or the demo loaded. Django's runserver would say so only at the end, after all of
that, and with the settings file already pointing at a server that never started.

The answer is for this moment: a port taken between the check and the server's own bind still
fails there, in Django's words.
"""

import argparse
import errno
import socket
from collections.abc import Sequence

from virgo.startup import exit_misconfigured

# How far past a busy port to look for a free one to suggest.
_SUGGESTION_RANGE = 100
IN_USE = "in use by another process"


def port_problem(host: str, port: int) -> str | None:
    """Why a server could not listen on host:port now (the operating system's reason); None if
    it could."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As runserver binds (socketserver's allow_reuse_address): a port a stopped server left
        # in TIME_WAIT is free to it, so it must not be called busy here.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return IN_USE
            return f"not available here ({error.strerror or error})"
    return None


def free_port_after(host: str, port: int) -> int | None:
    """The first port above `port` a server could listen on now, None within the range."""
    for candidate in range(port + 1, min(port + _SUGGESTION_RANGE, 65535) + 1):
        if port_problem(host, candidate) is None:
            return candidate
    return None


def _port(value: str) -> int | None:
    return int(value) if value.isdigit() and 0 < int(value) < 65536 else None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m virgo.ports",
        description="Exit 2 with one line naming the fix unless a server can listen on HOST:PORT.",
    )
    parser.add_argument("host")
    parser.add_argument("port", help="the PORT the command was given")
    parser.add_argument(
        "--for", dest="command", required=True, help="the command PORT is given to: make run"
    )
    options = parser.parse_args(argv)
    port = _port(options.port)
    if port is None:
        exit_misconfigured(
            options.command,
            f"PORT={options.port!r} is not a TCP port (1 to 65535); run on one, e.g. "
            f"PORT=8000 {options.command}",
        )
    problem = port_problem(options.host, port)
    if problem is None:
        return
    suggestion = free_port_after(options.host, port)
    fix = f"PORT={suggestion if suggestion is not None else '<another port>'} {options.command}"
    if problem == IN_USE:
        fix = f"stop what listens there, or run on a free port: {fix}"
    else:
        fix = f"run on another port: {fix}"
    exit_misconfigured(options.command, f"port {port} on {options.host} is {problem}: {fix}")


if __name__ == "__main__":
    main()
