"""`virgo check` (`manage.py check`): Django's checks, and every active stamp verified.

The release pipeline's check (VX-OPS-4): it exits non-zero listing every stamp problem, and
repairs or quarantines what it finds as the periodic sweep would (stamps.quarantine). Every
other command runs only the checks that take constant time (VX-OPS-5), so a broken stamp file
stops none of them.

On a terminal it shows how far the stamp verification has got (virgo.progress). `--json` prints
only a JSON document on stdout, `{"ok": ..., "issues": [...], "silenced": N}`, each issue with its
`id`, `level`, `message`, `hint` and `object`, so `virgo check --json | jq` works; the summary
goes to stderr, and the exit status is non-zero, as without it, when an issue reaches
`--fail-level`. A database it cannot reach fails it in one line, status 2, as every command.
"""

import json
import sys
from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core import checks
from django.core.checks import CheckMessage
from django.core.management.base import CommandError, CommandParser
from django.core.management.commands import check
from django.db import DEFAULT_DB_ALIAS, connections

from stamps.checks import verifying_every_stamp
from virgo import progress

LEVEL_NAMES = {
    checks.DEBUG: "DEBUG",
    checks.INFO: "INFO",
    checks.WARNING: "WARNING",
    checks.ERROR: "ERROR",
    checks.CRITICAL: "CRITICAL",
}


def issue_document(issue: CheckMessage) -> dict[str, Any]:
    return {
        "id": issue.id,
        "level": LEVEL_NAMES.get(issue.level, str(issue.level)),
        "message": issue.msg,
        "hint": issue.hint,
        "object": None if issue.obj is None else str(issue.obj),
    }


class Command(check.Command):
    help = "Check the entire project, every active capability stamp file included."

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        for action in parser._actions:
            if action.dest == "args":
                action.help = "only these apps' checks (default: every app's)"
        parser.add_argument(
            "--json",
            action="store_true",
            help="Print only a JSON document of the issues on stdout (the summary on stderr).",
        )

    def handle(self, *app_labels: str, **options: Any) -> None:
        # VX-OPS-7: the checks below pass on a database they cannot read (a first `migrate`
        # runs them too), so without this a release's check passed with the database down. The
        # error ends the command in one line, status 2 (virgo.startup).
        connections[DEFAULT_DB_ALIAS].ensure_connection()
        self.as_json = options["json"]
        with verifying_every_stamp(), progress.shown_on(sys.stderr):
            super().handle(*app_labels, **options)

    def check(
        self,
        app_configs: Sequence[AppConfig] | None = None,
        tags: Sequence[str] | None = None,
        display_num_errors: bool = False,
        include_deployment_checks: bool = False,
        fail_level: int = checks.ERROR,
        databases: Sequence[str] | None = None,
    ) -> None:
        if not getattr(self, "as_json", False):
            super().check(
                app_configs=app_configs,
                tags=tags,
                display_num_errors=display_num_errors,
                include_deployment_checks=include_deployment_checks,
                fail_level=fail_level,
                databases=databases,
            )
            return
        every = checks.run_checks(
            app_configs=app_configs,
            tags=tags,
            include_deployment_checks=include_deployment_checks,
            databases=databases,
        )
        visible = sorted(
            (issue for issue in every if not issue.is_silenced()),
            key=lambda issue: (-issue.level, issue.id or "", issue.msg),
        )
        failing = [issue for issue in visible if issue.level >= fail_level]
        self.stdout.write(
            json.dumps(
                {
                    "ok": not failing,
                    "issues": [issue_document(issue) for issue in visible],
                    "silenced": len(every) - len(visible),
                },
                indent=2,
                ensure_ascii=False,
            )
        )
        summary = (
            f"System check identified {len(visible) or 'no'} issue{'s' * (len(visible) != 1)} "
            f"({len(every) - len(visible)} silenced)."
        )
        if failing:
            raise CommandError(f"{summary} {len(failing)} at or above the fail level.")
        self.stderr.write(summary)
