"""The keys that sign cards, for superusers only: view, rotate, retire, revoke.

The admin shows the public half (the JWK peers see) and the key's life; the private key is in
no field, column or page. Every action is the write function `virgo keys` calls (cards.keys).
"""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from cards import keys
from cards.models import SigningKey
from virgo.admin_permissions import NoEditsMixin


@admin.register(SigningKey)
class SigningKeyAdmin(NoEditsMixin, admin.ModelAdmin):
    list_display = ("kid", "algorithm", "state", "created_at", "retire_after", "revoked_at")
    list_filter = ("state", "algorithm")
    fields = (
        "kid",
        "algorithm",
        "state",
        "public_jwk",
        "created_at",
        "retire_after",
        "retired_at",
        "revoked_at",
    )
    readonly_fields = fields
    actions = ("rotate_keys", "retire_keys", "revoke_keys")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def _each(self, request: HttpRequest, queryset: QuerySet[SigningKey], operation: Any) -> None:
        for kid in queryset.values_list("kid", flat=True):
            try:
                operation(kid, actor=request.user)
            except keys.KeyRefused as refused:
                self.message_user(request, str(refused), messages.ERROR)
            else:
                self.message_user(request, f"{operation.__name__}: {kid}", messages.SUCCESS)

    @admin.action(description="Rotate: a new active key; the active key selected retires later")
    def rotate_keys(self, request: HttpRequest, queryset: QuerySet[SigningKey]) -> None:
        if not queryset.filter(state=SigningKey.State.ACTIVE).exists():
            self.message_user(request, "Select the active key to rotate it.", messages.ERROR)
            return
        try:
            key = keys.rotate(actor=request.user)
        except keys.KeyRefused as refused:
            self.message_user(request, str(refused), messages.ERROR)
            return
        self.message_user(
            request, f"{key.kid} is active; every card is being re-signed.", messages.SUCCESS
        )

    @admin.action(description="Retire: end the grace of the selected retiring keys now")
    def retire_keys(self, request: HttpRequest, queryset: QuerySet[SigningKey]) -> None:
        self._each(request, queryset, keys.retire)

    @admin.action(description="Revoke: withdraw the selected keys at once")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[SigningKey]) -> None:
        self._each(request, queryset, keys.revoke)
