"""`virgo stamp show|verify|build|diff|restore|vectors|test`: read, check, (re)build and
restore stamps, and export and replay a persona's policy vectors.

`stamp vectors <persona>` prints the persona's policy vectors (JSON, or into --output FILE);
`stamp test <persona> FILE` replays them against its current grant: a line per call whose
verdict changed and status 1, or one summary line and 0; a file that is no vectors document is
one line and status 2. The runtime explains the calls (stamps.vectors says how it is reached).

`stamp show --json` prints only the stamp document on stdout, its header lines (persona,
hashes, file) on stderr, so `virgo stamp show <uuid> --json | jq` works. `stamp build --all`
shows its progress on a terminal (virgo.progress).
"""

import json
import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from personas.commandline import EXIT_USAGE, persona_argument
from personas.models import Generation, Persona
from stamps import vectors
from stamps.models import StampNotVerifiable, stamp_file_state
from stamps.quarantine import is_quarantined, restore, restore_command
from stamps.selectors import stamp_diff, stamp_document
from stamps.services import build_generation_stamp
from stamps.verification import verify_file
from virgo import progress


class Command(BaseCommand):
    help = "Show, verify, build, compare or restore capability stamps."
    # The tool for looking into broken stamps must run while boot validation fails.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        show = actions.add_parser("show", help="Print a persona's stamp (current generation).")
        show.add_argument("persona", help="the persona: its id, uuid or unambiguous name")
        show.add_argument("--generation", type=int, help="another generation number")
        show.add_argument(
            "--json",
            action="store_true",
            help="print only the stamp on stdout (the header lines go to stderr)",
        )
        verify = actions.add_parser(
            "verify", help="Validate v1, v2 or v3 stamp files and print what is wrong."
        )
        verify.add_argument(
            "paths", nargs="+", type=Path, help="CAPABILITY-STAMP.json files to verify"
        )
        build = actions.add_parser(
            "build", help="Build the owed stamp of a persona's current generation (or all)."
        )
        build.add_argument("persona", nargs="?", help="the persona: its id, uuid or name")
        build.add_argument("--all", action="store_true", help="every persona with a stamp owed")
        diff = actions.add_parser("diff", help="Tools added, removed and changed between two.")
        diff.add_argument("persona", help="the persona: its id, uuid or name")
        diff.add_argument("old", type=int, help="older generation number")
        diff.add_argument("new", type=int, help="newer generation number")
        restored = actions.add_parser(
            "restore",
            help="Put the stored stamp back in place of a persona's stamp file (the file found "
            "there is set aside) and lift its quarantine once it verifies.",
        )
        restored.add_argument("persona", help="the persona: its id, uuid or name")
        exported = actions.add_parser(
            "vectors",
            help="Print the persona's policy vectors: calls with the verdict and rule each gets.",
        )
        exported.add_argument("persona", help="the persona: its id, uuid or name")
        exported.add_argument("--output", type=Path, help="write them to this file instead")
        replayed = actions.add_parser(
            "test", help="Replay a vectors file against the persona's current grant."
        )
        replayed.add_argument("persona", help="the persona: its id, uuid or name")
        replayed.add_argument("vectors", type=Path, help="the file `stamp vectors` wrote")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "verify":
            self._verify(options["paths"])
        elif action == "build":
            with progress.shown_on(sys.stderr):
                self._build(options["persona"], build_all=options["all"])
        elif action == "restore":
            self._restore(self._persona(options["persona"]))
        elif action == "vectors":
            self._vectors(self._persona(options["persona"]), options["output"])
        elif action == "test":
            self._test(self._persona(options["persona"]), options["vectors"])
        else:
            persona = self._persona(options["persona"])
            if action == "show":
                number = options["generation"] or persona.generation
                self._show(persona, number, as_json=options["json"])
            else:
                self._diff(persona, options["old"], options["new"])

    def _persona(self, reference: str) -> Persona:
        # Any persona: the stamps are the installation's, and this is the tool to repair them.
        return persona_argument(
            reference, among=Persona.objects.select_related("agent__owner", "address")
        )

    def _generation(self, persona: Persona, number: int) -> Generation:
        generation = persona.generations.select_related("stamp").filter(number=number).first()
        if generation is None:
            raise CommandError(f"persona {persona.name!r} has no generation {number}")
        return generation

    def _show(self, persona: Persona, number: int, *, as_json: bool) -> None:
        generation = self._generation(persona, number)
        # For people the header and the stamp read together; for scripts stdout is the stamp.
        stream = self.stderr if as_json else self.stdout

        def header(line: str) -> None:
            stream.write(line, style_func=str)

        header(f"persona {persona.name!r} ({persona.uuid}) generation {number}")
        if generation.standing is None:
            raise CommandError("its stamp is owed: run `virgo stamp build` or a Celery worker")
        if generation.standing is False:
            quarantined = is_quarantined(generation)
            header("QUARANTINED:" if quarantined else "not standing:")
            for reason in generation.not_standing_reasons:
                header(f"  - {reason}")
            if not quarantined:
                raise CommandError("this generation has no stamp: it does not stand")
            header(f"restore it with `{restore_command(persona)}`")
        stamp = generation.stamp
        header(f"stamp sha256 {stamp.stamp_hash}")
        header(f"composition {generation.composition_hash}")
        header(f"file {stamp.path} ({stamp_file_state(generation)})")
        self.stdout.write(json.dumps(stamp_document(stamp), indent=2, ensure_ascii=False))

    def _verify(self, paths: list[Path]) -> None:
        failed = 0
        for path in paths:
            result = verify_file(path)
            version = f"v{result.version}" if result.version else "unknown version"
            status = "OK" if result.ok else "INVALID"
            self.stdout.write(f"{path}: {status} ({version}, sha256 {result.sha256 or '-'})")
            for detail in result.details:
                self.stdout.write(f"  {detail}")
            for problem in result.problems:
                self.stdout.write(f"  - {problem.message}")
            failed += not result.ok
        if failed:
            raise CommandError(f"{failed} of {len(paths)} stamp files failed verification")

    def _build(self, reference: str | None, *, build_all: bool) -> None:
        if build_all == bool(reference):
            raise CommandError("name one persona, or pass --all")
        if build_all:
            personas = list(Persona.objects.filter(standing__isnull=True).order_by("pk"))
        else:
            personas = [self._persona(reference or "")]
        for persona in progress.track(personas, "stamps built"):
            generation = self._generation(persona, persona.generation)
            outcome = build_generation_stamp(generation=generation)
            if outcome.stamp is not None:
                self.stdout.write(
                    f"{persona.name} ({persona.uuid}) generation {generation.number}: standing, "
                    f"stamp {outcome.stamp.stamp_hash}"
                )
            else:
                self.stdout.write(
                    f"{persona.name} ({persona.uuid}) generation {generation.number}: not "
                    "standing: " + "; ".join(outcome.reasons)
                )

    def _restore(self, persona: Persona) -> None:
        try:
            restoration = restore(persona=persona)
        except (Generation.DoesNotExist, StampNotVerifiable) as exc:
            reason = str(exc) if isinstance(exc, StampNotVerifiable) else "no current generation"
            raise CommandError(
                f"nothing to restore persona {persona.name!r} ({persona.uuid}) from: {reason}"
            ) from None
        generation = restoration.generation
        self.stdout.write(
            f"{persona.name} ({persona.uuid}) generation {generation.number}: stamp file "
            f"{restoration.path} holds the stored stamp"
        )
        if restoration.set_aside is not None:
            self.stdout.write(f"  the file found there is kept as {restoration.set_aside}")
        if not restoration.ok:
            for problem in restoration.problems:
                self.stdout.write(f"  - {problem.id}: {problem.msg}")
            raise CommandError("the stored stamp itself does not verify: it stays quarantined")
        self.stdout.write("  quarantine lifted: it stands again" if restoration.lifted else "  ok")

    def _diff(self, persona: Persona, old: int, new: int) -> None:
        documents = []
        for number in (old, new):
            generation = self._generation(persona, number)
            if not hasattr(generation, "stamp"):
                raise CommandError(f"generation {number} of {persona.name!r} has no stamp")
            documents.append(stamp_document(generation.stamp))
        diff = stamp_diff(documents[0], documents[1])
        self.stdout.write(f"{persona.name} ({persona.uuid}) generation {old} -> {new}")
        if diff.empty:
            self.stdout.write("  no tool changes")
        for name in diff.added:
            self.stdout.write(f"  + {name}")
        for name in diff.removed:
            self.stdout.write(f"  - {name}")
        for name, before, after in diff.access_changed:
            self.stdout.write(f"  ~ {name}: access {before} -> {after}")
        for name in diff.scope_changed:
            self.stdout.write(f"  ~ {name}: scope changed")

    def _vectors(self, persona: Persona, output: Path | None) -> None:
        try:
            document = vectors.provider().export(persona)
        except vectors.PersonaUnexplainable as exc:
            raise CommandError(f"no vectors for persona {persona.uuid}: {exc}") from None
        text = json.dumps(document, indent=2, ensure_ascii=True) + "\n"
        if output is None:
            self.stdout.write(text, ending="")
            return
        output.write_text(text)
        self.stderr.write(f"{len(document['vectors'])} vectors written to {output}")

    def _test(self, persona: Persona, path: Path) -> None:
        try:
            document = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CommandError(
                f"{path}: not a vectors file: {exc}", returncode=EXIT_USAGE
            ) from None
        try:
            replay = vectors.provider().replay(persona, document)
        except vectors.MalformedVectors as exc:
            raise CommandError(f"{path}: {exc}", returncode=EXIT_USAGE) from None
        except vectors.PersonaUnexplainable as exc:
            raise CommandError(f"persona {persona.uuid}: {exc}") from None
        for change in replay.changed:
            arguments = json.dumps(change.arguments, sort_keys=True, ensure_ascii=True)
            self.stdout.write(
                f"{change.id}: {change.tool} {arguments}: expected {change.expected}, "
                f"now {change.now}"
            )
        if replay.changed:
            raise CommandError(
                f"{len(replay.changed)} of {replay.total} vectors changed for persona "
                f"{persona.name!r} ({persona.uuid})"
            )
        self.stdout.write(
            f"all {replay.total} vectors hold for persona {persona.name!r} ({persona.uuid})"
        )
