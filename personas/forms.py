"""Admin forms whose validation is the service's own.

Each form's clean() rehearses the very service call the admin will make on save, inside a
savepoint that is always rolled back (on-commit work queued in it is discarded with it). The
service's ValidationErrors land on the fields they name, a PermissionDenied on the form, and
an invalid form saves nothing. On save the admin makes the same call for real
(`save_through_service`). There is no second copy of the rules here.
"""

from collections.abc import Iterable
from typing import Any, ClassVar

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import models, transaction
from django.utils.module_loading import import_string

from personas import selectors, services, surfaces
from personas.addresses import address_problem
from personas.catalogue import VERBS
from personas.models import (
    Agent,
    GrantProposal,
    HumanSurface,
    OrganizationDomain,
    OwnerIdentity,
    Persona,
    PersonaClass,
    RegisteredAddress,
    RevocationReason,
    Skill,
)
from personas.services import PERSONA_FIELDS

VERBS_BY_NAME = {verb.name: verb for verb in VERBS}


class _Rehearsal(Exception):
    """Raised to roll back a rehearsed service call that succeeded."""


def verb_choices(names: Iterable[str] | None = None) -> list[tuple[str, list[tuple[str, str]]]]:
    """Catalogue verbs grouped by capability bundle, in catalogue order; only `names` if given."""
    allowed = None if names is None else set(names)
    groups: dict[str, list[tuple[str, str]]] = {}
    for verb in VERBS:
        if allowed is not None and verb.name not in allowed:
            continue
        label = f"{verb.name}: {verb.description}"
        if verb.boundary is not None:
            label += f" (boundary: {verb.boundary.value})"
        groups.setdefault(verb.bundle.value, []).append((verb.name, label))
    return [(bundle[:1].upper() + bundle[1:], items) for bundle, items in groups.items()]


class NamesField(forms.CharField):
    """A list of names typed one per line (commas also separate)."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 40})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return "\n".join(value)
        return value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value)
        return [name.strip() for name in text.replace(",", "\n").splitlines() if name.strip()]


class VerbCheckboxes(forms.CheckboxSelectMultiple):
    """Verb checkboxes on which the verbs the persona's class may not have are shown disabled,
    each with the factory's reason (settings.VIRGO_CLASS_REFUSALS): checking one would leave the
    persona unable to stand (VX-GRANT-4)."""

    refusals: dict[str, str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refusals = {}

    def create_option(
        self, name: str, value: Any, label: Any, selected: Any, index: Any, **kwargs: Any
    ) -> dict[str, Any]:
        option = super().create_option(name, value, label, selected, index, **kwargs)
        reason = self.refusals.get(str(value))
        if reason is not None and not selected:
            option["attrs"]["disabled"] = True
            option["attrs"]["title"] = reason
            option["label"] = f"{label} (not available: {reason})"
        return option


def _flat(choices: Any) -> list[tuple[str, str]]:
    return [item for _, items in choices for item in items]


class VerbGrid(VerbCheckboxes):
    """The persona's verb subset as one table per capability bundle, each verb with its
    description and, beside it, whether it asks first: the ask-first checkboxes are the form's
    `ask_first_verbs` field, drawn here (that field's own widget draws nothing) so an owner
    decides both for a verb in one place. A verb a global boundary governs always asks."""

    template_name = "personas/widgets/verb_grid.html"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.may_ask_first: frozenset[str] = frozenset()
        self.asks_first: frozenset[str] = frozenset()

    def get_context(self, name: str, value: Any, attrs: Any) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        groups = []
        for group, options, _ in context["widget"]["optgroups"]:
            rows = []
            for option in options:
                verb = VERBS_BY_NAME[option["value"]]
                rows.append(
                    {
                        "option": option,
                        "verb": verb,
                        "may_ask_first": verb.name in self.may_ask_first,
                        "asks_first": verb.name in self.asks_first,
                        "ask_id": f"id_ask_first_verbs_{verb.name}",
                    }
                )
            groups.append({"name": group, "rows": rows})
        context["widget"]["groups"] = groups
        return context


class DrawnElsewhere(forms.CheckboxSelectMultiple):
    """Checkboxes another widget draws (VerbGrid): read from the request as usual, rendered as
    nothing, and hidden so the admin gives them no row of their own."""

    input_type = "hidden"

    def render(self, *args: Any, **kwargs: Any) -> str:
        return ""


def _checkboxes(choices: Any = ()) -> forms.MultipleChoiceField:
    return forms.MultipleChoiceField(
        choices=choices, required=False, widget=forms.CheckboxSelectMultiple
    )


class ServiceForm(forms.ModelForm):
    """A model form validated by rehearsing its service call; see the module docstring."""

    # Set by the admin for each request (ModelAdmin.get_form builds a class per request).
    actor: ClassVar[Any] = None

    def call_service(self) -> models.Model:
        """Make the service call this form stands for, from cleaned_data; return the object."""
        raise NotImplementedError

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if not self._errors:
            self._rehearse()
        return cleaned

    def _rehearse(self) -> None:
        try:
            with transaction.atomic():
                self.call_service()
                raise _Rehearsal
        except _Rehearsal:
            pass
        except ValidationError as exc:
            self._add_service_errors(exc)
        except PermissionDenied as exc:
            self.add_error(None, str(exc) or "You may not make this change.")

    def _add_service_errors(self, exc: ValidationError) -> None:
        if not hasattr(exc, "error_dict"):
            self.add_error(None, exc.messages)
            return
        for field, messages in exc.message_dict.items():
            if field in self.fields and field != NON_FIELD_ERRORS:
                self.add_error(field, messages)
            elif field == NON_FIELD_ERRORS:
                self.add_error(None, messages)
            else:
                self.add_error(None, [f"{field}: {message}" for message in messages])

    def save_through_service(self) -> models.Model:
        return self.call_service()

    def changed_values(self, names: Iterable[str]) -> dict[str, Any]:
        return {
            name: self.cleaned_data[name]
            for name in names
            if name in self.changed_data and name in self.cleaned_data
        }


class AgentForm(ServiceForm):
    granted_verbs = _checkboxes(verb_choices())
    granted_queues = NamesField(required=False, help_text="The queues this agent may work on.")

    class Meta:
        model = Agent
        fields = ("name", "self_description", "granted_verbs", "granted_queues")

    def call_service(self) -> Agent:
        fields = ("name", "self_description", "granted_verbs", "granted_queues")
        if self.instance.pk is None:
            return services.agent_create(
                owner=self.actor, **{name: self.cleaned_data[name] for name in fields}
            )
        return services.agent_update(
            agent=self.instance, actor=self.actor, **self.changed_values(fields)
        )


class PersonaForm(ServiceForm):
    """A persona of one agent: the subset and queues can only be chosen from its grant."""

    # Set by the admin: the agent chosen on the first step of "add", or the persona's own.
    agent: ClassVar[Agent | None] = None

    verb_subset = forms.MultipleChoiceField(required=False, widget=VerbGrid)
    queues = _checkboxes()
    ask_first_verbs = forms.MultipleChoiceField(required=False, widget=DrawnElsewhere)
    human_surface_bindings = NamesField(
        required=False,
        help_text=(
            "One per line: your registered human surfaces (Human surfaces), or "
            "virgo:persona/&lt;uuid&gt;, the mailbox of one of your personas. Never credentials."
        ),
    )

    class Meta:
        model = Persona
        fields = (*PERSONA_FIELDS, "discoverable")
        help_texts = {
            "name": "Shown on the persona's card and in the directory.",
            "description": "What this face of the agent is for, in a sentence or two; on the card.",
            "persona_class": (
                "Sets which tools the persona must have to stand and which it may never have "
                "(the class matrix): a verb the class refuses is shown greyed out."
            ),
            "address": (
                "Where the persona works in root/workspace/project/role, e.g. work/core/lead. "
                "Only registered addresses are offered (Registered addresses)."
            ),
            "owning_lead": (
                "A project lead of yours that answers this persona's ask-first calls. Empty: "
                "you answer them."
            ),
            "graph_namespace": (
                "The knowledge-graph namespace the persona's bounded graph queries read. Empty: "
                "its address."
            ),
            "discoverable": (
                "Listed in the directory and its card served publicly, while it stands."
            ),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        agent = self.agent or self.instance.agent
        if self.instance.pk is None:
            self.instance.agent = agent
        self.fields["verb_subset"].choices = verb_choices(agent.granted_verbs)
        if self.instance.pk is not None:
            refusals = import_string(settings.VIRGO_CLASS_REFUSALS)(self.instance.persona_class)
            self.fields["verb_subset"].widget.refusals = refusals
        self.fields["verb_subset"].help_text = (
            f"Only verbs granted to agent {agent.name!r}. The persona's skills are derived "
            "from these."
        )
        self.fields["queues"].choices = [(queue, queue) for queue in agent.granted_queues]
        self.fields[
            "queues"
        ].help_text = (
            f"The queues of agent {agent.name!r} this persona works on; its tasks come from these."
        )
        # Only verbs no global boundary asks for: those always wait for confirmation anyway.
        self.fields["ask_first_verbs"].choices = verb_choices(
            verb.name for verb in VERBS if verb.name in agent.granted_verbs and not verb.boundary
        )
        self.fields["verb_subset"].help_text += (
            " A verb that asks first waits for confirmation before it runs: the owning lead "
            "answers, or you when there is none."
        )
        grid = self.fields["verb_subset"].widget
        grid.may_ask_first = frozenset(
            name for name, _ in _flat(self.fields["ask_first_verbs"].choices)
        )
        grid.asks_first = frozenset(self["ask_first_verbs"].value() or ())
        if "owning_lead" in self.fields:
            self.fields["owning_lead"].queryset = Persona.objects.filter(
                agent__owner_id=agent.owner_id, persona_class=PersonaClass.PROJECT_LEAD
            ).exclude(pk=self.instance.pk)

    def full_clean(self) -> None:
        super().full_clean()
        # The ask-first checkboxes are drawn in the verb table: their errors are shown there.
        if self._errors and "ask_first_verbs" in self._errors:
            errors = self._errors.pop("ask_first_verbs")
            self._errors.setdefault("verb_subset", self.error_class()).extend(errors)

    # The proposal the last call_service made: a grant that widens (a new persona's whole grant
    # included) is never saved from the form; the admin shows its diff page, where the owner
    # confirms it.
    proposal: GrantProposal | None = None

    def call_service(self) -> Persona:
        agent = self.instance.agent
        listed = bool(self.cleaned_data.get("discoverable"))
        self.proposal = None
        if self.instance.pk is None:
            fields = {n: self.cleaned_data[n] for n in PERSONA_FIELDS if n in self.cleaned_data}
            change = services.persona_draft(
                agent=agent, actor=self.actor, via=GrantProposal.Via.ADMIN, **fields
            )
            persona, self.proposal = change.persona, change.proposal
            toggle = listed
        else:
            # The services re-read the persona by id: the instance may already hold the
            # form's values in memory, so changed_data (not the instance) says what changed.
            persona = self.instance
            changes = self.changed_values(PERSONA_FIELDS)
            if changes:
                change = services.persona_submit(
                    persona=persona, actor=self.actor, via=GrantProposal.Via.ADMIN, **changes
                )
                persona, self.proposal = change.persona, change.proposal
            toggle = "discoverable" in self.changed_data
        if toggle:
            persona = services.persona_set_discoverable(
                persona=persona, actor=self.actor, discoverable=listed, via="admin-form"
            )
        return persona


class SkillForm(ServiceForm):
    required_verbs = forms.MultipleChoiceField(
        choices=verb_choices(),
        widget=forms.CheckboxSelectMultiple,
        help_text="A persona has this skill exactly when its verb subset has all of these.",
    )
    tags = NamesField(required=False)

    class Meta:
        model = Skill
        fields = ("slug", "name", "description", "required_verbs", "tags")

    def call_service(self) -> Skill:
        data = self.cleaned_data
        return services.skill_save(
            actor=self.actor,
            slug=self.instance.slug if self.instance.pk else data["slug"],
            name=data["name"],
            description=data["description"],
            required_verbs=data["required_verbs"],
            tags=data["tags"],
        )


class OwnerIdentityForm(ServiceForm):
    """What an owner writes of their identity: a display name for the admin, and which of their
    proven domains their cards name. The rest is proven elsewhere and shown read-only."""

    class Meta:
        model = OwnerIdentity
        fields = ("display_name", "organization_domain")
        labels = {"organization_domain": "Organization named on cards"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["organization_domain"]
        # A plain choice: a domain is claimed and proven on its own page, not from this one.
        field.widget = getattr(field.widget, "widget", field.widget)
        field.queryset = selectors.organization_domains_nameable_by(self.actor)  # type: ignore[attr-defined]
        field.empty_label = "None: cards name this installation"
        field.help_text = (
            "Only a domain proven for you (a DNS TXT record, an HTTPS well-known file or an "
            "operator's approval), or shared with you by its owner, can be named."
        )

    def call_service(self) -> OwnerIdentity:
        # A fresh user each call: the service reaches the identity through the user's cached
        # relation, which a rolled-back rehearsal would otherwise leave holding its row.
        user = get_user_model().objects.get(pk=self.actor.pk)
        return services.owner_identity_update(
            user=user, **{name: self.cleaned_data[name] for name in services.OWNER_FIELDS}
        )


class HumanSurfaceForm(ServiceForm):
    class Meta:
        model = HumanSurface
        fields = ("binding", "label")

    def validate_unique(self) -> None:
        # The service says who holds a binding (in words an owner can act on); the model's own
        # constraint would only repeat it as "Constraint ... is violated".
        return

    def call_service(self) -> HumanSurface:
        return surfaces.surface_register(
            owner=self.actor,
            actor=self.actor,
            binding=self.cleaned_data["binding"],
            label=self.cleaned_data["label"],
        )


class RegisteredAddressForm(forms.ModelForm):
    class Meta:
        model = RegisteredAddress
        fields = ("path",)

    def clean_path(self) -> str:
        path = self.cleaned_data["path"]
        problem = address_problem(path)
        if problem:
            raise ValidationError(problem)
        return path


class RevokeForm(forms.Form):
    """The admin's revocation: what the tombstone says, why, and how much is revoked."""

    SCOPES = (
        ("persona", "The whole persona: final, it never changes again"),
        ("generation", "Its current generation only: the owner's next edit makes a new one"),
    )

    scope = forms.ChoiceField(choices=SCOPES, initial="generation")
    reason_code = forms.ChoiceField(choices=RevocationReason.choices)
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=services.REVOCATION_REASON_LIMIT,
        help_text="Why: kept in the audit event; peers see only the code.",
    )


# Organization domains (VX-ID-2) ----------------------------------------------------------------


class OrganizationClaimForm(ServiceForm):
    """Claim a domain: the service normalises it, refuses what is not one and makes the token."""

    class Meta:
        model = OrganizationDomain
        fields = ("domain",)
        help_texts = {
            "domain": "Your organization's registered domain, e.g. example.org (no scheme, no "
            "path). You then publish its token in DNS or on its HTTPS site to prove it is yours."
        }

    def validate_unique(self) -> None:
        # The service says who holds a domain, in words an owner can act on.
        return

    def call_service(self) -> OrganizationDomain:
        return services.organization_claim(owner=self.actor, domain=self.cleaned_data["domain"])


class OrganizationShareForm(ServiceForm):
    """Let another owner's cards name this verified domain (its owner's or a superuser's call)."""

    share_with = forms.CharField(
        required=False,
        max_length=150,
        label="Share with (username)",
        help_text="Another owner whose cards may then name this domain too. Leave empty to "
        "change nothing.",
    )

    class Meta:
        model = OrganizationDomain
        fields = ()

    def clean_share_with(self) -> Any:
        username = self.cleaned_data["share_with"].strip()
        if not username:
            return None
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise ValidationError(f"no owner is named {username!r}")
        return user

    def _add_service_errors(self, exc: ValidationError) -> None:
        if hasattr(exc, "error_dict") and "shared_with" in exc.error_dict:
            exc = ValidationError({"share_with": exc.error_dict["shared_with"]})
        super()._add_service_errors(exc)

    def call_service(self) -> OrganizationDomain:
        user = self.cleaned_data.get("share_with")
        if user is None:
            return self.instance
        return services.organization_share(claim=self.instance, with_user=user, actor=self.actor)
