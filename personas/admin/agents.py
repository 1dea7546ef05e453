"""Agents in the admin: `AgentAdmin`, each owner's agents with the grant each one vends
(its verbs and queues), how many personas it has and a link to add one; deleting an agent
deletes its personas through personas.services.agent_delete.
"""

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from personas import selectors, services
from personas.admin.bases import OwnedAdmin
from personas.forms import AgentForm
from personas.models import Agent, Persona


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
