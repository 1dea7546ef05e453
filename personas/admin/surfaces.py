"""Human surfaces in the admin: `HumanSurfaceAdmin`, the places on the hub each owner registers
for their personas to be bound to, given up through personas.surfaces.surface_remove once no
persona is bound to them.
"""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from personas import selectors, surfaces
from personas.admin.bases import OwnedAdmin, _is_staff
from personas.forms import HumanSurfaceForm
from personas.models import HumanSurface


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
