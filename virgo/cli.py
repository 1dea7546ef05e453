"""The `virgo` console command (installed by pyproject.toml): Virgo's management commands.

`virgo persona add ...`, `virgo stamp show|verify|build|diff ...` and `virgo check` (the boot
validation of every active stamp, among Django's other checks) are the management commands of the
same names; any other management command works the same way (`virgo migrate`). Settings default to
virgo.settings, as for manage.py.
"""

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")
    from django.core.management import execute_from_command_line

    arguments = sys.argv[1:] if argv is None else argv
    execute_from_command_line(["virgo", *arguments])


if __name__ == "__main__":
    main()
