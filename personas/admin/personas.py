"""Personas in the admin: `PersonaAdmin` (the two-step add, a change that widens the grant sent to
its proposal's diff page, listing and delisting in the directory, revocation with a reason, and
the inlines and pages the apps built on the records contribute) and `PersonaStateFilter`, the
list's filter by where each persona's card stands.
"""

from collections.abc import Callable
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.contrib.admin.templatetags.admin_urls import add_preserved_filters
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Q, QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

from personas import selectors, services
from personas.admin.audit import AuditInline
from personas.admin.bases import OwnedAdmin
from personas.admin.card_import import CardImportPage
from personas.admin.proposals import ProposalInline
from personas.forms import PersonaForm, RevokeForm
from personas.models import Agent, GrantProposal, Persona


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
        return [toggle, *CardImportPage(self).urls(), *contributed, *super().get_urls()]

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
