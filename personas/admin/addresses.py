"""The address registry in the admin: `RegisteredAddressAdmin`, which every owner reads to pick a
persona's address and moderators add to (personas.services.address_register); an address, once
registered, is never renamed or deleted here.
"""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from personas import selectors, services
from personas.admin.bases import _adopt, _is_staff
from personas.forms import RegisteredAddressForm
from personas.models import RegisteredAddress


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
