"""The verb->skill map in the admin: `SkillAdmin`, which every staff member reads and only
moderators edit; a skill's slug is fixed once it exists, and a deletion goes through
personas.services.skill_delete.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from personas import selectors, services
from personas.admin.bases import ServiceAdmin, _is_staff
from personas.forms import SkillForm
from personas.models import Skill


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
