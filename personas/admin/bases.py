"""What every page of the owner's admin is built on: `ServiceAdmin` (writes through the form's
service call, never through Model.save(), and counts each change against the owner mutation
budget), `OwnedAdmin` (staff see what personas.selectors shows them and change only what they
own), and the helpers several pages use: who counts as staff, how an account is shown read-only,
and making the admin's instance the row a service saved.
"""

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from personas import selectors
from personas.forms import ServiceForm
from personas.models import Persona
from personas.ratelimits import mutation_retry_after


def _is_staff(request: HttpRequest) -> bool:
    return bool(request.user.is_active and request.user.is_staff)


def account_name(user: Any) -> str:
    """An account as a read-only field shows it: its name, never a link to the accounts admin,
    which only a superuser may open."""
    return user.get_username() if user is not None else "-"


def _adopt(obj: Model, saved: Model) -> None:
    """Make the admin's instance the saved row, for the log entry and the redirect after save."""
    for field in obj._meta.concrete_fields:
        setattr(obj, field.attname, getattr(saved, field.attname))
    obj._state.adding = False


class ServiceAdmin(admin.ModelAdmin):
    """Writes through the form's service call, never through Model.save(); rate-limited."""

    show_full_result_count = False
    list_per_page = 50

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[ServiceForm]:
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(
            form.__name__, (form,), {"actor": request.user, **self.form_attrs(request, obj)}
        )

    def form_attrs(self, request: HttpRequest, obj: Any) -> dict[str, Any]:
        return {}

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        _adopt(obj, form.save_through_service())

    def rate_limited(self, request: HttpRequest) -> HttpResponse | None:
        retry_after = mutation_retry_after(request)
        if retry_after is None:
            return None
        response = TemplateResponse(
            request,
            "admin/virgo/rate_limited.html",
            {
                **self.admin_site.each_context(request),
                "title": "Too many changes",
                "retry_after": retry_after,
            },
            status=429,
        )
        response["Retry-After"] = str(retry_after)
        return response

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        return self.rate_limited(request) or super().changeform_view(
            request, object_id, form_url, extra_context
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return self.rate_limited(request) or super().changelist_view(request, extra_context)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return self.rate_limited(request) or super().delete_view(request, object_id, extra_context)


class OwnedAdmin(ServiceAdmin):
    """Staff see what the selectors show them and change only what they own."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (
            obj is None or selectors.is_moderator(request.user) or selectors.owns(request.user, obj)
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or selectors.owns(request.user, obj))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_change_permission(request, obj)

    def get_deleted_objects(
        self, objs: Any, request: HttpRequest
    ) -> tuple[list[Any], dict[str, int], set[str], list[Any]]:
        """Deleting what one owns deletes what hangs on it (the service's cascade): only the
        ownership of the selected objects is checked, not model permissions on the cascade."""
        deleted, counts, _, protected = super().get_deleted_objects(objs, request)
        refused = set()
        if any(not selectors.owns(request.user, obj) for obj in objs):
            refused.add(str(self.opts.verbose_name))
        if not request.user.is_superuser and any(self.revoked_personas(obj) for obj in objs):
            refused.add("revoked personas (each keeps its tombstone: only a superuser may purge)")
        return deleted, counts, refused, protected

    def revoked_personas(self, obj: Any) -> list[Persona]:
        """The revoked personas deleting `obj` would delete (VX-TRUST-5): none by default."""
        return []
