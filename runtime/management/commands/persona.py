"""`virgo persona list|add|export|import|import-card|revoke`: personas from the command line.

Each names an agent or a persona by its id, a persona's uuid, or its unambiguous name
(personas.commandline). An owner's command (`add --owner`, `revoke --by`) finds only what that
owner may act on, so another owner's persona is unknown to it by any of the three.

`add` is the one place that suggests the first persona of an installation: when no persona exists
yet and no address is given, it proposes `root/secretary` (a secretary named "Secretary") and
registers that reserved-root address. Everywhere else, including the stamp factory, an address
must be given and registered: `add` and `import-card` take `--register-address` to register it
in the transaction that makes the persona, as address_register allows (a moderator), so a
persona that is not made leaves no address behind.
"""

from pathlib import Path
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from personas import card_import, services
from personas.addresses import FIRST_PERSONA_ADDRESS, FIRST_PERSONA_NAME, address_problem
from personas.commandline import (
    EXIT_USAGE,
    PERSONA_HEADINGS,
    agent_argument,
    persona_argument,
    persona_documents,
    persona_row,
    user_argument,
    write_list,
)
from personas.models import (
    Agent,
    GrantProposal,
    Persona,
    PersonaClass,
    RegisteredAddress,
    RevocationReason,
)
from personas.selectors import (
    AmbiguousReference,
    UnknownReference,
    agent_by_reference,
    agents_owned_by,
    personas_owned_by,
    personas_visible_to,
)
from runtime.snapshot import ARCHIVED_LEAD, SnapshotError, export_persona, import_persona
from stamps.profiles import required_tools
from stamps.storage import stamp_path

REGISTER_ADDRESS_HELP = (
    "register --address if it is not registered yet, with the persona (a moderator may): a "
    "persona that is not made leaves no address behind"
)


def _names(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


class Command(BaseCommand):
    help = "Manage personas from the command line."
    # An owner can add or repair personas while another persona's stamp fails boot validation.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True)
        listing = actions.add_parser(
            "list",
            help="The personas by id: name, agent, owner, address, class, generation, standing, "
            "discoverable, revoked.",
        )
        listing.add_argument("--owner", metavar="USERNAME", help="only this owner's personas")
        listing.add_argument(
            "--json", action="store_true", help="a JSON list of objects, for scripts"
        )
        add = actions.add_parser(
            "add",
            help=(
                "Create a persona. On an installation with no persona yet, an omitted address "
                f"suggests the first persona: {FIRST_PERSONA_NAME!r} at {FIRST_PERSONA_ADDRESS}."
            ),
        )
        add.add_argument("--owner", required=True, help="username of the owning human")
        add.add_argument("--agent", required=True, help="the owner's agent: its id, or its name")
        add.add_argument(
            "--create-agent",
            action="store_true",
            help="create the agent if missing, granting exactly this persona's verbs and queues",
        )
        add.add_argument(
            "--name", help="the persona's name (required but for an installation's first persona)"
        )
        add.add_argument("--address", help="canonical registered address, e.g. work/core/lead")
        add.add_argument("--register-address", action="store_true", help=REGISTER_ADDRESS_HELP)
        add.add_argument(
            "--class",
            dest="persona_class",
            choices=PersonaClass.values,
            help="its class, which fixes its required tools (required but for the first persona)",
        )
        add.add_argument(
            "--verbs",
            type=_names,
            help="comma-separated verb subset (default: every required tool of the class)",
        )
        add.add_argument("--queues", type=_names, default=[], help="comma-separated queues")
        prompt = add.add_mutually_exclusive_group(required=True)
        prompt.add_argument("--prompt", help="the system prompt, authored by you")
        prompt.add_argument("--prompt-file", type=Path, help="a file holding the system prompt")
        add.add_argument("--description", default="", help="one line its card shows peers")
        add.add_argument(
            "--graph-namespace", default="", help="the namespace of its knowledge-graph entries"
        )
        add.add_argument(
            "--surfaces",
            type=_names,
            default=[],
            help=(
                "comma-separated human-surface bindings: surfaces registered to the owner, or "
                "virgo:persona/<uuid> mailboxes of the owner's personas"
            ),
        )
        add.add_argument(
            "--ask-first",
            type=_names,
            default=[],
            help="comma-separated verbs of the subset that wait for confirmation before they run",
        )
        add.add_argument(
            "--lead", help="the owning project-lead persona, the owner's: its id, uuid or name"
        )
        add.add_argument(
            "--discoverable", action="store_true", help="list it in the directory at once"
        )

        export = actions.add_parser(
            "export", help="write a snapshot of a persona, its generations, stamps and experience"
        )
        export.add_argument("persona", help="the persona's id, uuid or name")
        export.add_argument("archive", type=Path, help="the archive to create (.tar.gz)")

        restore = actions.add_parser(
            "import",
            help=(
                "create a persona from a snapshot on an agent, on behalf of that agent's owner; "
                "its learned choices wait for the owner's review in the admin"
            ),
        )
        restore.add_argument("archive", type=Path, help="a snapshot made by `persona export`")
        restore.add_argument(
            "--agent", required=True, help="the target agent: its id, or its unambiguous name"
        )
        restore.add_argument(
            "--lead",
            help=(
                "one of the owner's project-lead personas (its id, uuid or name) to own the "
                "imported persona in place of the lead the archive names, or 'none'"
            ),
        )
        restore.add_argument(
            "--name",
            help=(
                "the imported persona's name in place of the archive's (by default the "
                "archive's, or '<name> 2' when one of your personas has it)"
            ),
        )
        restore.add_argument(
            "--address",
            help=(
                "a registered address in place of the one the archive names (which one of "
                "your personas holds when you copy a persona on one installation)"
            ),
        )

        card = actions.add_parser(
            "import-card",
            help=(
                "make a draft persona from an A2A agent card (an http(s) URL or a file) on an "
                "agent, for that agent's owner: not discoverable, no system prompt until the "
                "owner writes it, its grant a proposal waiting for the owner's approval"
            ),
        )
        card.add_argument("source", help="the card's URL (http or https) or a file holding it")
        card.add_argument(
            "--agent", required=True, help="the target agent: its id, or its unambiguous name"
        )
        card.add_argument(
            "--address", required=True, help="the registered address the persona takes"
        )
        card.add_argument("--register-address", action="store_true", help=REGISTER_ADDRESS_HELP)
        card.add_argument(
            "--class",
            dest="persona_class",
            required=True,
            choices=PersonaClass.values,
            help="the class the persona takes (a card does not say it)",
        )

        revoke = actions.add_parser(
            "revoke",
            help=(
                "revoke a persona (finally) or one generation of it, at once: its card answers "
                "410 Gone, it leaves the directory and its runtime refuses"
            ),
        )
        revoke.add_argument(
            "persona", help="the persona's id, uuid or name (among those --by may revoke)"
        )
        revoke.add_argument(
            "--by", required=True, help="username of who revokes: the owner or a moderator"
        )
        revoke.add_argument(
            "--reason-code",
            required=True,
            choices=RevocationReason.values,
            help="what the tombstone says",
        )
        revoke.add_argument("--reason", required=True, help="why, for the audit event")
        revoke.add_argument(
            "--generation", type=int, help="revoke only this generation (default: the persona)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        {
            "list": self._list,
            "add": self._add,
            "export": self._export,
            "import": self._import,
            "import-card": self._import_card,
            "revoke": self._revoke,
        }[options["action"]](options)

    def _list(self, options: dict[str, Any]) -> None:
        personas = Persona.objects.all()
        empty = "No personas."
        if options["owner"]:
            owner = user_argument(options["owner"], flag="--owner")
            personas = personas_owned_by(owner)
            empty = f"{owner.get_username()} has no personas."
        write_list(
            self.stdout,
            persona_documents(personas),
            as_json=options["json"],
            headings=PERSONA_HEADINGS,
            row=persona_row,
            empty=empty,
        )

    def _revoke(self, options: dict[str, Any]) -> None:
        actor = user_argument(options["by"], flag="--by")
        # A moderator may revoke any persona, an owner only their own: the others are unknown.
        persona = persona_argument(options["persona"], among=personas_visible_to(actor))
        try:
            revocation = services.persona_revoke(
                persona=persona,
                actor=actor,
                reason_code=options["reason_code"],
                reason=options["reason"],
                generation=options["generation"],
                via="virgo persona revoke",
            )
        except ValidationError as exc:
            raise CommandError(self._explain(exc)) from None
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from None
        what = (
            f"generation {options['generation']} of persona"
            if options["generation"] is not None
            else "persona"
        )
        numbers = ", ".join(map(str, revocation.generations)) or "none"
        persona.refresh_from_db(fields=["discoverable"])
        # An unlisted persona's card was never public: it answers 404 to everyone but its owner.
        answer = (
            "Its card answers 410 Gone"
            if persona.discoverable
            else "It was not listed: its card answers 404 to peers, 410 Gone to you"
        )
        self.stdout.write(
            f"Revoked {what} {persona.name!r} ({persona.uuid}) at "
            f"{revocation.at.isoformat()} ({revocation.reason_code}); generations revoked: "
            f"{numbers}. {answer}: {persona.card_url}"
        )

    def _export(self, options: dict[str, Any]) -> None:
        persona = persona_argument(options["persona"], among=Persona.objects.all())
        try:
            archive = export_persona(persona, options["archive"])
        except FileExistsError:
            raise CommandError(
                f"{options['archive']} exists; snapshots are never overwritten"
            ) from None
        except SnapshotError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        self.stdout.write(f"Exported persona {persona.name} ({persona.uuid}) to {archive}")

    def _import(self, options: dict[str, Any]) -> None:
        agent = self._target_agent(options["agent"])
        lead: Any = ARCHIVED_LEAD
        if options["lead"] == "none":
            lead = None
        elif options["lead"]:
            lead = persona_argument(
                options["lead"], among=personas_owned_by(agent.owner), flag="--lead"
            )
        try:
            outcome = import_persona(
                options["archive"],
                agent=agent,
                actor=agent.owner,
                owning_lead=lead,
                address=options["address"],
                name=options["name"],
            )
        except ValidationError as exc:
            raise CommandError(self._explain(exc)) from None
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from None
        persona = outcome.persona
        self.stdout.write(
            f"Imported persona {persona.name} as {persona.uuid} (archived as "
            f"{outcome.snapshot_import.source_persona}): {outcome.archived_stamps} archived "
            f"stamps kept as history; {outcome.experience_entries} learned choices and "
            f"{outcome.overlay_entries} class-overlay entries wait for review in the admin."
        )
        if outcome.renamed_from is not None:
            self.stdout.write(
                f"Named {persona.name}: one of your personas is already called "
                f"{outcome.renamed_from} (rename it in the admin, or import with --name)."
            )
        for skipped in outcome.skipped:
            self.stdout.write(f"Skipped: {skipped}")
        persona.refresh_from_db()
        self._report(persona, outcome.proposal)

    def _import_card(self, options: dict[str, Any]) -> None:
        agent = self._target_agent(options["agent"])
        try:
            # Fetched before the transaction: no database transaction waits on the network.
            card = card_import.load_card(options["source"])
            with transaction.atomic():
                address, registered = self._address(
                    options["address"], agent.owner, register=options["register_address"]
                )
                outcome = card_import.import_card(
                    card,
                    agent=agent,
                    actor=agent.owner,
                    persona_class=options["persona_class"],
                    address=address,
                    source=options["source"],
                )
        except card_import.CardImportError as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            raise CommandError(self._explain(exc)) from None
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from None
        persona, proposal = outcome.persona, outcome.proposal
        if registered:
            self.stdout.write(f"Registered address {address.path}.")
        self.stdout.write(
            f"Drafted persona {persona.name!r} ({persona.uuid}) at {persona.address.path} from "
            f"the card; it is not discoverable and does not stand. Its grant of "
            f"{len(proposal.changes['verb_subset'])} verbs is proposal {proposal.pk}: write the "
            "system prompt and approve it in the admin."
        )
        for card_skill, slug in outcome.mapping.mapped:
            self.stdout.write(f"Mapped: {card_skill} -> {slug}")
        for skipped in outcome.mapping.unmapped:
            self.stdout.write(f"Not mapped: {skipped.id or skipped.name}: {skipped.reason}")

    @staticmethod
    def _target_agent(reference: str) -> Agent:
        """`import`'s and `import-card`'s agent: any agent, whose owner the new persona's is."""
        agents = Agent.objects.select_related("owner")
        return agent_argument(reference, among=agents, flag="--agent")

    def _add(self, options: dict[str, Any]) -> None:
        owner = user_argument(options["owner"], flag="--owner")
        fields, suggested = self._fields(options, owner)
        try:
            with transaction.atomic():
                path = fields.pop("address")
                if suggested and not RegisteredAddress.objects.filter(path=path).exists():
                    address, registered = services.address_register_first(actor=owner), True
                else:
                    address, registered = self._address(
                        path, owner, register=options["register_address"]
                    )
                agent = self._agent(owner, options, fields)
                change = services.persona_draft(
                    agent=agent, actor=owner, via=GrantProposal.Via.CLI, address=address, **fields
                )
                if options["discoverable"]:
                    services.persona_set_discoverable(
                        persona=change.persona,
                        actor=owner,
                        discoverable=True,
                        via="virgo persona add",
                    )
        except ValidationError as exc:
            raise CommandError(self._explain(exc)) from None
        except PermissionDenied as exc:
            raise CommandError(str(exc)) from None
        if registered:
            self.stdout.write(f"Registered address {address.path}.")
        change.persona.refresh_from_db()
        self._report(change.persona, change.proposal)

    def _fields(self, options: dict[str, Any], owner: Any) -> tuple[dict[str, Any], bool]:
        """The persona's fields, and whether its address is the first-persona suggestion."""
        address, name, persona_class = (
            options["address"],
            options["name"],
            options["persona_class"],
        )
        suggested = address is None
        if suggested:
            if Persona.objects.exists():
                raise CommandError(
                    "--address is required: the root/secretary suggestion is only for the "
                    "first persona of an installation, and personas exist"
                )
            address = FIRST_PERSONA_ADDRESS
            name = name or FIRST_PERSONA_NAME
            persona_class = persona_class or PersonaClass.SECRETARY
            self.stdout.write(
                f"No persona exists yet: suggesting the first persona {name!r} as a "
                f"{persona_class} at {address}."
            )
        given = (("--name", name), ("--class", persona_class))
        missing = [flag for flag, value in given if not value]
        if missing:
            raise CommandError(f"{' and '.join(missing)} required")
        prompt = options["prompt_file"].read_text() if options["prompt_file"] else options["prompt"]
        verbs = options["verbs"]
        if verbs is None:
            verbs = list(required_tools(persona_class))
            self.stdout.write(f"Verb subset: the {len(verbs)} required tools of a {persona_class}.")
        fields: dict[str, Any] = {
            "name": name,
            "system_prompt": prompt,
            "description": options["description"],
            "persona_class": persona_class,
            "address": address,
            "verb_subset": verbs,
            "queues": options["queues"],
            "graph_namespace": options["graph_namespace"],
            "human_surface_bindings": options["surfaces"],
            "ask_first_verbs": options["ask_first"],
        }
        if options["lead"]:
            fields["owning_lead"] = persona_argument(
                options["lead"], among=personas_owned_by(owner), flag="--lead"
            )
        return fields, suggested

    def _address(self, path: str, owner: Any, *, register: bool) -> tuple[RegisteredAddress, bool]:
        """The persona's registered address, and whether it was registered now (by `owner`,
        under address_register's rule); the caller's transaction holds the registration."""
        registered = RegisteredAddress.objects.filter(path=path).first()
        if registered is not None:
            return registered, False
        problem = address_problem(path)
        # Named by its field, as every other refusal of what the records hold.
        if problem:
            raise CommandError(f"address: {problem}")
        if not register:
            raise CommandError(
                f"address: {path!r} is not registered; pass --register-address to register it "
                "with the persona"
            )
        try:
            return services.address_register(actor=owner, path=path), True
        except PermissionDenied as refusal:
            raise CommandError(
                f"--register-address: {refusal} and {owner.get_username()} is not one; a "
                f"moderator registers {path!r} (admin: Registered addresses), then run this "
                "again without --register-address"
            ) from None

    def _agent(self, owner: Any, options: dict[str, Any], fields: dict[str, Any]) -> Agent:
        try:
            return agent_by_reference(options["agent"], among=agents_owned_by(owner))
        except UnknownReference:
            if not options["create_agent"]:
                raise CommandError(
                    f"--agent: {owner.get_username()} has no agent {options['agent']!r} (by id "
                    "or name); pass --create-agent to create it",
                    returncode=EXIT_USAGE,
                ) from None
        except AmbiguousReference as problem:
            raise CommandError(f"--agent: {problem}", returncode=EXIT_USAGE) from None
        self.stdout.write(f"Created agent {options['agent']!r} granting this persona's scope.")
        return services.agent_create(
            owner=owner,
            name=options["agent"],
            granted_verbs=list(fields["verb_subset"]),
            granted_queues=list(fields["queues"]),
        )

    @staticmethod
    def _explain(error: ValidationError) -> str:
        if hasattr(error, "error_dict"):
            return "; ".join(
                f"{field}: {' '.join(messages)}" for field, messages in error.message_dict.items()
            )
        return " ".join(error.messages)

    def _report(self, persona: Persona, proposal: GrantProposal | None = None) -> None:
        self.stdout.write(
            f"Created persona {persona.name!r} ({persona.uuid}) at {persona.address.path}, "
            f"generation {persona.generation}."
        )
        if proposal is not None:
            # A channel's new persona grants nothing until its owner approves (VX-REV-1).
            self.stdout.write(
                f"It grants nothing and does not stand until you approve its grant: proposal "
                f"{proposal.pk} ({len(proposal.changes.get('verb_subset', []))} verbs). Review "
                f"and approve it in the admin: {proposal.review_url}"
            )
            return
        generation = persona.generations.get(number=persona.generation)
        if generation.standing:
            path = stamp_path(persona.uuid, generation.number)
            self.stdout.write(f"It stands: stamp {generation.stamp_hash} at {path}")
        elif generation.standing is False:
            self.stderr.write("It does not stand, so it is not advertised:")
            for reason in generation.not_standing_reasons:
                self.stderr.write(f"  - {reason}")
        else:
            self.stdout.write("Its stamp is owed: a Celery worker builds it shortly.")
