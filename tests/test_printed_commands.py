"""VX-OPS-1: every command `make run` prints, and every command the README and the docs/ pages
show, works pasted into a new shell in a fresh checkout, with nothing exported by hand.

`make run` runs in a fresh checkout (tests/fresh_checkout.py) from a clean environment (PATH and
HOME only, as `env -i` leaves them). While it serves, each line it printed and each line of the
sh blocks of the README and of the docs/ pages (DOCUMENTS, in that order) runs the same way, as
a new shell would run it (`bash -c`, pipes failing when any part fails), with the placeholders
(`<uuid>`, `<id>`) filled in and make run's default port, in an origin, replaced by this run's.
The MCP server lines are driven by the `mcp` SDK's own client with its default environment.
`claude` is an agent CLI Virgo does not ship: a stand-in on PATH records what it was started with.
"""

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.fresh_checkout import REPO, clean_environment, make_fresh_checkout
from tests.live import free_port, wait_until
from tests.remote_support import OwnersBrowser

pytestmark = pytest.mark.live

COMMAND_TIMEOUT = 120
# The pages whose sh lines run here, in the order they run (each page's top to bottom): the
# README's first hour on make run's demo as it comes, then the docs/ pages in the order the
# README showed their commands before they moved there. It matters: docs/mcp.md's remote client
# keeps the tokens its second line calls on, and docs/revocation.md revokes the Deployer, which
# nothing after it may need. A docs/ page with sh lines and no place here fails
# test_every_page_with_commands_has_its_place.
DOCUMENTS = (
    "README.md",
    "docs/mcp.md",
    "docs/personas.md",
    "docs/revocation.md",
    "docs/identity.md",
    "docs/discovery.md",
    "docs/endpoints.md",
)
# The sh lines of DOCUMENTS not run here, and why.
NOT_RUN_HERE = {
    "make run": "it is what this test runs first",
    "make test": "the whole suite: CI runs it",
}
# docs/discovery.md's second installation: started in the background on a free port, the way
# the page says to start it in a second terminal, and stopped when the walk ends.
SECOND_INSTALLATION = "VIRGO_HOME=$PWD/var/peer make run PORT=8001"
# A printed command: `Label:   [VIRGO_ENV_FILE=... ].venv/bin/virgo ...`.
PRINTED_COMMAND = re.compile(r"^[A-Z][A-Za-z ]*:\s+((?:VIRGO_ENV_FILE=\S+ )?\.venv/bin/\S.*)$")
# In the sh blocks a comment follows two spaces or more: `command  # what it does`.
COMMENT = re.compile(r"\s{2,}#\s.*$")


def readme_commands(readme: Path) -> list[str]:
    """Each command of a page's sh blocks, a line ending in a backslash joined to the next."""
    commands, inside, pending = [], False, ""
    for line in readme.read_text().splitlines():
        if line.strip() == "```sh":
            inside = True
        elif inside and line.strip() == "```":
            inside = False
        elif inside and line.strip():
            line = COMMENT.sub("", line).strip()
            if line.endswith("\\"):
                pending += line.removesuffix("\\").rstrip() + " "
                continue
            commands.append(pending + line)
            pending = ""
    return commands


def documented_commands(root: Path) -> list[str]:
    """Each command of the sh blocks of the README and the docs/ pages under `root`, in the
    order DOCUMENTS runs them."""
    return [command for name in DOCUMENTS for command in readme_commands(root / name)]


@dataclass
class MadeRun:
    checkout: Path
    env: dict[str, str]
    output: str
    claude_record: Path
    port: int
    peer_port: int = 0

    def reviewer(self) -> str:
        return re.search(r"mcp serve --persona ([0-9a-f-]{36})", self.output).group(1)

    def client_id(self) -> str:
        return re.search(r"serving\.connect \S+ --client-id (\S+)", self.output).group(1)

    def new_password(self) -> str:
        """The demo owner's password, made anew as make run's reset command makes it (the
        password make run printed is reset by that command, which this test runs too)."""
        done = run_in_a_new_shell(".venv/bin/virgo load_demo --new-password", self)
        assert done.returncode == 0, done.stderr
        return re.search(r"^Demo owner: demo / (\S+) ", done.stdout, re.MULTILINE).group(1)

    def agent_id(self) -> str:
        with sqlite3.connect(self.checkout / "var" / "virgo.sqlite3") as database:
            [(agent,)] = database.execute("select id from personas_agent").fetchall()
        return str(agent)

    def owner_username(self) -> str:
        with sqlite3.connect(self.checkout / "var" / "virgo.sqlite3") as database:
            [(username,)] = database.execute(
                "select username from auth_user join personas_agent"
                " on personas_agent.owner_id = auth_user.id"
            ).fetchall()
        return str(username)

    def revocable(self) -> tuple[str, int]:
        """A demo persona other than the reviewer the other commands use, and its generation:
        what docs/revocation.md's revoke commands are run on."""
        with sqlite3.connect(self.checkout / "var" / "virgo.sqlite3") as database:
            uuid, generation = database.execute(
                "select uuid, generation from personas_persona where uuid != ? order by id",
                [self.reviewer().replace("-", "")],
            ).fetchone()
        return str(UUID(uuid)), int(generation)

    def stamp_tools(self, uuid: str) -> list[str]:
        generations = (self.checkout / "var" / "personas" / uuid / "generations").iterdir()
        latest = max(generations, key=lambda path: int(path.name))
        stamp = json.loads((latest / "CAPABILITY-STAMP.json").read_text())
        return [tool["name"] for tool in stamp["tools"]]


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MadeRun]:
    base = tmp_path_factory.mktemp("fresh")
    checkout = make_fresh_checkout(base / "checkout")
    home = base / "home"
    home.mkdir()
    stand_ins = base / "bin"
    stand_ins.mkdir()
    # The stand-in keeps what it was given in its HOME: the shell's when pasted, its own
    # (writable in the sandbox) under `launch`.
    record = home / "claude-argv"
    claude = stand_ins / "claude"
    claude.write_text('#!/bin/sh\nprintf \'%s\\n\' "$@" --- >> "$HOME/claude-argv"\n')
    claude.chmod(0o755)
    env = clean_environment(home, path_first=stand_ins)
    port = free_port()
    log = base / "make-run.log"
    with serving_make_run(["make", "run", f"PORT={port}"], checkout, env, port, log):
        yield MadeRun(checkout, env, log.read_text(), record, port)


@contextlib.contextmanager
def second_installation(made_run: MadeRun) -> Iterator[None]:
    """docs/discovery.md's peer: `make run` in its own VIRGO_HOME, on a port of its own."""
    made_run.peer_port = free_port()
    log = made_run.checkout / "var" / "peer-make-run.log"
    command = ["bash", "-c", filled(SECOND_INSTALLATION, made_run)]
    with serving_make_run(command, made_run.checkout, made_run.env, made_run.peer_port, log):
        yield


@contextlib.contextmanager
def serving_make_run(
    command: list[str], checkout: Path, env: dict[str, str], port: int, log: Path
) -> Iterator[None]:
    """`command` (a make run) in a session of its own, once it answers /healthz on `port`;
    stopped afterwards as Ctrl-C would stop it."""
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            cwd=checkout,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def serving() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"`{' '.join(command)}` exited:\n{log.read_text()}")
            try:
                return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(serving, what=f"`{' '.join(command)}` to serve; see {log}", timeout=300)
        yield
    finally:
        # make and virgo-web's processes: the session make leads.
        stop_session(process, log)


def stop_session(process: subprocess.Popen[bytes], log: Path) -> None:
    """SIGTERM to the session `process` leads (make and virgo-web), as Ctrl-C in its terminal
    would; one that does not end in time is killed, and the failure shows the end of its log."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=COMMAND_TIMEOUT)
        wait_until(lambda: not _session_alive(process.pid), what="make run's processes to end")
    except (subprocess.TimeoutExpired, AssertionError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise AssertionError(f"make run did not stop on SIGTERM; its log ends:\n{tail}") from None


def _session_alive(session: int) -> bool:
    try:
        os.killpg(session, 0)
    except ProcessLookupError:
        return False
    return True


def filled(line: str, made_run: MadeRun) -> str:
    # The pages' origin is make run's default port; this run's is another.
    line = line.replace("127.0.0.1:8000", f"127.0.0.1:{made_run.port}")
    line = line.replace("127.0.0.1:8001", f"127.0.0.1:{made_run.peer_port}")
    line = line.replace("PORT=8001", f"PORT={made_run.peer_port}")
    line = line.replace("<username>", made_run.owner_username())
    if "persona revoke" in line:
        uuid, generation = made_run.revocable()
        line = line.replace("<uuid>", uuid).replace("<n>", str(generation))
    line = line.replace("<client-id>", made_run.client_id())
    return line.replace("<uuid>", made_run.reviewer()).replace("<id>", made_run.agent_id())


def serve_lists_tools(line: str, made_run: MadeRun) -> list[str]:
    """The MCP server line, started by the mcp SDK's stdio client with its default environment
    (which passes on only HOME, PATH, SHELL, TERM, USER, LOGNAME): the tools it lists."""
    parameters = StdioServerParameters(
        command="bash", args=["-c", line], cwd=str(made_run.checkout), env=made_run.env
    )

    async def listed() -> list[str]:
        with anyio.fail_after(COMMAND_TIMEOUT):
            async with (
                stdio_client(parameters) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return [tool.name for tool in (await session.list_tools()).tools]

    return anyio.run(listed)


def connect_lists_tools(line: str, made_run: MadeRun) -> list[str]:
    """The remote endpoint's host client, in a new shell: the first time it prints the consent
    URL, which the demo owner's browser (signed in with make run's password) allows and follows
    back to the client's loopback port; then, or on the tokens kept from before, it lists the
    persona's tools."""
    process = subprocess.Popen(
        ["bash", "-o", "pipefail", "-c", line],
        cwd=made_run.checkout,
        env=made_run.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    listed = [first.strip()]
    if first.startswith("Open this URL"):
        password = made_run.new_password()
        browser = OwnersBrowser(f"http://127.0.0.1:{made_run.port}", "demo", password)
        try:
            anyio.run(browser.approve, process.stdout.readline().strip())
            assert browser.http.get(browser.location).status_code == 200
        finally:
            browser.http.close()
        listed = []
    # Read through the text streams: communicate() would read past what readline() buffered.
    rest, errors = process.stdout.read(), process.stderr.read() if process.stderr else ""
    assert process.wait(timeout=COMMAND_TIMEOUT) == 0, f"`{line}` exited:\n{errors}"
    return listed + rest.split()


def run_in_a_new_shell(line: str, made_run: MadeRun) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", line],
        cwd=made_run.checkout,
        env=made_run.env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )


def assert_works(line: str, made_run: MadeRun) -> subprocess.CompletedProcess[str] | None:
    if " mcp serve " in line and "--http" not in line:
        assert serve_lists_tools(line, made_run) == made_run.stamp_tools(made_run.reviewer())
        return None
    if "serving.connect" in line and "--call" not in line:
        assert connect_lists_tools(line, made_run) == made_run.stamp_tools(made_run.reviewer())
        return None
    done = run_in_a_new_shell(line, made_run)
    said = f"`{line}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, said
    assert done.returncode == 0, said
    return done


def test_make_run_writes_the_settings_file_once(made_run: MadeRun) -> None:
    """VX-OPS-1: `make run` leaves an owner-private var/virgo.env with the embedded flag and a
    generated SECRET_KEY."""
    path = made_run.checkout / "var" / "virgo.env"
    assert path.stat().st_mode & 0o777 == 0o600
    text = path.read_text()
    assert "VIRGO_EMBEDDED='1'" in text
    assert re.search(r"^SECRET_KEY='[\w-]{50,}'$", text, re.MULTILINE)


def test_make_run_serves_with_the_production_server_and_prints_no_task_lines(
    made_run: MadeRun,
) -> None:
    """`make run` serves with virgo-web (granian), one process, as `make serve` does: no
    development-server warning; and the demo's in-process tasks leave no Celery lines among
    what it prints (issue 43)."""
    assert "Starting granian" in made_run.output
    assert f"Listening at: http://127.0.0.1:{made_run.port}" in made_run.output
    assert "development server" not in made_run.output
    assert "celery.app.trace" not in made_run.output and " succeeded in " not in made_run.output


def test_every_command_make_run_prints_works_in_a_new_shell(made_run: MadeRun) -> None:
    """VX-OPS-1, VX-REMOTE-1: each command line `make run` printed (the MCP server, its config,
    the allowlist, the password reset, the remote endpoint's host client) works as printed in a
    clean environment."""
    printed = [
        match.group(1)
        for line in made_run.output.splitlines()
        if (match := PRINTED_COMMAND.match(line.strip()))
    ]
    assert len(printed) >= 4, made_run.output
    for line in printed:
        done = assert_works(line, made_run)
        if done is not None and "--print-allowlist" in line:
            tools = made_run.stamp_tools(made_run.reviewer())
            assert done.stdout.strip() == ",".join(f"mcp__virgo__{name}" for name in tools)


def test_every_page_with_commands_has_its_place() -> None:
    """Every docs/ page with sh lines is in DOCUMENTS, so that its commands run here too."""
    unplaced = {
        path.name: readme_commands(path)
        for path in sorted((REPO / "docs").glob("*.md"))
        if f"docs/{path.name}" not in DOCUMENTS
    }
    assert not {name: lines for name, lines in unplaced.items() if lines}, (
        "sh lines on a page DOCUMENTS does not place"
    )


def test_every_command_the_readme_shows_works_in_a_new_shell(made_run: MadeRun) -> None:
    """VX-OPS-1: each line of the sh blocks of the README and the docs/ pages works pasted into
    a new shell in the checkout (the placeholders filled in), in the order DOCUMENTS gives, and
    the agent CLI it starts gets the allowlist and an MCP config that carries no secret."""
    commands = documented_commands(made_run.checkout)
    assert commands == documented_commands(REPO)
    run = [line for line in commands if line not in NOT_RUN_HERE]
    assert len(run) >= 9, commands
    with contextlib.ExitStack() as stack:
        for line in run:
            if line == SECOND_INSTALLATION:
                stack.enter_context(second_installation(made_run))
                continue
            done = assert_works(filled(line, made_run), made_run)
            if done is not None and " peers check " in line:
                # The peer's demo personas verified on this installation (VX-DISC-5).
                checked = re.search(r"answered (\d+) entries, (\d+) verified", done.stdout)
                assert checked and int(checked.group(2)) >= 1, done.stdout

    # `launch ... -- claude` (in its sandbox, with its own home), then `claude --allowedTools
    # ...` pasted: what the stand-in was given.
    agent_home = made_run.checkout / "var/run" / made_run.reviewer() / "agent-home"
    [launched] = recorded_calls(agent_home / "claude-argv")
    [pasted] = recorded_calls(made_run.claude_record)
    allowlist = ",".join(
        f"mcp__virgo__{name}" for name in made_run.stamp_tools(made_run.reviewer())
    )
    assert launched[launched.index("--allowedTools") + 1] == allowlist
    assert launched[launched.index("--tools") + 1] == ""
    assert not Path(launched[launched.index("--mcp-config") + 1]).exists()
    assert pasted == ["--allowedTools", allowlist]
    secret = re.search(
        r"^SECRET_KEY='(.*)'$", (made_run.checkout / "var/virgo.env").read_text(), re.M
    )
    assert secret is not None
    assert secret.group(1) not in json.dumps(launched)
    config = json.loads((made_run.checkout / ".mcp.json").read_text())
    assert set(config["mcpServers"]["virgo"]["env"]) == {"DJANGO_SETTINGS_MODULE", "VIRGO_ENV_FILE"}
    assert secret.group(1) not in json.dumps(config)


def recorded_calls(record: Path) -> list[list[str]]:
    """Each call the claude stand-in recorded, as its argument list."""
    return [
        call.strip("\n").split("\n") for call in record.read_text().split("---\n") if call.strip()
    ]
