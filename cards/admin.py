"""For superusers only: the keys that sign cards (view, rotate, retire, revoke), and the ARD
registries a federated search asks.

The admin shows a key's public half (the JWK peers see) and its life; the private key is in no
field, column or page. Every action is the write function `virgo keys` calls (cards.keys). A
peer's credential is written, never shown: the form seals what is typed (cards.ard.peers).
"""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from cards import keys
from cards.ard import peers
from cards.models import FederationPeer, SigningKey
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


class FederationPeerForm(forms.ModelForm):
    credential = forms.CharField(
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False),
        help_text=(
            "The API token the peer's registry takes, sealed when saved and never shown again. "
            "Left empty on a change, the sealed one is kept."
        ),
    )

    class Meta:
        model = FederationPeer
        fields = ("url", "label", "scheme", "enabled")
        help_texts = {"url": "The peer's ARD API, e.g. https://peer.example/api/ard/"}

    def clean_credential(self) -> str:
        try:
            return peers.checked_credential(self.cleaned_data["credential"])
        except peers.PeerRefused as refused:
            raise forms.ValidationError(str(refused).removeprefix("credential: ")) from None

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        # By the URL as it will be stored, not as typed: a row kept in an older spelling
        # (migration cards 0011 leaves one it cannot respell) is respelled by saving it unchanged.
        moved = self.instance.pk and cleaned.get("url", self.instance.url) != self.instance.url
        if moved and self.instance.credential_sealed and not cleaned.get("credential"):
            # The sealed credential is bound to the URL it was given for (cards.sealing).
            self.add_error("credential", "Enter the credential again for the new URL.")
        return cleaned

    def clean_url(self) -> str:
        try:
            return peers.normalised_url(self.cleaned_data["url"])
        except peers.PeerRefused as refused:
            raise forms.ValidationError(str(refused).removeprefix("url: ")) from None


@admin.register(FederationPeer)
class FederationPeerAdmin(admin.ModelAdmin):
    form = FederationPeerForm
    list_display = ("label", "url", "enabled", "scheme", "has_credential", "added_at")
    list_filter = ("enabled",)

    @admin.display(boolean=True, description="credential")
    def has_credential(self, peer: FederationPeer) -> bool:
        return bool(peer.credential_sealed)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def save_model(
        self, request: HttpRequest, obj: FederationPeer, form: forms.ModelForm, change: bool
    ) -> None:
        credential = form.cleaned_data.get("credential", "")
        if credential or not change:
            obj.credential_sealed = peers.sealed_credential(obj.url, credential)
        super().save_model(request, obj, form, change)
