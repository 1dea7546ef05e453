"""How runtime.agent_clis reads an owner's arguments to an agent CLI and knows the CLI (VX-CONF-1):
checked against the options known to be harmless, so an option nobody looked at is refused."""

from pathlib import Path

import pytest

from runtime.agent_clis import CLAUDE, RefusedArgument, known_cli, known_names


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["review the queue"],
        ["-p", "review", "--output-format", "json"],
        ["--output-format=stream-json", "--verbose", "-p", "x"],
        ["--permission-mode", "dontAsk"],
        ["--permission-mode=plan"],
        ["--model", "--weird-model-name"],
        ["-"],
        ["first words", "mcp"],
    ],
)
def test_harmless_arguments_pass(arguments: list[str]) -> None:
    CLAUDE.check_arguments(arguments)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--verbose=false"], "--verbose is not an option `virgo launch` passes to Claude Code"),
        (["--print", "--debug"], "--debug is not an option"),
        (["--output-format"], "--output-format needs a value"),
        (["--permission-mode", "bypassPermissions"], "--permission-mode bypassPermissions would"),
        (["--permission-mode=auto"], "--permission-mode auto would widen what the agent may do: "
                                     "use one of acceptEdits, default, dontAsk, manual, plan"),
        (["mcp", "list"], "'mcp' is a Claude Code subcommand, not a session: run `claude mcp` "
                          "outside `virgo launch`"),
        (["-p", "install"], "'install' is a Claude Code subcommand"),
        (["x", "--tools", "Bash"], "--tools is not an option"),
        # Virgo's arguments come after the owner's: behind a `--` they would be a prompt.
        (["-p", "go", "--"], "-- would make the CLI ignore the confinement that follows it"),
        (["--", "--dangerously-skip-permissions"], "-- would make the CLI ignore"),
    ],
)  # fmt: skip
def test_arguments_that_could_widen_are_refused_naming_themselves(
    arguments: list[str], said: str
) -> None:
    with pytest.raises(RefusedArgument) as refused:
        CLAUDE.check_arguments(arguments)
    assert said in str(refused.value)


def test_the_cli_is_known_by_its_program_or_what_its_link_leads_to(tmp_path: Path) -> None:
    """npm installs Claude Code as node_modules/.bin/claude, a link to bin/claude.exe."""
    real = tmp_path / "pkg/bin/claude.exe"
    real.parent.mkdir(parents=True)
    real.write_text("")
    link = tmp_path / "renamed-agent"
    link.symlink_to(real)
    assert known_cli(str(link)) is CLAUDE
    assert known_cli("/usr/local/bin/claude") is CLAUDE
    assert known_cli("/usr/local/bin/claude-wrapper") is None
    assert known_cli("/usr/bin/codex") is None
    assert known_names() == "claude (Claude Code)"


def test_the_confinement_is_claudes_and_says_what_it_turns_off(tmp_path: Path) -> None:
    """VX-CONF-1: what `--check` prints is the list the confinement comes with."""
    arguments = CLAUDE.confinement(allowlist="mcp__virgo__a", mcp_config=tmp_path / "c.json")
    assert arguments[-1] == "--disable-slash-commands"
    assert arguments[arguments.index("--mcp-config") + 1] == str(tmp_path / "c.json")
    described = "\n".join(CLAUDE.settings_described())
    flags = ('--tools "")', '--setting-sources "")', "--strict-mcp-config",
             "--disable-slash-commands", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC")  # fmt: skip
    for flag in flags:
        assert flag in described
