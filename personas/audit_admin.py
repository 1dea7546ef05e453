"""The audit trail in the admin (VX-AUDIT-2): read-only, searchable, by date, in words.

The list shows each event as one line (personas.audit.describe) with who acted, by name, and
through what; it is searched by the actor's name, the persona's name, the kind and the
correlation id, filtered by kind and channel, and walked by date. An event's page holds what
happened as labelled values (personas.audit.details): no JSON, no ids, no "None".

Owners see the events about their agents and personas and their own acts; moderators see all
(personas.selectors.audit_events_visible_to). Registered by personas.admin importing it.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from personas import audit, selectors
from personas.models import AuditEvent
from virgo.admin_permissions import NoEditsMixin

NOBODY = "Virgo (no account)"


def actor_shown(event: AuditEvent) -> str:
    """Who acted, by the name they had then: never an id, never blank."""
    return event.actor_name or NOBODY


@admin.register(AuditEvent)
class AuditEventAdmin(NoEditsMixin, admin.ModelAdmin):
    """Read-only: an audit trail is never edited."""

    list_display = ("at", "kind", "who", "channel", "persona_shown", "change")
    list_select_related = ("persona",)
    list_filter = ("kind", "channel")
    search_fields = ("actor_name", "persona__name", "data__name", "kind", "correlation_id")
    date_hierarchy = "at"
    show_full_result_count = False
    list_per_page = 100
    fields = (
        "at",
        "kind",
        "who",
        "channel",
        "correlation_id",
        "persona_shown",
        "agent_shown",
        "change",
        "what",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuditEvent]:
        return selectors.audit_events_visible_to(request.user).select_related("persona", "agent")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        raise Http404("an audit event has no history: it never changes")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    @admin.display(description="actor", ordering="actor_name")
    def who(self, obj: AuditEvent) -> str:
        return actor_shown(obj)

    @admin.display(description="persona", ordering="persona__name")
    def persona_shown(self, obj: AuditEvent) -> str:
        if obj.persona is not None:
            return obj.persona.name
        # Gone since (deleted, purged): the name the event kept, if it kept one.
        return str(obj.data.get("name") or obj.data.get("persona_name") or "-")

    @admin.display(description="agent")
    def agent_shown(self, obj: AuditEvent) -> str:
        if obj.agent is not None:
            return obj.agent.name
        return str(obj.data.get("agent_name") or "-")

    @admin.display(description="change")
    def change(self, obj: AuditEvent) -> str:
        return audit.describe(obj.kind, obj.data)

    @admin.display(description="what happened")
    def what(self, obj: AuditEvent) -> SafeString:
        rows = audit.details(obj.data)
        if not rows:
            return format_html("<p>{}</p>", "Nothing more was recorded.")
        return format_html(
            '<dl class="audit-details">{}</dl>',
            format_html_join("", "<dt>{}</dt><dd>{}</dd>", rows),
        )
