"""`virgo peers add URL | list | remove URL | check`: the ARD registries a federated search
asks (VX-DISC-5, cards.ard.federation).

A peer's credential (the API token its registry answers to) is read from a file or standard
input, never from the command line, where other users and the shell's history would see it;
it is stored sealed under the key-encryption key and shown by no command.
"""

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from cards.ard import federation, peers
from cards.models import FederationPeer


class Command(BaseCommand):
    help = "Add, list, remove or check the ARD registries a federated search asks."

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        add = actions.add_parser(
            "add", help="Ask the registry at URL in every federated search (replaces its entry)."
        )
        add.add_argument(
            "url", metavar="URL", help="its ARD API, e.g. https://peer.example/api/ard/"
        )
        add.add_argument("--label", default="", help="what to call it in logs (default: its host)")
        add.add_argument(
            "--scheme",
            choices=peers.SCHEMES,
            default="Token",
            help="how its credential is sent: Authorization: <scheme> <credential>",
        )
        given = add.add_mutually_exclusive_group()
        given.add_argument(
            "--credential-file", type=Path, help="a file holding the token its registry takes"
        )
        given.add_argument(
            "--credential-stdin", action="store_true", help="read the token from standard input"
        )
        actions.add_parser(
            "list", help="The peers, enabled or not, and whether each has a credential."
        )
        remove = actions.add_parser("remove", help="Ask the registry at URL no more.")
        remove.add_argument(
            "url", metavar="URL", help="the URL it was added with, or as `list` shows it"
        )
        check = actions.add_parser(
            "check", help="Search every enabled peer now and say what each answered."
        )
        check.add_argument("--text", default="agent", help="the words to search for")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"_{options['action']}")(options)

    def _add(self, options: dict[str, Any]) -> None:
        credential = ""
        if options["credential_file"] is not None:
            try:
                credential = options["credential_file"].read_text()
            except OSError as unreadable:
                raise CommandError(f"--credential-file: {unreadable.strerror}") from None
        elif options["credential_stdin"]:
            credential = sys.stdin.read()
        try:
            peer = peers.add_peer(
                options["url"],
                label=options["label"],
                scheme=options["scheme"],
                credential=credential,
            )
        except peers.PeerRefused as refused:
            raise CommandError(str(refused)) from None
        held = "with a sealed credential" if peer.credential_sealed else "without a credential"
        self.stdout.write(f"added {peer.label} ({peer.url}), {held}")

    def _list(self, options: dict[str, Any]) -> None:
        peers = FederationPeer.objects.order_by("added_at", "pk")
        if not peers:
            self.stdout.write("no peers: searches answer from this registry alone")
        for peer in peers:
            state = "enabled" if peer.enabled else "disabled"
            held = f"{peer.scheme} credential" if peer.credential_sealed else "no credential"
            self.stdout.write(f"{peer.label}  {peer.url}  {state}, {held}")

    def _remove(self, options: dict[str, Any]) -> None:
        # A peer cards migration 0011 left in the spelling it was stored in (disabled, or not a
        # URL it could rewrite) is removed by that spelling, as listed.
        if FederationPeer.objects.filter(url=options["url"]).delete()[0]:
            self.stdout.write(f"removed {options['url']}")
            return
        try:
            url = peers.normalised_url(options["url"])
        except peers.PeerRefused as refused:
            raise CommandError(str(refused)) from None
        removed, _ = FederationPeer.objects.filter(url=url).delete()
        if not removed:
            raise CommandError(f"no peer at {url}: `virgo peers list` shows them")
        self.stdout.write(f"removed {url}")

    def _check(self, options: dict[str, Any]) -> None:
        enabled = federation.enabled_peers()
        if not enabled:
            raise CommandError("no enabled peer to check: `virgo peers add URL` adds one")
        for peer in enabled:
            report = federation.check_peer(peer, {"text": options["text"]})
            self.stdout.write(f"{peer.label}: {report}")
