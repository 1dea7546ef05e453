"""The audit trail as the persona's page shows it: `AuditInline`, read-only, each event in words
by `describe_audit` (personas.audit.describe). The audit list of its own (every event an owner
may read, searched and filtered) is personas.audit_admin's, registered by the import below.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from personas import audit
from personas.admin.bases import _is_staff
from personas.audit_admin import AuditEventAdmin, actor_shown  # noqa: F401  (registers it)
from personas.models import AuditEvent
from virgo.admin_permissions import NoEditsMixin


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


def describe_audit(event: AuditEvent) -> str:
    return audit.describe(event.kind, event.data)
