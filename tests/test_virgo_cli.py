"""`virgo` is Virgo's own command line (virgo.cli, VX-OPS-10): its help lists Virgo's commands by
what they are for, one line each; every option of every command says what it is for; Django's
own commands are manage.py's, and `virgo` says so."""

import argparse
from collections.abc import Iterator

import pytest
from django.core.management import get_commands, load_command_class

from virgo import cli

DJANGO_ONLY = ("startproject", "flush", "squashmigrations", "migrate", "shell", "createsuperuser")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = 0
    try:
        cli.main(list(argv))
    except SystemExit as exited:
        code = int(exited.code or 0)
    said = capsys.readouterr()
    return code, said.out, said.err


def test_the_help_lists_virgos_commands_grouped_one_line_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """VX-OPS-10: `virgo`, `virgo --help` and `virgo help` print the same overview: each group
    titled, each of Virgo's commands once on one line of at most 100 characters with what it
    does, none of Django's own, and where Django's are."""
    code, overview, _ = run(capsys, "--help")
    assert code == 0
    assert run(capsys) == run(capsys, "help") == (0, overview, "")
    lines = overview.splitlines()
    assert all(len(line) <= 100 for line in lines)
    listed = [line.split()[0] for line in lines if line.startswith("  ")]
    assert sorted(listed) == sorted(cli.COMMANDS) and len(listed) == len(set(listed))
    for title, _names in cli.GROUPS:
        assert f"{title}:" in lines
    assert "  agent         List agents" in lines
    for django_command in DJANGO_ONLY:
        assert f"  {django_command} " not in overview
    assert "`.venv/bin/python manage.py help`" in overview


def every_action(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, object]]:
    """(where, action) for every argument of the parser and of its subcommands, and the help line
    of each subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            lines = {choice.dest: choice.help for choice in action._choices_actions}
            for name, subparser in action.choices.items():
                yield f"{path} {name}", lines.get(name)
                yield from every_action(subparser, f"{path} {name}")
            continue
        yield f"{path} {'/'.join(action.option_strings) or action.dest}", action.help


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_option_says_what_it_is_for(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """VX-OPS-10: every argument and subcommand of each Virgo command has help, and `virgo X
    --help` shows none of Django's own options (settings, pythonpath, traceback, colours)."""
    command = load_command_class(get_commands()[name], name)
    command.suppressed_base_arguments = set(cli.DJANGO_OPTIONS)
    parser = command.create_parser("virgo", name)
    missing = [
        where
        for where, text in every_action(parser, name)
        if not text and text != argparse.SUPPRESS and not where.endswith(tuple(cli.DJANGO_OPTIONS))
    ]
    assert missing == []
    code, shown, _ = run(capsys, name, "--help")
    assert code == 0
    for option in cli.DJANGO_OPTIONS:
        assert option not in shown
    assert "myproject" not in shown


def test_djangos_own_commands_are_named_as_manage_pys(capsys: pytest.CaptureFixture[str]) -> None:
    """VX-OPS-10: `virgo migrate` runs nothing and says where it is, status 2; a mistyped
    command is one line with the closest of Virgo's."""
    assert run(capsys, "migrate") == (
        2,
        "",
        "virgo: migrate is Django's command, not Virgo's: run "
        "`.venv/bin/python manage.py migrate`\n",
    )
    assert run(capsys, "persno", "list") == (
        2,
        "",
        "virgo: no command 'persno'; did you mean `virgo persona`? `virgo --help` lists them\n",
    )
    assert run(capsys, "zzz")[2] == "virgo: no command 'zzz'; `virgo --help` lists them\n"


def test_help_for_a_command_is_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    """`virgo help agent` is `virgo agent --help`."""
    assert run(capsys, "help", "agent") == run(capsys, "agent", "--help")
    assert "usage: virgo agent" in run(capsys, "agent", "--help")[1]
