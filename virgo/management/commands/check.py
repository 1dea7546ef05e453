"""`virgo check` (`manage.py check`): Django's checks, and every active stamp verified.

The release pipeline's check (VX-OPS-4): it exits non-zero listing every stamp problem, and
repairs or quarantines what it finds as the periodic sweep would (stamps.quarantine). Every
other command runs only the checks that take constant time (VX-OPS-5), so a broken stamp file
stops none of them.
"""

from typing import Any

from django.core.management.commands import check

from stamps.checks import verifying_every_stamp


class Command(check.Command):
    help = "Check the entire project, every active capability stamp file included."

    def handle(self, *app_labels: str, **options: Any) -> None:
        with verifying_every_stamp():
            super().handle(*app_labels, **options)
