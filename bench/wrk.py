"""Run wrk against one URL and read its summary."""

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}


@dataclass(frozen=True)
class WrkResult:
    requests_per_s: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int  # responses that were not 2xx/3xx, plus socket errors


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip()).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def parse(output: str) -> WrkResult:
    """wrk's own text, with --latency: requests/s, the 50th and 99th percentile, failures."""
    rate = re.search(r"Requests/sec:\s+([\d.]+)", output)
    p50 = re.search(r"^\s+50%\s+(\S+)", output, re.MULTILINE)
    p99 = re.search(r"^\s+99%\s+(\S+)", output, re.MULTILINE)
    total = re.search(r"(\d+) requests in", output)
    if not (rate and p50 and p99 and total):
        raise ValueError(f"not wrk --latency output:\n{output}")
    errors = 0
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    if non_2xx:
        errors += int(non_2xx.group(1))
    sockets = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    if sockets:
        errors += sum(int(count) for count in sockets.groups())
    return WrkResult(
        requests_per_s=float(rate.group(1)),
        p50_ms=_ms(p50.group(1)),
        p99_ms=_ms(p99.group(1)),
        requests=int(total.group(1)),
        errors=errors,
    )


def run(
    url: str,
    *,
    threads: int = 2,
    connections: int = 64,
    seconds: int = 10,
    headers: dict[str, str] | None = None,
    script: Path | None = None,
) -> WrkResult:
    """`script`: a wrk Lua script for what a URL and headers cannot say (a POST and its body)."""
    if not url.startswith("http://127.0.0.1:"):
        raise ValueError("load is generated on loopback only")
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    if script is not None:
        command += ["-s", str(script)]
    finished = subprocess.run(
        [*command, url], capture_output=True, text=True, timeout=seconds + 60, check=True
    )
    return parse(finished.stdout)


def post_script(body: str, headers: dict[str, str]) -> str:
    """A wrk Lua script sending the same POST each time."""

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = ['wrk.method = "POST"', f"wrk.body = {quoted(body)}"]
    lines += [f"wrk.headers[{quoted(name)}] = {quoted(value)}" for name, value in headers.items()]
    return "\n".join(lines) + "\n"
