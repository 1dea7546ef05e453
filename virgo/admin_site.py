"""The admin site owners work in: Virgo's apps first, in the order an owner needs them.

Django lists apps and their models by name; an owner opens Personas far more than the runtime's
records, so the index puts the apps in APP_ORDER, then any other (accounts, tokens) by name, and
an app's models in MODEL_ORDER.
"""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

# What owners author, then what the factory and the runtime record about it.
APP_ORDER = ("personas", "stamps", "cards", "runtime", "channel", "serving")
# Within an app, what is opened most first; the rest by name.
MODEL_ORDER = {
    "personas": (
        "Persona",
        "Agent",
        "GrantProposal",
        "AuditEvent",
        "OwnerIdentity",
        "OrganizationDomain",
        "HumanSurface",
        "RegisteredAddress",
        "Skill",
    ),
    "serving": ("Connection", "Client"),
}


class VirgoAdminSite(admin.AdminSite):
    site_header = "Virgo: personas and their cards"
    site_title = "Virgo"
    index_title = "Your agents, personas and what they did"
    # The sidebar would take a quarter of a laptop's width from every list; the breadcrumbs
    # and the index are the way between pages (decision 210).
    enable_nav_sidebar = False

    def password_change(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Django's password change, with the old password checked as a sign-in
        (virgo.passwords)."""
        from virgo.passwords import password_change

        request.current_app = self.name
        options: dict[str, Any] = {
            "success_url": reverse("admin:password_change_done", current_app=self.name),
            "extra_context": {**self.each_context(request), **(extra_context or {})},
        }
        if self.password_change_template is not None:
            options["template_name"] = self.password_change_template
        return password_change(request, **options)

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[Any]:
        apps = super().get_app_list(request, app_label)
        for app in apps:
            app["models"].sort(key=_model_rank(MODEL_ORDER.get(app["app_label"], ())))
        return sorted(apps, key=lambda app: _ranked(APP_ORDER, app["app_label"], app["name"]))


def _model_rank(order: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[int, str]]:
    return lambda model: _ranked(order, model["object_name"], model["name"])


def _ranked(order: tuple[str, ...], key: str, name: str) -> tuple[int, str]:
    """Where `key` is in `order`, or after all of it; then by the name shown."""
    return (order.index(key) if key in order else len(order)), name


class VirgoAdminConfig(AdminConfig):
    default_site = "virgo.admin_site.VirgoAdminSite"
