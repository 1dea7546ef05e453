"""What an owner sees of remote access in the admin (VX-REMOTE-1, VX-REMOTE-2): the clients they
registered, and the connections those clients hold to their personas, each revocable.

Owners meet the toolkit's records as serving's proxies, Client and Connection, and see and change
only their own; the toolkit registers its own models with SuperuserOnlyAdmin (OAUTH2_PROVIDER's
admin classes), for a superuser to inspect.
"""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from serving.models import Client, Connection
from serving.resources import persona_uuid_of


def _owner_only(request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
    return queryset if request.user.is_superuser else queryset.filter(user=request.user)


def _is_staff(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff)


@admin.register(Client)
class ClientAdmin(admin.ModelAdmin):
    """An agent host's client, registered by the owner whose personas it will ask for: public,
    authorization code with PKCE, its redirect URIs exact; never allowed to skip consent."""

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
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="client")
    def client(self, connection: Any) -> str:
        return connection.application.name if connection.application else "—"

    @admin.display(description="persona")
    def persona(self, connection: Any) -> str:
        from personas.models import Persona

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
