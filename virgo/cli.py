"""The `virgo` console command (installed by pyproject.toml): Virgo's management commands.

`virgo persona add ...`, `virgo stamp show|verify|build|diff ...` and `virgo check` (the boot
validation of every active stamp, among Django's other checks) are the management commands of the
same names; any other management command works the same way (`virgo migrate`). Settings default to
virgo.settings, as for manage.py; a setting they refuse is one line and status 2 (virgo.startup).
"""

import sys

from virgo.startup import run_management


def main(argv: list[str] | None = None) -> None:
    run_management("virgo", sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    main()
