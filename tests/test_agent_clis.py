"""How serving.agent_clis reads an owner's arguments to an agent CLI and knows the CLI (VX-CONF-1):
checked against the options known to be harmless, so an option nobody looked at is refused."""

import json
from pathlib import Path

import pytest

from serving.agent_clis import (
    CLAUDE,
    GEMINI,
    RefusedArgument,
    gemini_settings,
    known_cli,
    known_names,
    owners_gemini_auth,
)


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
    assert known_names() == "claude (Claude Code), gemini (Gemini CLI)"


def test_gemini_is_known_by_its_program_or_the_bundle_its_link_leads_to(tmp_path: Path) -> None:
    """npm installs Gemini CLI as node_modules/.bin/gemini, a link to bundle/gemini.js."""
    real = tmp_path / "pkg/bundle/gemini.js"
    real.parent.mkdir(parents=True)
    real.write_text("")
    link = tmp_path / "renamed-agent"
    link.symlink_to(real)
    assert known_cli(str(link)) is GEMINI
    assert known_cli("/usr/local/bin/gemini") is GEMINI
    assert known_cli("/usr/local/bin/gemini-wrapper") is None


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


def test_each_cli_names_the_stamps_tools_its_own_way() -> None:
    """V1-CONS-3: Claude Code's mcp__<server>__<tool>, Gemini CLI's mcp_<server>_<tool>."""
    assert CLAUDE.allowlist(["workspace_list", "get_run"]) == [
        "mcp__virgo__workspace_list",
        "mcp__virgo__get_run",
    ]
    assert GEMINI.allowlist(["workspace_list", "get_run"]) == [
        "mcp_virgo_workspace_list",
        "mcp_virgo_get_run",
    ]
    assert CLAUDE.home_files(Path("/nonexistent"), url="u", token="t", tools=["a"]) == {}


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["review the queue"],
        ["-p", "review", "--output-format", "json"],
        ["-p", "review", "-o", "stream-json", "-d"],
        ["--prompt=review", "-o=text", "--debug", "--screen-reader"],
        ["-m", "gemini-2.5-pro", "--model=gemini-2.5-flash"],
        ["--approval-mode", "plan"],
        ["--approval-mode=auto_edit"],
        ["--approval-mode", "default"],
        ["-r", "latest", "-p", "go on"],
        ["--resume=5"],
        # After `=` the value is the option's, whatever it starts with.
        ["-r=--yolo"],
        ["--session-id", "0b6f4bbf-2b9a-4a64-8a4d-1f0b2a6d7c11"],
        ["-h"],
        ["--version"],
        ["first words", "mcp"],
    ],
)
def test_geminis_harmless_arguments_pass(arguments: list[str]) -> None:
    GEMINI.check_arguments(arguments)


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["-y"], "-y is not an option `virgo launch` passes to Gemini CLI"),
        (["--yolo"], "--yolo is not an option"),
        (["--approval-mode", "yolo"], "--approval-mode yolo would widen what the agent may do: "
                                      "use one of auto_edit, default, plan"),
        (["--approvalMode=yolo"], "--approvalMode is not an option"),
        (["-o", "xml"], "-o xml would widen"),
        (["-s"], "-s is not an option"),
        (["-e", "planted"], "-e is not an option"),
        (["--extensions=planted"], "--extensions is not an option"),
        (["--policy", "allow.toml"], "--policy is not an option"),
        (["--admin-policy", "allow.toml"], "--admin-policy is not an option"),
        (["--allowed-tools", "run_shell_command"], "--allowed-tools is not an option"),
        (["--allowed-mcp-server-names", "other"], "--allowed-mcp-server-names is not an option"),
        (["--include-directories", "/"], "--include-directories is not an option"),
        (["--skip-trust"], "--skip-trust is not an option"),
        (["-w", "tree"], "-w is not an option"),
        (["-i", "hello"], "-i is not an option"),
        (["--acp"], "--acp is not an option"),
        (["--raw-output"], "--raw-output is not an option"),
        (["--session-file", "s.json"], "--session-file is not an option"),
        (["--debug=true"], "--debug is not an option"),
        (["-dp", "hi"], "-dp is not an option"),
        (["-p"], "-p needs a value"),
        # yargs reads an argument that starts with `-` as an option even after one that takes a
        # value (-r's is optional): the check must not take it for the value.
        (["-r", "--yolo"], "-r --yolo: Gemini CLI would read --yolo as an option of its own: "
                           "write -r=--yolo"),
        (["-r", "-e", "planted"], "-r -e: Gemini CLI would read -e as an option"),
        (["-p", "-s"], "-p -s: Gemini CLI would read -s as an option"),
        (["-p", "go", "--"], "-- would make the CLI ignore the confinement that follows it"),
        (["mcp", "add", "other", "sh"], "'mcp' is a Gemini CLI subcommand, not a session: run "
                                        "`gemini mcp` outside `virgo launch`"),
        (["-m", "x", "extensions", "install"], "'extensions' is a Gemini CLI subcommand"),
        (["extension"], "'extension' is a Gemini CLI subcommand"),
        (["skills"], "'skills' is a Gemini CLI subcommand"),
        (["skill"], "'skill' is a Gemini CLI subcommand"),
        (["hooks"], "'hooks' is a Gemini CLI subcommand"),
        (["hook"], "'hook' is a Gemini CLI subcommand"),
        (["gemma"], "'gemma' is a Gemini CLI subcommand"),
    ],
)  # fmt: skip
def test_arguments_that_could_widen_gemini_are_refused_naming_themselves(
    arguments: list[str], said: str
) -> None:
    with pytest.raises(RefusedArgument) as refused:
        GEMINI.check_arguments(arguments)
    assert said in str(refused.value)


def test_claude_reads_a_value_that_looks_like_an_option_as_the_value() -> None:
    """Its parser (commander) does, so the check keeps reading it so for Claude Code."""
    CLAUDE.check_arguments(["-r", "--weird-session-name"])


def test_the_confinement_is_geminis_and_says_what_it_turns_off(tmp_path: Path) -> None:
    """VX-CONF-1: on its command line only the extensions are turned off; the rest is its
    settings file, and `--check` says so."""
    assert GEMINI.confinement(allowlist="mcp_virgo_a", mcp_config=tmp_path / "c.json") == [
        "-e",
        "none",
    ]
    assert GEMINI.works_in == "home" and CLAUDE.works_in == "workspace"
    described = "\n".join(GEMINI.settings_described())
    for said in ("tools.core", "starts in its own home", "mcp.allowed", "-e none",
                 "YOLO mode and always-allow disabled", "an empty ~/.gemini/.env"):  # fmt: skip
        assert said in described


def test_geminis_settings_keep_the_auth_type_the_owner_chose_in_its_home(tmp_path: Path) -> None:
    """An owner who signed in with Google by running `gemini` in the agent's home keeps that;
    otherwise, or where the file is not one Gemini CLI wrote, the API key passed to it."""
    settings_file = tmp_path / ".gemini/settings.json"
    assert owners_gemini_auth(tmp_path) == "gemini-api-key"
    settings_file.parent.mkdir()
    for unreadable in ("{not json", "[]", '{"security": []}', '{"security": {"auth": 1}}',
                       '{"security": {"auth": {"selectedType": ""}}}'):  # fmt: skip
        settings_file.write_text(unreadable)
        assert owners_gemini_auth(tmp_path) == "gemini-api-key", unreadable
    chosen = {"security": {"auth": {"selectedType": "oauth-personal"}}, "hooks": {"x": []}}
    settings_file.write_text(json.dumps(chosen))
    assert owners_gemini_auth(tmp_path) == "oauth-personal"
    files = GEMINI.home_files(tmp_path, url="http://127.0.0.1:5/mcp", token="t", tools=["a"])
    written = json.loads(files[settings_file])
    assert written["security"]["auth"] == {"selectedType": "oauth-personal"}
    assert written == gemini_settings(
        url="http://127.0.0.1:5/mcp", token="t", tools=["a"], auth="oauth-personal"
    )
    assert files[tmp_path / ".gemini/.env"] == ""
