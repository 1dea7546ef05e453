"""The `virgo` console command (installed by pyproject.toml): Virgo's own commands (VX-OPS-10).

`virgo --help` lists them by what they are for, one line each (the first sentence of the
command's own help); `virgo <command> --help` shows that command's options without Django's
(settings, traceback, colours: the installation's settings are read as for every Virgo process,
and a setting it refuses is one line with status 2, virgo.startup). Django's own commands
(migrate, createsuperuser, shell...) are `manage.py`'s: `virgo` names them so, and refuses to
run them.
"""

import difflib
import sys

from virgo.startup import EXIT_MISCONFIGURED, run_management

PROGRAM = "virgo"
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Agents and personas", ("agent", "persona", "organization", "explain")),
    ("Stamps, cards and keys", ("stamp", "cards", "keys")),
    ("Discovery", ("peers",)),
    ("Running a persona", ("launch", "mcp")),
    ("Operating the installation", ("check", "reconcile", "audit", "signin", "load_demo")),
)
COMMANDS = frozenset(name for _, names in GROUPS for name in names)
# What every management command accepts and `virgo` never needs shown: its settings are the
# installation's, and Django's example of them (`myproject.settings.main`) is not Virgo's.
DJANGO_OPTIONS = frozenset(
    {"--version", "--settings", "--pythonpath", "--traceback", "--no-color", "--force-color"}
)
HELP_WORDS = ("-h", "--help", "help")


def first_line(text: str) -> str:
    """The first sentence of a command's help: what the overview shows."""
    sentence = " ".join(text.split()).split(". ")[0]
    return sentence.rstrip(".")


def overview() -> str:
    from django.core.management import get_commands, load_command_class

    apps = get_commands()
    width = max(map(len, COMMANDS))
    lines = [f"usage: {PROGRAM} <command> [options]", ""]
    for title, names in GROUPS:
        lines.append(f"{title}:")
        for name in names:
            command = load_command_class(apps[name], name)
            lines.append(f"  {name.ljust(width)}  {first_line(str(command.help))}")
        lines.append("")
    lines += [
        f"`{PROGRAM} <command> --help` shows a command's options.",
        "Django's own commands (migrate, createsuperuser, shell...) are manage.py's:",
        "`.venv/bin/python manage.py help`.",
    ]
    return "\n".join(lines)


def refuse(name: str) -> None:
    from django.core.management import get_commands

    if name in get_commands():
        reason = f"{name} is Django's command, not Virgo's: run `.venv/bin/python manage.py {name}`"
    else:
        close = difflib.get_close_matches(name, sorted(COMMANDS), n=1)
        hint = f"did you mean `{PROGRAM} {close[0]}`? " if close else ""
        reason = f"no command {name!r}; {hint}`{PROGRAM} --help` lists them"
    print(f"{PROGRAM}: {reason}", file=sys.stderr)
    raise SystemExit(EXIT_MISCONFIGURED)


def execute(argv: list[str]) -> None:
    import django
    from django.core.management import get_commands, load_command_class

    django.setup()
    if not argv or (argv[0] in HELP_WORDS and len(argv) == 1):
        print(overview())
        return
    if argv[0] == "help":
        argv = [argv[1], "--help"]
    name = argv[0]
    if name not in COMMANDS:
        refuse(name)
    command = load_command_class(get_commands()[name], name)
    command.suppressed_base_arguments = set(DJANGO_OPTIONS)
    command.run_from_argv([PROGRAM, *argv])


def main(argv: list[str] | None = None) -> None:
    run_management(PROGRAM, sys.argv[1:] if argv is None else argv, execute)


if __name__ == "__main__":
    main()
