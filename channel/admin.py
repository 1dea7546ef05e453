"""Owners see what their personas sent to the hub, and set where their confirmations go."""

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from channel import services
from channel.models import AuthoritySurface, Delivery
from personas.forms import ServiceForm
from personas.selectors import is_moderator
from virgo.admin_permissions import NoEditsMixin


def _staff(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff)


@admin.register(Delivery)
class DeliveryAdmin(NoEditsMixin, admin.ModelAdmin):
    """Read-only: every row is written by the runtime."""

    list_display = ("correlation_id", "kind", "tool_name", "persona", "binding", "status", "reason")
    list_filter = ("kind", "status")
    list_select_related = ("persona",)
    search_fields = ("correlation_id", "message_id")
    show_full_result_count = False
    readonly_fields = [field.name for field in Delivery._meta.fields]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Delivery]:
        rows = super().get_queryset(request).select_related("persona")
        if is_moderator(request.user):
            return rows
        return rows.filter(persona__agent__owner=request.user)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _staff(request) and (
            obj is None or self.get_queryset(request).filter(pk=obj.pk).exists()
        )


class AuthoritySurfaceForm(ServiceForm):
    """Validated by the service itself (rehearsed, see personas.forms): the binding must be one
    of the owner's registered human surfaces, and errors land on the field they name."""

    class Meta:
        model = AuthoritySurface
        fields = ("binding", "principal")

    def call_service(self) -> AuthoritySurface:
        return services.authority_surface_set(
            user=self.instance.user if self.instance.pk else self.actor,
            actor=self.actor,
            binding=self.cleaned_data["binding"],
            principal=self.cleaned_data["principal"],
        )


@admin.register(AuthoritySurface)
class AuthoritySurfaceAdmin(admin.ModelAdmin):
    """Each owner sets their own, at one of their registered human surfaces; the write goes
    through channel.services."""

    form = AuthoritySurfaceForm
    list_display = ("user", "binding", "principal", "updated_at")
    fields = ("binding", "principal")

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[ServiceForm]:
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"actor": request.user})

    def get_queryset(self, request: HttpRequest) -> QuerySet[AuthoritySurface]:
        rows = super().get_queryset(request).select_related("user")
        if is_moderator(request.user):
            return rows
        return rows.filter(user=request.user)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _staff(request) and (obj is None or obj.user_id == request.user.pk or
                                    is_moderator(request.user))  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _staff(request) and not AuthoritySurface.objects.filter(user=request.user).exists()

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _staff(request) and (obj is None or obj.user_id == request.user.pk)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _staff(request) and (obj is None or obj.user_id == request.user.pk)

    def save_model(
        self, request: HttpRequest, obj: AuthoritySurface, form: Any, change: bool
    ) -> None:
        saved = form.save_through_service()
        obj.pk, obj.user = saved.pk, saved.user
