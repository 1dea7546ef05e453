"""What an owner sees of remote access in the admin (VX-REMOTE-1, VX-REMOTE-2): the clients they
registered, and the connections those clients hold to their personas, each revocable.

Owners meet the toolkit's records as serving's proxies, Client and Connection, and see and change
only their own; the toolkit registers its own models with SuperuserOnlyAdmin (OAUTH2_PROVIDER's
admin classes), for a superuser to inspect.
"""

from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.shortcuts import render

from personas.models import Persona
from serving.connections import open_connection
from serving.handoff import LOOPBACK_HOSTS
from serving.models import Client, Connection
from serving.oauth import grantable_persona
from serving.resources import persona_uuid_of, resource_url


def _owner_only(request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
    return queryset if request.user.is_superuser else queryset.filter(user=request.user)


def _is_staff(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff)


class OpenConnectionForm(forms.ModelForm):
    """A connection the owner opens for a host with no browser: one of their clients, one of
    their live personas (serving.connections)."""

    host_client = forms.ModelChoiceField(
        queryset=Client.objects.none(),
        label="Client",
        help_text="The agent host that will hold the connection (Remote access > Clients).",
    )
    target_persona = forms.ModelChoiceField(
        queryset=Persona.objects.none(),
        label="Persona",
        help_text="The persona whose tools it may call, as its stamp allows.",
    )

    class Meta:
        model = Connection
        fields = ()

    def __init__(self, *args: Any, owner: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.owner = owner
        self.fields["host_client"].queryset = Client.objects.filter(user=owner)
        self.fields["target_persona"].queryset = Persona.objects.filter(
            agent__owner=owner, revoked_at__isnull=True
        )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        client, persona = cleaned.get("host_client"), cleaned.get("target_persona")
        if client is not None and persona is not None:
            verdict = grantable_persona([resource_url(persona.uuid)], self.owner, client)
            if isinstance(verdict, str):
                raise forms.ValidationError(verdict)
        return cleaned


class ClientForm(forms.ModelForm):
    class Meta:
        model = Client
        fields = ("name", "redirect_uris")

    def clean_redirect_uris(self) -> str:
        """HTTPS, or plain HTTP to this machine's loopback only (RFC 8252's native apps): a code
        sent anywhere else in the clear could be read on its way."""
        uris = self.cleaned_data["redirect_uris"]
        for uri in uris.split():
            parts = urlsplit(uri)
            if parts.scheme == "http" and parts.hostname not in LOOPBACK_HOSTS:
                raise forms.ValidationError(
                    f"{uri}: plain http is only for a loopback redirect (http://127.0.0.1/...); "
                    "use https for any other host"
                )
        return uris


@admin.register(Client)
class ClientAdmin(admin.ModelAdmin):
    """An agent host's client, registered by the owner whose personas it will ask for: public,
    authorization code with PKCE, its redirect URIs exact; never allowed to skip consent."""

    form = ClientForm
    list_display = ("name", "client_id", "redirect_uris", "created")
    fields = ("name", "client_id", "redirect_uris")
    readonly_fields = ("client_id",)
    search_fields = ("name", "client_id")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return _owner_only(request, super().get_queryset(request))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or self._mine(request, obj))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if not change:
            obj.user = request.user
        obj.client_type = obj.CLIENT_PUBLIC
        obj.authorization_grant_type = obj.GRANT_AUTHORIZATION_CODE
        obj.skip_authorization = False
        super().save_model(request, obj, form, change)

    @staticmethod
    def _mine(request: HttpRequest, obj: Any) -> bool:
        return bool(request.user.is_superuser or obj.user_id == request.user.pk)


@admin.register(Connection)
class ConnectionAdmin(admin.ModelAdmin):
    """A client's standing grant for one persona: its refresh token family, live until the owner
    revokes it here (or the persona, or the account, is revoked)."""

    list_display = ("client", "persona", "created", "updated")
    list_filter = ("application",)
    fields = ("client", "persona", "created", "updated")
    readonly_fields = fields
    actions = ("revoke",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields if obj is not None else ("host_client", "target_persona")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj is not None else ()

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if obj is not None:
            return super().get_form(request, obj, change=change, **kwargs)
        owner = request.user

        class OwnersConnectionForm(OpenConnectionForm):
            def __init__(self, *args: Any, **options: Any) -> None:
                super().__init__(*args, owner=owner, **options)

        return OwnersConnectionForm

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if change:
            return
        obj.user = request.user
        obj.application = form.cleaned_data["host_client"]
        request.opened_connection = (  # type: ignore[attr-defined]
            open_connection(obj, persona=form.cleaned_data["target_persona"]),
            form.cleaned_data["target_persona"],
        )

    def response_add(self, request: HttpRequest, obj: Any, post_url_continue: Any = None) -> Any:
        """The refresh token, shown on this page once: never in a message, which the session
        or a cookie would keep."""
        token, persona = request.opened_connection  # type: ignore[attr-defined]
        # The admin's views are never cached (no-store), this page with them.
        return render(
            request,
            "serving/connection_opened.html",
            {
                **self.admin_site.each_context(request),
                "title": "Connection opened",
                "opts": self.opts,
                "token": token,
                "persona": persona,
                "client": obj.application,
            },
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # A refresh rotates the family's token: the spent ones are history, not connections.
        queryset = super().get_queryset(request).select_related("application")
        return _owner_only(request, queryset.filter(revoked__isnull=True))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (
            obj is None or request.user.is_superuser or obj.user_id == request.user.pk
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Revoking is the one change, through the action; the action needs this permission.
        return self.has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="client")
    def client(self, connection: Any) -> str:
        return connection.application.name if connection.application else "—"

    @admin.display(description="persona")
    def persona(self, connection: Any) -> str:
        resources = list(connection.resource or [])
        named = persona_uuid_of(resources[0]) if len(resources) == 1 else None
        persona = Persona.objects.filter(uuid=named).only("name").first() if named else None
        return persona.name if persona else "—"

    @admin.action(description="Revoke the selected connections")
    def revoke(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        live = list(queryset)
        for connection in live:
            connection.revoke()
        self.message_user(
            request,
            f"Revoked {len(live)} connection(s): their clients' next calls are refused.",
            messages.SUCCESS,
        )


class SuperuserOnlyAdmin(admin.ModelAdmin):
    """The toolkit's own records: a superuser's to inspect."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
