"""`python -m serving.remote_launch`: an agent CLI on an agent host, confined to a persona's
tools served over the network (VX-REMOTE-3, VX-CONF-1, VX-CONF-2).

The host has a PATH, a HOME and the refresh token its owner handed over; the pinned Claude Code
CLI runs under a scripted model in bubblewrap, offered exactly the stamp's tools through the
launcher's loopback relay, and never sees a token of the installation's authorization server.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from oauth2_provider.models import RefreshToken

from runtime.stamp import load_active_stamp
from serving import remote_launch as launch
from serving import sandbox as sandboxes
from serving.connections import open_connection
from tests.live import REPO, WebServer, unavailable
from tests.remote_support import (
    host_environment,
    public_client,
    web,  # noqa: F401 (a fixture)
)
from tests.runtime_support import standing_persona
from tests.scripted_model import ScriptedAnthropic

CLAUDE = REPO / "requirements/agents/node_modules/.bin/claude"


def usable_bwrap() -> None:
    try:
        sandboxes.require_bwrap()
    except sandboxes.SandboxUnavailable as exc:
        unavailable(exc.reason)


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("live_postgres")
def test_claude_code_on_an_agent_host_reaches_the_stamps_tools_and_no_token(
    web: WebServer,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    """VX-REMOTE-3, VX-REMOTE-2, VX-CONF-1: launched by serving.remote_launch with a PATH, a
    HOME and a connection's refresh token, Claude Code is offered exactly the stamp's tools and
    calls one through the relay; its built-in tools are gone, so it cannot read the launcher's
    tokens; neither they nor the handed-over refresh token reach the model; its MCP config is gone
    once it ends."""
    if not CLAUDE.exists():
        unavailable(f"{CLAUDE} is missing: `make agents` installs the pinned agent CLIs")
    usable_bwrap()
    persona = standing_persona()
    owner = persona.agent.owner
    client = public_client(owner, name="Agent host", redirect_uris="http://127.0.0.1/callback")
    handed = tmp_path / "virgo-connection"
    handed.write_text(
        open_connection(RefreshToken(user=owner, application=client), persona=persona)
    )
    home = tmp_path / "host"
    home.mkdir()
    tokens = home / ".config" / "virgo" / "remote" / f"{persona.uuid}.json"
    turn = [
        ("Read", {"file_path": str(tokens)}),
        ("mcp__virgo__workspace_list", {"path": ""}),
    ]
    with ScriptedAnthropic([turn, "done"]) as model:
        ran = subprocess.run(
            [
                sys.executable, "-m", "serving.remote_launch", persona.mcp_url,
                "--client-id", client.client_id, "--refresh-token-file", str(handed),
                "--", str(CLAUDE), "-p", "work the queue", "--output-format", "json",
            ],
            cwd=REPO,
            env={
                **host_environment(home),
                "VIRGO_LAUNCH_PASS_ENV": "ANTHROPIC_BASE_URL,ANTHROPIC_API_KEY",
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "sk-ant-scripted",
            },
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    tools = list(load_active_stamp(persona).mcp_tools)
    offered = set(model.tool_names_offered()) - {"DeferredToolPlaceholder"}
    assert offered == {f"mcp__virgo__{name}" for name in tools}
    calls = {call["name"]: call for call in model.calls()}
    assert not calls["mcp__virgo__workspace_list"]["is_error"], calls
    assert calls["Read"]["is_error"], calls
    kept = json.loads(tokens.read_text())["tokens"]
    seen = b"".join(request.raw for request in model.requests)
    for secret in (kept["access_token"], kept["refresh_token"], handed.read_text().strip()):
        assert secret.encode() not in seen
    agent_home = launch.agent_home_of(tokens, persona.mcp_url)
    assert not list(agent_home.glob(".virgo-mcp-*.json"))


def test_the_host_sandbox_hides_the_tokens_and_keeps_the_agents_home(tmp_path: Path) -> None:
    """VX-REMOTE-3, VX-CONF-2: inside the agent host's sandbox the launcher's tokens directory
    is empty, though the agent's home inside it is there and writable."""
    usable_bwrap()
    tokens = tmp_path / ".config" / "virgo" / "remote" / "p.json"
    home = launch.agent_home_of(tokens, "http://x/mcp/p")
    tokens.write_text("refresh-me")
    sandbox = sandboxes.for_agent_host(agent_home=home, program="/bin/sh", secrets=[tokens.parent])
    assert sandbox.writable == (home.resolve(),) and sandbox.workdir == home.resolve()
    assert tokens.parent.resolve() in sandbox.hidden
    # A program named through a symlink under /tmp (node_modules/.bin): both its directory
    # and the package it resolves to are there in the agent's empty /tmp.
    package = tmp_path / "node_modules" / "cli"
    package.mkdir(parents=True)
    (package / "cli.js").write_text("")
    (tmp_path / "node_modules" / ".bin").mkdir()
    (tmp_path / "node_modules" / ".bin" / "agent").symlink_to(package / "cli.js")
    linked = sandboxes.for_agent_host(
        agent_home=home, program=str(tmp_path / "node_modules" / ".bin" / "agent"), secrets=[]
    )
    assert set(linked.restored) == {package.resolve(), (tmp_path / "node_modules/.bin").resolve()}
    script = f"cat {tokens}; echo written > {home}/note; cat {home}/note"
    ran = subprocess.run(
        sandbox.argv(["/bin/sh", "-c", script]), capture_output=True, text=True, timeout=60
    )
    assert "refresh-me" not in ran.stdout
    assert ran.stdout.strip() == "written"
    assert (home / "note").read_text() == "written\n"


@pytest.mark.parametrize(
    ("command", "environment", "said"),
    [
        ([], {}, "give the agent command after --"),
        (["--", "no-such-agent-cli"], {}, "not found on PATH"),
        (["--", "sh", "-c", "true"], {}, "sh is not an agent CLI Virgo can confine"),
        (
            ["--", str(CLAUDE), "--dangerously-skip-permissions"],
            {},
            "refusing to launch Claude Code",
        ),
    ],
)
def test_a_launch_that_would_reach_past_the_persona_is_refused(
    command: list[str],
    environment: dict[str, str],
    said: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-CONF-1: no command, an unknown program, a CLI Virgo cannot confine, or an argument
    that would widen the CLI: refused with exit 2 before anything is asked of the endpoint."""
    if str(CLAUDE) in command and not CLAUDE.exists():
        unavailable(f"{CLAUDE} is missing: `make agents` installs the pinned agent CLIs")
    monkeypatch.setenv("HOME", str(tmp_path))
    endpoint = "http://127.0.0.1:9/mcp/00000000-0000-0000-0000-000000000000"
    assert launch.main([endpoint, "--client-id", "c", *command]) == launch.EXIT_USAGE
    assert said in capsys.readouterr().err


def test_a_passed_name_the_cli_would_load_settings_from_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-CONF-1: VIRGO_LAUNCH_PASS_ENV may not hand the agent a name its CLI reads to load
    other settings or code."""
    from serving.agent_clis import GEMINI

    refused = sorted(GEMINI.refused_environment)[0]
    with pytest.raises(launch.Refused, match=f"names {refused}"):
        launch.passed_names({launch.PASS_ENV: f"GEMINI_API_KEY, {refused}"}, GEMINI)
    assert launch.passed_names({launch.PASS_ENV: "GEMINI_API_KEY, ,"}, GEMINI) == {"GEMINI_API_KEY"}
    assert launch.passed_names({}, GEMINI) == frozenset()  # the operator passes nothing
    two = sorted(GEMINI.refused_environment)[:2]
    with pytest.raises(launch.Refused) as named:
        launch.passed_names({launch.PASS_ENV: ",".join(two)}, GEMINI)
    listed = ", ".join(two)
    assert named.value.reason == (
        f"{launch.PASS_ENV} names {listed}, which Gemini CLI would read to load settings, "
        f"prompts or code beyond its confinement: remove {listed}"
    )


def test_the_agent_command_is_the_clis_own_path_with_the_owners_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-CONF-1: a CLI Virgo confines is found on PATH and started by its absolute path with
    the owner's arguments as they were given (the checked ones, every one of them); each
    refusal says in full why and what to do."""
    programs = tmp_path / "bin"
    programs.mkdir()
    claude = programs / "claude"
    claude.write_text("#!/bin/sh\n")
    claude.chmod(0o755)
    monkeypatch.setenv("PATH", str(programs))
    argv, cli = launch.agent_command(["claude", "--model", "sonnet", "-p", "review"])
    assert argv == [str(claude), "--model", "sonnet", "-p", "review"]
    assert cli.title == "Claude Code"
    refusals = {
        (): "give the agent command after --, e.g. -- claude",
        ("claude", "--dangerously-skip-permissions", "-p", "x"): (
            "refusing to launch Claude Code: --dangerously-skip-permissions is not an option "
            "`virgo launch` passes to Claude Code: it may add tools, settings or servers beyond "
            "the stamp's"
        ),
    }
    for command, reason in refusals.items():
        with pytest.raises(launch.Refused) as refused:
            launch.agent_command(list(command))
        assert refused.value.reason == reason


def test_the_agents_home_is_the_personas_and_is_found_again_at_the_next_launch(
    tmp_path: Path,
) -> None:
    """VX-REMOTE-3: the agent's home beside the tokens is named for the persona's uuid, even on
    an installation served under a path of its own that is also called mcp, and a second launch
    uses the same owner-only home."""
    tokens = tmp_path / "remote" / "p.json"
    persona = "3f0c8a2e-1d4b-4c9a-9e6f-5b7d2a1c0e84"
    endpoint = f"https://virgo.example/mcp/mcp/{persona}"
    home = launch.agent_home_of(tokens, endpoint)
    assert home == tokens.parent / f"{persona}.agent-home"
    assert launch.agent_home_of(tokens, endpoint) == home
    for directory in (tokens.parent, home):
        assert directory.stat().st_mode & 0o777 == 0o700
