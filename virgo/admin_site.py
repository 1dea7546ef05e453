"""The admin site owners work in: Virgo's apps first, in the order an owner needs them.

Django lists apps and their models by name; an owner opens Personas far more than the runtime's
records, so the index puts the apps in APP_ORDER, then any other (accounts, tokens) by name, and
an app's models in MODEL_ORDER. A model's name alone ("Decision records", "Lane bindings") does
not tell an owner what its list holds, so each model the index lists carries a line from
MODEL_DESCRIPTIONS, shown under its name (templates/admin/app_list.html).
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
# What each model's list holds, in the owner's words, by model label: the one place these words
# live. A model the index lists without a line here shows none, and tests/test_admin_index.py
# fails.
MODEL_DESCRIPTIONS = {
    "personas.Persona": "The faces of your agent: each one's prompt, tools, card and stamp",
    "personas.Agent": "Your agent runtimes, and the verbs and queues each may give its personas",
    "personas.GrantProposal": (
        "Changes that would let a persona do more, waiting for you to confirm or reject"
    ),
    "personas.AuditEvent": "Who changed or decided what about your personas, and when",
    "personas.OwnerIdentity": "Who you are on your cards: your sign-in and your organization",
    "personas.OrganizationDomain": (
        "Domains you claim for your organization, and whether each is proven"
    ),
    "personas.HumanSurface": (
        "Chats and channels on the hub where your personas may ask you to confirm"
    ),
    "personas.RegisteredAddress": (
        "The addresses personas take (workspace/project/role); never renamed"
    ),
    "personas.Skill": "What a card advertises: each skill and the verbs a persona needs for it",
    "runtime.DecisionRecord": (
        "Calls that asked first: what a persona wanted to do, who was asked, and the answer"
    ),
    "runtime.PromptRegistryEntry": (
        "Learned choices: answers you chose to remember, given again to the same call"
    ),
    "runtime.RefusalRecord": "Calls that were refused: what was asked and the rule that said no",
    "runtime.CoordinationMessage": "Each persona's inbox: the messages other personas sent it",
    "runtime.Task": "Work in your queues: the todos your personas raised, claimed and reported on",
    "runtime.Decision": "Questions your personas raised in a workspace or project, and the outcome",
    "runtime.Run": "Builds, tests, reviews and deployments your personas ran, and what they made",
    "runtime.ConversationArchive": (
        "Your personas' past conversations, each linked to the one it continued"
    ),
    "runtime.Webhook": "Webhooks your personas registered to deploy or publish, and each call",
    "runtime.SnapshotImport": "Personas brought in from an export archive, and where each was from",
    "runtime.HumanInstruction": (
        "Your answer to a persona's open decision, for a secretary persona to pass on"
    ),
    "runtime.LaneBinding": "Who approves in each team coordinator's lane (a workspace or project)",
    "runtime.LaneApproval": "An approver's go-ahead for one decision in their lane",
    "channel.AuthoritySurface": "Where on the hub your confirmation requests go, and who answers",
    "channel.Delivery": "What was sent to the hub for you, and whether it arrived",
    "serving.Connection": "Agent hosts using a persona's tools over the network; revoke to end one",
    "serving.Client": "The agent hosts you allow to ask for your personas' tools over the network",
    "cards.SigningKey": "The keys that sign every public card: rotate, retire or revoke them",
    "cards.FederationPeer": "Other registries a directory search also asks, and how to reach each",
    "auth.User": "The people who sign in: owners, and moderators who see every owner's records",
    "auth.Group": "Sets of permissions to give several people at once",
    "authtoken.TokenProxy": "Each person's key for the REST API and for scripts",
    "oauth2_provider.Application": "Every owner's agent-host clients, as OAuth keeps them",
    "oauth2_provider.AccessToken": "Short-lived tokens clients use to call a persona's tools",
    "oauth2_provider.RefreshToken": "The long-lived tokens behind every owner's connections",
    "oauth2_provider.Grant": "Sign-in codes a client has yet to exchange for tokens",
    "oauth2_provider.IDToken": "OpenID Connect identity tokens given to clients",
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
            for model in app["models"]:
                model["description"] = MODEL_DESCRIPTIONS.get(model["model"]._meta.label, "")
        return sorted(apps, key=lambda app: _ranked(APP_ORDER, app["app_label"], app["name"]))


def _model_rank(order: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[int, str]]:
    return lambda model: _ranked(order, model["object_name"], model["name"])


def _ranked(order: tuple[str, ...], key: str, name: str) -> tuple[int, str]:
    """Where `key` is in `order`, or after all of it; then by the name shown."""
    return (order.index(key) if key in order else len(order)), name


class VirgoAdminConfig(AdminConfig):
    default_site = "virgo.admin_site.VirgoAdminSite"
