"""Who an owner is, as cards say it: `OwnerIdentityAdmin` (the display name, the proven issuer
and subject, which proven domain the cards name) and `OrganizationDomainAdmin` (the domains
owners claim for their organization, their proofs through personas.proofs, approval by a
superuser and sharing with another owner; VX-ID-2).
"""

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html

from personas import selectors, services
from personas.admin.bases import OwnedAdmin, _is_staff
from personas.forms import (
    OrganizationClaimForm,
    OrganizationShareForm,
    OwnerIdentityForm,
    ServiceForm,
)
from personas.models import OrganizationDomain, OwnerIdentity, Verification


@admin.register(OwnerIdentity)
class OwnerIdentityAdmin(OwnedAdmin):
    """The identity chain cards carry. Each owner writes only a display name and which proven
    domain their cards name; the OIDC subject and the domains' proofs are shown, never typed."""

    form = OwnerIdentityForm
    list_display = ("display_name", "user", "organization_domain", "issuer", "subject_proof")
    list_select_related = ("user", "organization_domain")
    search_fields = ("display_name", "organization_domain__domain")
    fields = (
        "display_name",
        "organization_domain",
        "issuer",
        "identity_subject",
        "subject_proof",
        "typed_before_proofs",
    )
    readonly_fields = ("issuer", "identity_subject", "subject_proof", "typed_before_proofs")

    @admin.display(description="identity issuer", ordering="identity_issuer")
    def issuer(self, obj: OwnerIdentity) -> str:
        # Plain text, not Django's link for URL fields: admin pages point only at this site.
        return obj.identity_issuer

    @admin.display(description="how the subject was proven")
    def subject_proof(self, obj: OwnerIdentity) -> str:
        if obj.identity_verified_at is None:
            return (
                "Unverified: cards name no issuer or subject. Sign in with OpenID Connect to "
                "prove them."
            )
        return f"OpenID Connect sign-in, since {obj.identity_verified_at:%Y-%m-%d %H:%M} UTC"

    @admin.display(description="typed before proofs existed")
    def typed_before_proofs(self, obj: OwnerIdentity) -> str:
        typed = ", ".join(v for v in (obj.claimed_organization, obj.claimed_organization_url) if v)
        if not typed:
            return "-"
        return f"{typed} (never on a card; prove the domain to name it)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[OwnerIdentity]:
        return selectors.identities_visible_to(request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request) and not OwnerIdentity.objects.filter(user=request.user).exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Cards always name a provider; an identity is corrected, never removed.
        return False


@admin.register(OrganizationDomain)
class OrganizationDomainAdmin(OwnedAdmin):
    """The domains owners claim for their organization, and their proofs.

    An owner adds a claim by its domain, reads the token and where to publish it, and asks for
    a check ("Verify now", personas.proofs); once verified they may share it with another
    owner by username. They see their own claims, and the ones shared with them read-only. A
    superuser sees every claim and may approve one by hand or share it. Every write is a
    service's (personas.services), which audits it and settles the cards that name the domain.
    """

    list_display = ("domain", "owner", "standing", "verified_at", "checked_at", "shared")
    list_select_related = ("owner",)
    list_filter = ("verification",)
    search_fields = ("domain",)
    actions = ("verify_now", "approve")
    readonly_fields = (
        "domain",
        "owner",
        "standing",
        "how_to_prove",
        "verified_at",
        "checked_at",
        "last_failure",
        "shared",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[OrganizationDomain]:
        return selectors.organization_domains_visible_to(request.user).prefetch_related(
            "shared_with"
        )

    def _may_manage(self, request: HttpRequest, obj: OrganizationDomain) -> bool:
        return selectors.owns(request.user, obj) or selectors.is_moderator(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (
            obj is None
            or self._may_manage(request, obj)
            or obj.shared_with.filter(pk=request.user.pk).exists()
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or self._may_manage(request, obj))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_change_permission(request, obj)

    def has_verify_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_approve_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request) and selectors.is_moderator(request.user)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[ServiceForm]:
        kwargs["form"] = OrganizationShareForm if obj else OrganizationClaimForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.readonly_fields if obj else ()

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ((None, {"fields": ("domain",)}),)
        manage = self._may_manage(request, obj)
        status = ("domain", "owner", "standing", "verified_at", "checked_at", "last_failure")
        fieldsets: list[Any] = [(None, {"fields": status})]
        if manage:
            fieldsets.append(("How to prove it", {"fields": ("how_to_prove",)}))
        sharing = ("shared", "share_with") if manage else ("shared",)
        fieldsets.append(("Sharing", {"fields": sharing}))
        return fieldsets

    def response_add(
        self, request: HttpRequest, obj: OrganizationDomain, post_url_continue: str | None = None
    ) -> HttpResponse:
        """To the claim's page, where its token and the instructions are."""
        if "_addanother" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(
            request,
            f'Claimed {obj.domain}. Publish its token as shown below, then choose "Verify now".',
            messages.SUCCESS,
        )
        return HttpResponseRedirect(
            reverse("admin:personas_organizationdomain_change", args=[obj.pk])
        )

    def delete_model(self, request: HttpRequest, obj: OrganizationDomain) -> None:
        services.organization_remove(claim=obj, actor=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[OrganizationDomain]) -> None:
        for claim in queryset:
            services.organization_remove(claim=claim, actor=request.user)

    # Derived, read-only -------------------------------------------------------------------------

    @admin.display(description="standing")
    def standing(self, obj: OrganizationDomain) -> str:
        if obj.is_verified:
            return f"verified: {Verification(obj.verification).label}"
        if obj.last_failure:
            return "not verified (see the last failure)"
        return "not verified: waiting for its proof"

    @admin.display(description="shared with")
    def shared(self, obj: OrganizationDomain) -> str:
        return ", ".join(user.get_username() for user in obj.shared_with.all()) or "-"

    @admin.display(description="publish one of these")
    def how_to_prove(self, obj: OrganizationDomain) -> str:
        # The proofs' DNS and HTTPS clients are imported where a domain is looked at, not at
        # every command's start (the admin is imported by each).
        from personas import proofs

        steps = proofs.instructions(obj)
        return format_html(
            "<p><strong>A DNS TXT record</strong> named <code>{}</code> holding "
            "<code>{}</code></p>"
            "<p><strong>or an HTTPS file</strong> at <code>{}</code> holding only "
            "<code>{}</code> (served with status 200, no redirect, by a certificate browsers "
            "trust)</p>"
            '<div class="help">Then choose "Verify now". Virgo checks again daily (by '
            "default); once neither is found, no card names {} until it is proven again.</div>",
            steps.txt_name,
            steps.txt_value,
            steps.url,
            steps.file_content,
            obj.domain,
        )

    # Actions ------------------------------------------------------------------------------------

    @admin.action(
        description="Verify now",
        description_plural="Verify the selected domains now",
        permissions=["verify"],
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
    def verify_now(self, request: HttpRequest, queryset: QuerySet[OrganizationDomain]) -> None:
        from personas import proofs

        for claim in queryset:
            try:
                checked = proofs.check_domain(claim, actor=request.user)
            except PermissionDenied as refused:
                self.message_user(request, f"{claim.domain}: {refused}", messages.ERROR)
                continue
            if checked.is_verified:
                how = Verification(checked.verification).label
                self.message_user(request, f"{checked.domain}: verified ({how}).", messages.SUCCESS)
            else:
                self.message_user(
                    request,
                    f"{checked.domain}: not verified. {checked.last_failure}",
                    messages.WARNING,
                )

    @admin.action(
        description="Approve (superuser)",
        description_plural="Approve the selected domains without a proof (superuser)",
        permissions=["approve"],
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
    def approve(self, request: HttpRequest, queryset: QuerySet[OrganizationDomain]) -> None:
        for claim in queryset.select_related("owner"):
            try:
                services.organization_approve(claim=claim, actor=request.user)
            except (PermissionDenied, ValidationError) as refused:
                reason = " ".join(getattr(refused, "messages", [str(refused)]))
                self.message_user(request, f"{claim.domain}: {reason}", messages.ERROR)
                continue
            self.message_user(
                request, f"{claim.domain}: approved for {claim.owner}.", messages.SUCCESS
            )
