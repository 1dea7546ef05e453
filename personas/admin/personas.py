"""The admin for owners (staff) and moderators (superusers).

Owners see and change only their own agents and personas; moderators see everyone's, may
delist any persona and edit the verb->skill map, but never change what an owner authored.
Who sees what comes from personas.selectors; every write goes through personas.services
(the forms rehearse the same call in clean(), see personas.forms). Every state-changing
request counts against the owner mutation budget shared with the API (S9-RL-3).
"""

from collections.abc import Callable
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Model, Q, QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

from personas import audit, grant_review, selectors, services, surfaces
from personas.audit_admin import AuditEventAdmin, actor_shown  # noqa: F401  (registers it)
from personas.forms import (
    AgentForm,
    HumanSurfaceForm,
    OrganizationClaimForm,
    OrganizationShareForm,
    OwnerIdentityForm,
    PersonaForm,
    RegisteredAddressForm,
    RevokeForm,
    ServiceForm,
    SkillForm,
)
from personas.models import (
    Agent,
    AuditEvent,
    GrantProposal,
    HumanSurface,
    OrganizationDomain,
    OwnerIdentity,
    Persona,
    RegisteredAddress,
    Skill,
    Verification,
)
from personas.ratelimits import mutation_retry_after
from virgo.admin_permissions import NoEditsMixin


def _is_staff(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff)


def account_name(user: Any) -> str:
    """An account as a read-only field shows it: its name, never a link to the accounts admin,
    which only a superuser may open."""
    return user.get_username() if user is not None else "-"


def _adopt(obj: Model, saved: Model) -> None:
    """Make the admin's instance the saved row, for the log entry and the redirect after save."""
    for field in obj._meta.concrete_fields:
        setattr(obj, field.attname, getattr(saved, field.attname))
    obj._state.adding = False


class ServiceAdmin(admin.ModelAdmin):
    """Writes through the form's service call, never through Model.save(); rate-limited."""

    show_full_result_count = False
    list_per_page = 50

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[ServiceForm]:
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(
            form.__name__, (form,), {"actor": request.user, **self.form_attrs(request, obj)}
        )

    def form_attrs(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        return {}

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        _adopt(obj, form.save_through_service())

    def rate_limited(self, request: HttpRequest) -> HttpResponse | None:
        retry_after = mutation_retry_after(request)
        if retry_after is None:
            return None
        response = TemplateResponse(
            request,
            "admin/virgo/rate_limited.html",
            {
                **self.admin_site.each_context(request),
                "title": "Too many changes",
                "retry_after": retry_after,
            },
            status=429,
        )
        response["Retry-After"] = str(retry_after)
        return response

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        return self.rate_limited(request) or super().changeform_view(
            request, object_id, form_url, extra_context
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return self.rate_limited(request) or super().changelist_view(request, extra_context)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return self.rate_limited(request) or super().delete_view(request, object_id, extra_context)


class OwnedAdmin(ServiceAdmin):
    """Staff see what the selectors show them and change only what they own."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (
            obj is None or selectors.is_moderator(request.user) or selectors.owns(request.user, obj)
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or selectors.owns(request.user, obj))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_change_permission(request, obj)

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        """Deleting what one owns deletes what hangs on it (the service's cascade): only the
        ownership of the selected objects is checked, not model permissions on the cascade."""
        deleted, counts, _, protected = super().get_deleted_objects(objs, request)
        refused = set()
        if any(not selectors.owns(request.user, obj) for obj in objs):
            refused.add(str(self.opts.verbose_name))
        if not request.user.is_superuser and any(self.revoked_personas(obj) for obj in objs):
            refused.add("revoked personas (each keeps its tombstone: only a superuser may purge)")
        return deleted, counts, refused, protected

    def revoked_personas(self, obj: Any) -> list[Persona]:
        """The revoked personas deleting `obj` would delete (VX-TRUST-5): none by default."""
        return []


# Agents -----------------------------------------------------------------------------------------


@admin.register(Agent)
class AgentAdmin(OwnedAdmin):
    form = AgentForm
    list_display = ("name", "owner", "verb_count", "queue_list", "persona_count", "updated_at")
    list_select_related = ("owner",)
    search_fields = ("name",)
    readonly_fields = ("owner", "add_persona_link")
    fieldsets = (
        (None, {"fields": ("name", "owner", "self_description")}),
        ("Vended grant", {"fields": ("granted_verbs", "granted_queues")}),
        ("Personas", {"fields": ("add_persona_link",)}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        return selectors.agents_visible_to(request.user).annotate(persona_total=Count("personas"))

    def revoked_personas(self, obj: Agent) -> list[Persona]:
        return list(obj.personas.with_tombstone())

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fieldsets if obj else self.fieldsets[:2]

    def delete_model(self, request: HttpRequest, obj: Agent) -> None:
        services.agent_delete(agent=obj, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Agent]) -> None:
        for agent in queryset:
            services.agent_delete(agent=agent, actor=request.user)

    @admin.display(description="verbs")
    def verb_count(self, obj: Agent) -> int:
        return len(obj.granted_verbs)

    @admin.display(description="queues")
    def queue_list(self, obj: Agent) -> str:
        return ", ".join(obj.granted_queues)

    @admin.display(description="personas", ordering="persona_total")
    def persona_count(self, obj: Agent) -> int:
        return obj.persona_total  # type: ignore[attr-defined]

    @admin.display(description="add a persona")
    def add_persona_link(self, obj: Agent) -> str:
        url = reverse("admin:personas_persona_add") + f"?agent={obj.pk}"
        return format_html('<a href="{}">Add a persona of {}</a>', url, obj.name)


# Personas ---------------------------------------------------------------------------------------


class AuditInline(NoEditsMixin, admin.TabularInline):
    """Who changed this persona's listing or narrowed it, when, from what, to what. Read-only."""

    model = AuditEvent
    fk_name = "persona"
    fields = ("at", "kind", "by", "change")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    verbose_name = "audit event"
    verbose_name_plural = "audit trail"

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEvent]:
        return super().get_queryset(request).select_related("actor")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request)

    @admin.display(description="actor")
    def by(self, obj: AuditEvent) -> str:
        return actor_shown(obj)

    @admin.display(description="change")
    def change(self, obj: AuditEvent) -> str:
        return describe_audit(obj)


class ProposalInline(NoEditsMixin, admin.TabularInline):
    """The persona's grant proposals, each linked to its diff page. Read-only; owner only."""

    model = GrantProposal
    fields = ("proposed_at", "state", "via", "by", "widening", "review")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    verbose_name = "grant proposal"
    verbose_name_plural = "grant proposals (changes that wait for the owner)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[GrantProposal]:
        return selectors.proposals_visible_to(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or selectors.owns(request.user, obj))

    @admin.display(description="status")
    def state(self, obj: GrantProposal) -> str:
        return GrantProposal.Status(obj.effective_status).label

    @admin.display(description="proposed by")
    def by(self, obj: GrantProposal) -> str:
        return account_name(obj.proposed_by)

    @admin.display(description="why it waits")
    def widening(self, obj: GrantProposal) -> str:
        return "; ".join(obj.diff.get("widening", []))

    @admin.display(description="diff")
    def review(self, obj: GrantProposal) -> str:
        url = reverse("admin:personas_grantproposal_change", args=[obj.pk])
        return format_html('<a href="{}">review</a>', url)


def describe_audit(event: AuditEvent) -> str:
    return audit.describe(event.kind, event.data)


class PersonaStateFilter(admin.SimpleListFilter):
    """Where each persona's card stands: the revoked ones first among what owners look for."""

    title = "card state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("stands", "Stands"),
            ("fails", "Does not stand"),
            ("unknown", "Being stamped"),
            ("revoked", "Revoked"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Persona]) -> QuerySet[Persona]:
        live = queryset.filter(revoked_at__isnull=True, generation_revoked=False)
        match self.value():
            case "stands":
                return live.filter(standing=True)
            case "fails":
                return live.filter(standing=False)
            case "unknown":
                return live.filter(standing__isnull=True)
            case "revoked":
                return queryset.filter(Q(revoked_at__isnull=False) | Q(generation_revoked=True))
        return queryset


@admin.register(Persona)
class PersonaAdmin(OwnedAdmin):
    """Personas of one's own agents. The add form has two steps: choose the agent, then
    author the persona with checkboxes of exactly that agent's granted verbs and queues. The
    grant it authors waits on its proposal's diff page for the owner's confirmation (VX-REV-1).

    The apps built on the records add to the page through `contributed_inlines` and
    `contributed_urls` (stamps.admin: the generations inline and the stamp pages), so the
    records never import them."""

    form = PersonaForm
    inlines: list[type[admin.options.InlineModelAdmin]] = [ProposalInline, AuditInline]
    contributed_inlines: ClassVar[list[type[admin.options.InlineModelAdmin]]] = []
    contributed_urls: ClassVar[list[Callable[[admin.ModelAdmin], list[URLPattern]]]] = []
    # Fits a 1280 px screen: skills as a count (their ids on hover), the card's state in words.
    list_display = (
        "persona",
        "agent",
        "kind",
        "address",
        "skill_count",
        "generation",
        "state",
    )
    list_select_related = ("agent__owner", "address")
    list_filter = (PersonaStateFilter, "discoverable", "persona_class")
    search_fields = ("name", "agent__name", "address__path")
    actions = ("list_in_directory", "delist_from_directory", "revoke")
    readonly_fields = ("agent", "derived_skills", "generation", "standing", "uuid", "card_link")
    authored = (
        (None, {"fields": ("agent", "name", "description", "system_prompt", "persona_class")}),
        ("Capability slice", {"fields": ("verb_subset", "ask_first_verbs", "queues")}),
        ("Place", {"fields": ("address", "owning_lead", "graph_namespace")}),
        ("Human surface", {"fields": ("human_surface_bindings",)}),
        ("Directory", {"fields": ("discoverable",)}),
    )
    derived = (
        (
            "Derived (read-only)",
            {"fields": ("derived_skills", "generation", "standing", "uuid", "card_link")},
        ),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Persona]:
        return selectors.personas_visible_to(request.user).with_generation_revoked()

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "owning_lead" and field is not None:
            # A lead is a persona of its own: made, changed and deleted on its own page, never
            # from the select of another's form.
            field.widget.can_add_related = False
            field.widget.can_change_related = False
            field.widget.can_delete_related = False
        return field

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        return (*self.authored, *self.derived) if obj else self.authored

    def get_list_display(self, request: HttpRequest) -> Any:
        # An owner's list holds only their own personas: the owner column is a moderator's.
        columns = list(self.list_display)
        if selectors.is_moderator(request.user):
            columns.insert(2, "owner")
        return (*columns, self.directory_toggle(request), "card")

    def form_attrs(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        return {"agent": obj.agent if obj else self.agent_for_add(request)}

    def delete_model(self, request: HttpRequest, obj: Persona) -> None:
        services.persona_delete(persona=obj, actor=request.user)

    def revoked_personas(self, obj: Persona) -> list[Persona]:
        return [obj] if obj.tombstone() is not None else []

    # A change that widens the grant: save -> review -> confirm --------------------------------

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        # Read by response_change and log_change of this same request.
        obj._virgo_proposal = form.proposal

    def log_change(self, request: HttpRequest, obj: Any, message: Any) -> Any:
        if getattr(obj, "_virgo_proposal", None) is not None:
            return None  # nothing changed yet: the proposal itself records who asked for what
        return super().log_change(request, obj, message)

    def response_change(self, request: HttpRequest, obj: Persona) -> HttpResponse:
        proposal = getattr(obj, "_virgo_proposal", None)
        if proposal is None:
            return super().response_change(request, obj)
        return self._to_review(
            request,
            proposal,
            "Nothing is changed yet: this widens what the persona may do. Review the diff, "
            "then confirm it or reject it.",
        )

    def _to_review(self, request: HttpRequest, proposal: GrantProposal, says: str) -> HttpResponse:
        self.message_user(request, says, messages.WARNING)
        return HttpResponseRedirect(
            reverse("admin:personas_grantproposal_change", args=[proposal.pk])
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Persona]) -> None:
        for persona in queryset.select_related("agent"):
            services.persona_delete(persona=persona, actor=request.user)

    # The two-step add ---------------------------------------------------------------------------

    def agent_for_add(self, request: HttpRequest) -> Agent | None:
        """The agent named by ?agent=, if it is one of the user's own (moderators included)."""
        try:
            return selectors.agents_owned_by(request.user).get(pk=request.GET.get("agent"))
        except (Agent.DoesNotExist, ValueError, TypeError, ValidationError):
            return None

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        if self.agent_for_add(request) is None:
            return self.choose_agent_view(request)
        return super().add_view(request, form_url, extra_context)

    def choose_agent_view(self, request: HttpRequest) -> HttpResponse:
        agents = selectors.agents_owned_by(request.user).only("pk", "name")
        context = {
            **self.admin_site.each_context(request),
            "title": "Add persona: choose its agent",
            "opts": self.opts,
            "agents": agents,
            "unknown_agent": "agent" in request.GET,
            "add_agent_url": reverse("admin:personas_agent_add"),
        }
        return TemplateResponse(request, "admin/personas/persona/choose_agent.html", context)

    def response_add(
        self, request: HttpRequest, obj: Persona, post_url_continue: str | None = None
    ) -> HttpResponse:
        proposal = getattr(obj, "_virgo_proposal", None)
        if proposal is not None:
            return self._to_review(
                request,
                proposal,
                f"The persona {obj.name!r} was added granting nothing yet: nothing of it runs or "
                "is advertised until you confirm what it may do. Review the grant, then confirm "
                "it or reject it.",
            )
        response = super().response_add(request, obj, post_url_continue)
        if "_addanother" in request.POST:
            # Another persona of the same agent: stay on the second step.
            return HttpResponseRedirect(
                reverse("admin:personas_persona_add") + f"?agent={obj.agent_id}"
            )
        return response

    # Derived, read-only -------------------------------------------------------------------------

    @admin.display(description="owner")
    def owner(self, obj: Persona) -> str:
        return str(obj.agent.owner)

    @admin.display(description="persona", ordering="name")
    def persona(self, obj: Persona) -> str:
        # Two personas may share a name and an address: the start of the uuid tells them apart.
        return format_html(
            '{} <span class="virgo-short-id" title="{}">{}</span>',
            obj.name,
            obj.uuid,
            str(obj.uuid)[:8],
        )

    @admin.display(description="class", ordering="persona_class")
    def kind(self, obj: Persona) -> str:
        return obj.get_persona_class_display()

    @admin.display(description="skills")
    def skill_count(self, obj: Persona) -> str:
        ids = [skill["id"] for skill in obj.skills]
        return format_html('<span title="{}">{}</span>', ", ".join(ids) or "none", len(ids))

    @admin.display(description="card state")
    def state(self, obj: Persona) -> str:
        if obj.revoked_at is not None:
            words, kind = f"revoked: {obj.revocation_reason}", "revoked"
        elif getattr(obj, "generation_revoked", False):
            words, kind = f"generation {obj.generation} revoked", "revoked"
        elif obj.standing:
            words, kind = "stands", "stands"
        elif obj.standing is False:
            words, kind = "does not stand", "fails"
        else:
            words, kind = "being stamped", "unknown"
        return format_html('<span class="virgo-state virgo-state-{}">{}</span>', kind, words)

    @admin.display(description="skills (derived from the verb subset)")
    def derived_skills(self, obj: Persona) -> str:
        if not obj.skills:
            return "None: no skill's required verbs are all in the verb subset."
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li><strong>{}</strong> ({}): {}</li>",
                ((s["name"], s["id"], s["description"]) for s in obj.skills),
            ),
        )

    @admin.display(description="agent card")
    def card_link(self, obj: Persona) -> str:
        return format_html(
            '<a href="{}">{}</a><div class="help">Served publicly only while the persona is '
            "listed and stands; you can always read it while signed in.</div>",
            obj.card_path,
            obj.card_url,
        )

    @admin.display(description="card")
    def card(self, obj: Persona) -> str:
        return format_html('<a href="{}">card</a>', obj.card_path)

    # Discoverability ----------------------------------------------------------------------------

    def directory_toggle(self, request: HttpRequest) -> Any:
        """The per-row list/delist button, offered only where the service would allow it."""
        user = request.user
        moderator = selectors.is_moderator(user)
        filters = self.get_preserved_filters(request)

        @admin.display(description="directory")
        def directory(obj: Persona) -> str:
            owner = selectors.owns(user, obj)
            shown = "listed" if obj.discoverable else "not listed"
            if obj.discoverable and (owner or moderator):
                value, label = "off", "Delist"
            elif not obj.discoverable and owner:
                value, label = "on", "List"
            else:
                return shown
            url = reverse("admin:personas_persona_discoverability", args=[obj.pk])
            if filters:
                url += "?" + filters
            return format_html(
                '<span class="virgo-state">{}</span> <button type="submit" class="button" '
                'formaction="{}" name="discoverable" value="{}">{}</button>',
                shown,
                url,
                value,
                label,
            )

        return directory

    def get_urls(self) -> list[URLPattern]:
        toggle = path(
            "<path:object_id>/discoverability/",
            self.admin_site.admin_view(self.discoverability_view),
            name="personas_persona_discoverability",
        )
        contributed = [url for urls in self.contributed_urls for url in urls(self)]
        return [toggle, *contributed, *super().get_urls()]

    def get_inlines(self, request: HttpRequest, obj: Any) -> list[Any]:
        return [*super().get_inlines(request, obj), *self.contributed_inlines]

    def discoverability_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        limited = self.rate_limited(request)
        if limited:
            return limited
        choice = {"on": True, "off": False}.get(request.POST.get("discoverable", ""))
        if choice is None:
            return HttpResponseBadRequest("discoverable must be 'on' or 'off'")
        persona = self.get_object(request, unquote(object_id))
        if persona is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        self._set_discoverable(request, [persona], choice, via="admin-list")
        changelist = reverse("admin:personas_persona_changelist")
        preserved = {"preserved_filters": self.get_preserved_filters(request), "opts": self.opts}
        return HttpResponseRedirect(add_preserved_filters(preserved, changelist))

    def _set_discoverable(
        self, request: HttpRequest, personas: Any, discoverable: bool, *, via: str
    ) -> None:
        done, refused = [], []
        for persona in personas:
            try:
                services.persona_set_discoverable(
                    persona=persona, actor=request.user, discoverable=discoverable, via=via
                )
                done.append(persona.name)
            except PermissionDenied as exc:
                refused.append(f"{persona.name}: {exc}")
        verb = "Listed" if discoverable else "Delisted"
        if done:
            self.message_user(request, f"{verb} {len(done)}: {', '.join(done)}.", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, f"Not changed: {reason}", messages.ERROR)

    @admin.action(
        description="List in the directory",
        description_plural="List selected personas in the directory",
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
    def list_in_directory(self, request: HttpRequest, queryset: QuerySet[Persona]) -> None:
        self._set_discoverable(request, queryset, True, via="admin-action")

    @admin.action(
        description="Delist from the directory",
        description_plural="Delist selected personas from the directory",
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
    def delist_from_directory(self, request: HttpRequest, queryset: QuerySet[Persona]) -> None:
        self._set_discoverable(request, queryset, False, via="admin-action")

    # Revocation (VX-TRUST-5) ---------------------------------------------------------------------

    @admin.action(
        description="Revoke",
        description_plural="Revoke selected personas (their card answers 410 Gone)",
        location=[ActionLocation.CHANGE_LIST],
    )
    def revoke(self, request: HttpRequest, queryset: QuerySet[Persona]) -> HttpResponse | None:
        """Ask for the reason first (a page of its own), then revoke each through the service."""
        form = RevokeForm(request.POST if "apply" in request.POST else None)
        if not form.is_valid():
            context = {
                **self.admin_site.each_context(request),
                "title": "Revoke personas",
                "opts": self.opts,
                "personas": queryset.select_related("agent"),
                "form": form,
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, "admin/personas/persona/revoke.html", context)
        done, refused = [], []
        for persona in queryset.select_related("agent"):
            generation = persona.generation if form.cleaned_data["scope"] == "generation" else None
            try:
                services.persona_revoke(
                    persona=persona,
                    actor=request.user,
                    reason_code=form.cleaned_data["reason_code"],
                    reason=form.cleaned_data["reason"],
                    generation=generation,
                    via="admin-action",
                )
                done.append(persona.name)
            except PermissionDenied as exc:
                refused.append(f"{persona.name}: {exc}")
            except ValidationError as exc:
                refused.append(f"{persona.name}: {' '.join(exc.messages)}")
        if done:
            self.message_user(request, f"Revoked {len(done)}: {', '.join(done)}.", messages.SUCCESS)
        for reason in refused:
            self.message_user(request, f"Not revoked: {reason}", messages.ERROR)
        return None


# Grant proposals: the diff page ----------------------------------------------------------------


@admin.register(GrantProposal)
class GrantProposalAdmin(ServiceAdmin):
    """Changes that would widen a persona's grant. Only the persona's owner sees one (anyone
    else gets a 404), and its page is the diff page where the owner confirms or rejects it.

    The apps built on the records add sections to the diff page through
    `contributed_sections`: each is called with the request and the proposal and returns the
    section's HTML, safe (runtime.admin_explain: which of the persona's policy vectors the
    proposal would change)."""

    list_display = ("id", "persona", "state", "via", "proposed_by", "proposed_at", "decided_by")
    list_select_related = ("persona", "proposed_by", "decided_by")
    list_filter = ("status", "via")
    contributed_sections: ClassVar[list[Callable[[HttpRequest, GrantProposal], str]]] = []

    def get_queryset(self, request: HttpRequest) -> QuerySet[GrantProposal]:
        return selectors.proposals_visible_to(request.user)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or selectors.owns(request.user, obj.persona))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="status")
    def state(self, obj: GrantProposal) -> str:
        return GrantProposal.Status(obj.effective_status).label

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not _is_staff(request):
            raise PermissionDenied
        try:
            proposal = self.get_queryset(request).filter(pk=int(unquote(object_id))).first()
        except ValueError:
            proposal = None
        if proposal is None:
            raise Http404("No such proposal.")
        if request.method == "POST":
            return self.rate_limited(request) or self._decide(request, proposal)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Review the grant change of {proposal.persona.name}",
            "opts": self.opts,
            "proposal": proposal,
            "status": GrantProposal.Status(proposal.effective_status),
            "diff": proposal.diff,
            "changes": grant_review.changed_rows(proposal.diff, proposal.persona.agent.owner_id),
            "widening": [
                grant_review.named(reason, proposal.persona.agent.owner_id)
                for reason in proposal.diff.get("widening", [])
            ],
            "persona_url": reverse("admin:personas_persona_change", args=[proposal.persona_id]),
            "draft": not proposal.persona.system_prompt.strip(),
            "contributed": [section(request, proposal) for section in self.contributed_sections],
        }
        return TemplateResponse(request, "admin/personas/grantproposal/review.html", context)

    def _decide(self, request: HttpRequest, proposal: GrantProposal) -> HttpResponse:
        decision = request.POST.get("decision")
        if decision not in ("approve", "reject"):
            return HttpResponseBadRequest("decision must be 'approve' or 'reject'")
        here = reverse("admin:personas_grantproposal_change", args=[proposal.pk])
        try:
            if decision == "approve":
                # A draft's prompt is written here, as its owner confirms (personas.services).
                prompt = request.POST.get("system_prompt")
                persona = services.proposal_approve(
                    proposal=proposal,
                    actor=request.user,
                    system_prompt=prompt if not proposal.persona.system_prompt.strip() else None,
                )
                done = f"Confirmed: {persona.name} is at generation {persona.generation}."
            else:
                services.proposal_reject(proposal=proposal, actor=request.user)
                done = "Rejected: nothing of the persona changed."
        except ValidationError as refused:
            self.message_user(request, " ".join(refused.messages), messages.ERROR)
            return HttpResponseRedirect(here)
        self.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(
            reverse("admin:personas_persona_change", args=[proposal.persona_id])
        )


# The verb->skill map ----------------------------------------------------------------------------


@admin.register(Skill)
class SkillAdmin(ServiceAdmin):
    """The authoritative verb->skill map: every staff member reads it, moderators edit it."""

    form = SkillForm
    list_display = ("slug", "name", "verbs", "tag_list", "updated_at")
    search_fields = ("slug", "name")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # The slug is the skill's identity on every card; changing it would be a new skill.
        return ("slug",) if obj else ()

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return selectors.is_moderator(request.user) and request.user.is_staff

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_add_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_add_permission(request)

    def delete_model(self, request: HttpRequest, obj: Skill) -> None:
        services.skill_delete(actor=request.user, skill=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Skill]) -> None:
        for skill in queryset:
            services.skill_delete(actor=request.user, skill=skill)

    @admin.display(description="required verbs")
    def verbs(self, obj: Skill) -> str:
        return ", ".join(obj.required_verbs)

    @admin.display(description="tags")
    def tag_list(self, obj: Skill) -> str:
        return ", ".join(obj.tags)


# The address registry ---------------------------------------------------------------------------


@admin.register(RegisteredAddress)
class RegisteredAddressAdmin(admin.ModelAdmin):
    """Every owner reads the registry to pick addresses; moderators register them."""

    form = RegisteredAddressForm
    list_display = ("path", "registered_at", "registered_by")
    list_select_related = ("registered_by",)
    search_fields = ("path",)
    fields = ("path",)
    show_full_result_count = False

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request) and selectors.is_moderator(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # A registered address is an identity personas and stamps refer to: never renamed.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        _adopt(obj, services.address_register(actor=request.user, path=obj.path))


# Human surfaces ---------------------------------------------------------------------------------


@admin.register(HumanSurface)
class HumanSurfaceAdmin(OwnedAdmin):
    """The places on the hub an owner's personas may be bound to; each owner registers theirs.

    A binding is an identity, so it is never edited: it is registered, and given up by deleting
    it once no persona is bound to it (the delete page names the personas that still are).
    """

    form = HumanSurfaceForm
    list_display = ("binding", "label", "owner", "registered_at")
    list_select_related = ("owner",)
    search_fields = ("binding", "label")
    fields = ("binding", "label")

    def get_queryset(self, request: HttpRequest) -> QuerySet[HumanSurface]:
        return selectors.surfaces_visible_to(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or selectors.owns(request.user, obj))

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        deleted, counts, perms_needed, _ = super().get_deleted_objects(objs, request)
        bound = [
            f"{surface.binding}: bound to {name}"
            for surface in objs
            for name in surfaces.personas_bound_to(surface)
        ]
        return deleted, counts, perms_needed, bound

    def delete_model(self, request: HttpRequest, obj: HumanSurface) -> None:
        surfaces.surface_remove(surface=obj, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[HumanSurface]) -> None:
        for surface in queryset:
            surfaces.surface_remove(surface=surface, actor=request.user)


# Owner identities and the audit trail -----------------------------------------------------------


@admin.register(OwnerIdentity)
class OwnerIdentityAdmin(OwnedAdmin):
    """The identity chain cards carry. Each owner writes only a display name and which proven
    domain their cards name; the OIDC subject and the domains' proofs are shown, never typed."""

    form = OwnerIdentityForm
    list_display = ("display_name", "user", "organization_domain", "issuer", "subject_proof")
    list_select_related = ("user", "organization_domain")
    search_fields = ("display_name", "organization_domain__domain")
    fields = (
        "display_name",
        "organization_domain",
        "issuer",
        "identity_subject",
        "subject_proof",
        "typed_before_proofs",
    )
    readonly_fields = ("issuer", "identity_subject", "subject_proof", "typed_before_proofs")

    @admin.display(description="identity issuer", ordering="identity_issuer")
    def issuer(self, obj: OwnerIdentity) -> str:
        # Plain text, not Django's link for URL fields: admin pages point only at this site.
        return obj.identity_issuer

    @admin.display(description="how the subject was proven")
    def subject_proof(self, obj: OwnerIdentity) -> str:
        if obj.identity_verified_at is None:
            return (
                "Unverified: cards name no issuer or subject. Sign in with OpenID Connect to "
                "prove them."
            )
        return f"OpenID Connect sign-in, since {obj.identity_verified_at:%Y-%m-%d %H:%M} UTC"

    @admin.display(description="typed before proofs existed")
    def typed_before_proofs(self, obj: OwnerIdentity) -> str:
        typed = ", ".join(v for v in (obj.claimed_organization, obj.claimed_organization_url) if v)
        if not typed:
            return "-"
        return f"{typed} (never on a card; prove the domain to name it)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[OwnerIdentity]:
        return selectors.identities_visible_to(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request) and not OwnerIdentity.objects.filter(user=request.user).exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Cards always name a provider; an identity is corrected, never removed.
        return False


# Organization domains (VX-ID-2) ----------------------------------------------------------------


@admin.register(OrganizationDomain)
class OrganizationDomainAdmin(OwnedAdmin):
    """The domains owners claim for their organization, and their proofs.

    An owner adds a claim by its domain, reads the token and where to publish it, and asks for
    a check ("Verify now", personas.proofs); once verified they may share it with another
    owner by username. They see their own claims, and the ones shared with them read-only. A
    superuser sees every claim and may approve one by hand or share it. Every write is a
    service's (personas.services), which audits it and settles the cards that name the domain.
    """

    list_display = ("domain", "owner", "standing", "verified_at", "checked_at", "shared")
    list_select_related = ("owner",)
    list_filter = ("verification",)
    search_fields = ("domain",)
    actions = ("verify_now", "approve")
    readonly_fields = (
        "domain",
        "owner",
        "standing",
        "how_to_prove",
        "verified_at",
        "checked_at",
        "last_failure",
        "shared",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[OrganizationDomain]:
        return selectors.organization_domains_visible_to(request.user).prefetch_related(
            "shared_with"
        )

    def _may_manage(self, request: HttpRequest, obj: OrganizationDomain) -> bool:
        return selectors.owns(request.user, obj) or selectors.is_moderator(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (
            obj is None
            or self._may_manage(request, obj)
            or obj.shared_with.filter(pk=request.user.pk).exists()
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or self._may_manage(request, obj))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_change_permission(request, obj)

    def has_verify_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request) and selectors.is_moderator(request.user)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[ServiceForm]:
        kwargs["form"] = OrganizationShareForm if obj else OrganizationClaimForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj else ()

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ((None, {"fields": ("domain",)}),)
        manage = self._may_manage(request, obj)
        status = ("domain", "owner", "standing", "verified_at", "checked_at", "last_failure")
        fieldsets: list[Any] = [(None, {"fields": status})]
        if manage:
            fieldsets.append(("How to prove it", {"fields": ("how_to_prove",)}))
        sharing = ("shared", "share_with") if manage else ("shared",)
        fieldsets.append(("Sharing", {"fields": sharing}))
        return fieldsets

    def response_add(
        self, request: HttpRequest, obj: OrganizationDomain, post_url_continue: str | None = None
    ) -> HttpResponse:
        """To the claim's page, where its token and the instructions are."""
        if "_addanother" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(
            request,
            f'Claimed {obj.domain}. Publish its token as shown below, then choose "Verify now".',
            messages.SUCCESS,
        )
        return HttpResponseRedirect(
            reverse("admin:personas_organizationdomain_change", args=[obj.pk])
        )

    def delete_model(self, request: HttpRequest, obj: OrganizationDomain) -> None:
        services.organization_remove(claim=obj, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[OrganizationDomain]) -> None:
        for claim in queryset:
            services.organization_remove(claim=claim, actor=request.user)

    # Derived, read-only -------------------------------------------------------------------------

    @admin.display(description="standing")
    def standing(self, obj: OrganizationDomain) -> str:
        if obj.is_verified:
            return f"verified: {Verification(obj.verification).label}"
        if obj.last_failure:
            return "not verified (see the last failure)"
        return "not verified: waiting for its proof"

    @admin.display(description="shared with")
    def shared(self, obj: OrganizationDomain) -> str:
        return ", ".join(user.get_username() for user in obj.shared_with.all()) or "-"

    @admin.display(description="publish one of these")
    def how_to_prove(self, obj: OrganizationDomain) -> str:
        # The proofs' DNS and HTTPS clients are imported where a domain is looked at, not at
        # every command's start (the admin is imported by each).
        from personas import proofs

        steps = proofs.instructions(obj)
        return format_html(
            "<p><strong>A DNS TXT record</strong> named <code>{}</code> holding "
            "<code>{}</code></p>"
            "<p><strong>or an HTTPS file</strong> at <code>{}</code> holding only "
            "<code>{}</code> (served with status 200, no redirect, by a certificate browsers "
            "trust)</p>"
            '<div class="help">Then choose "Verify now". Virgo checks again daily (by '
            "default); once neither is found, no card names {} until it is proven again.</div>",
            steps.txt_name,
            steps.txt_value,
            steps.url,
            steps.file_content,
            obj.domain,
        )

    # Actions ------------------------------------------------------------------------------------

    @admin.action(
        description="Verify now",
        description_plural="Verify the selected domains now",
        permissions=["verify"],
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
    def verify_now(self, request: HttpRequest, queryset: QuerySet[OrganizationDomain]) -> None:
        from personas import proofs

        for claim in queryset:
            try:
                checked = proofs.check_domain(claim, actor=request.user)
            except PermissionDenied as refused:
                self.message_user(request, f"{claim.domain}: {refused}", messages.ERROR)
                continue
            if checked.is_verified:
                how = Verification(checked.verification).label
                self.message_user(request, f"{checked.domain}: verified ({how}).", messages.SUCCESS)
            else:
                self.message_user(
                    request,
                    f"{checked.domain}: not verified. {checked.last_failure}",
                    messages.WARNING,
                )

    @admin.action(
        description="Approve (superuser)",
        description_plural="Approve the selected domains without a proof (superuser)",
        permissions=["approve"],
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
    def approve(self, request: HttpRequest, queryset: QuerySet[OrganizationDomain]) -> None:
        for claim in queryset.select_related("owner"):
            try:
                services.organization_approve(claim=claim, actor=request.user)
            except (PermissionDenied, ValidationError) as refused:
                reason = " ".join(getattr(refused, "messages", [str(refused)]))
                self.message_user(request, f"{claim.domain}: {reason}", messages.ERROR)
                continue
            self.message_user(
                request, f"{claim.domain}: approved for {claim.owner}.", messages.SUCCESS
            )
