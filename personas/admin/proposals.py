"""Grant proposals in the admin: the changes that would widen a persona's grant and wait for its
owner. `ProposalInline` lists a persona's proposals on its page; `GrantProposalAdmin` is the diff
page where the owner confirms or rejects one (personas.services.proposal_approve,
proposal_reject), with the sections the apps built on the records contribute to it.
"""

from collections.abc import Callable
from typing import Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from personas import grant_review, selectors, services
from personas.admin.bases import ServiceAdmin, _is_staff, account_name
from personas.models import GrantProposal
from virgo.admin_permissions import NoEditsMixin


class ProposalInline(NoEditsMixin, admin.TabularInline):
    """The persona's grant proposals, each linked to its diff page. Read-only; owner only."""

    model = GrantProposal
    fields = ("proposed_at", "state", "via", "by", "widening", "review")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    verbose_name = "grant proposal"
    verbose_name_plural = "grant proposals (changes that wait for the owner)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[GrantProposal]:
        return selectors.proposals_visible_to(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or selectors.owns(request.user, obj))

    @admin.display(description="status")
    def state(self, obj: GrantProposal) -> str:
        return GrantProposal.Status(obj.effective_status).label

    @admin.display(description="proposed by")
    def by(self, obj: GrantProposal) -> str:
        return account_name(obj.proposed_by)

    # The reasons of all the persona's proposals, named at the first row: one query for the
    # personas they name, not one a row. An inline is made afresh for each request.
    _reasons: dict[int, list[str]] | None = None

    @admin.display(description="why it waits")
    def widening(self, obj: GrantProposal) -> str:
        if self._reasons is None or obj.pk not in self._reasons:
            diffs = GrantProposal.objects.filter(persona_id=obj.persona_id).values_list(
                "pk", "diff"
            )
            self._reasons = grant_review.widening_reasons_of(
                dict(diffs), obj.persona.agent.owner_id
            )
        return "; ".join(self._reasons[obj.pk])

    @admin.display(description="diff")
    def review(self, obj: GrantProposal) -> str:
        url = reverse("admin:personas_grantproposal_change", args=[obj.pk])
        return format_html('<a href="{}">review</a>', url)


@admin.register(GrantProposal)
class GrantProposalAdmin(ServiceAdmin):
    """Changes that would widen a persona's grant. Only the persona's owner sees one (anyone
    else gets a 404), and its page is the diff page where the owner confirms or rejects it.

    The apps built on the records add sections to the diff page through
    `contributed_sections`: each is called with the request and the proposal and returns the
    section's HTML, safe (runtime.admin_explain: which of the persona's policy vectors the
    proposal would change)."""

    list_display = ("id", "persona", "state", "via", "proposed_by", "proposed_at", "decided_by")
    list_select_related = ("persona", "proposed_by", "decided_by")
    list_filter = ("status", "via")
    contributed_sections: ClassVar[list[Callable[[HttpRequest, GrantProposal], str]]] = []

    def get_queryset(self, request: HttpRequest) -> QuerySet[GrantProposal]:
        return selectors.proposals_visible_to(request.user)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_staff(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_staff(request) and (obj is None or selectors.owns(request.user, obj.persona))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_view_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="status")
    def state(self, obj: GrantProposal) -> str:
        return GrantProposal.Status(obj.effective_status).label

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        if not _is_staff(request):
            raise PermissionDenied
        try:
            proposal = self.get_queryset(request).filter(pk=int(unquote(object_id))).first()
        except ValueError:
            proposal = None
        if proposal is None:
            raise Http404("No such proposal.")
        if request.method == "POST":
            return self.rate_limited(request) or self._decide(request, proposal)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Review the grant change of {proposal.persona.name}",
            "opts": self.opts,
            "proposal": proposal,
            "status": GrantProposal.Status(proposal.effective_status),
            "diff": proposal.diff,
            "changes": grant_review.changed_rows(proposal.diff, proposal.persona.agent.owner_id),
            "widening": grant_review.widening_reasons(
                proposal.diff, proposal.persona.agent.owner_id
            ),
            "persona_url": reverse("admin:personas_persona_change", args=[proposal.persona_id]),
            "draft": not proposal.persona.system_prompt.strip(),
            "contributed": [section(request, proposal) for section in self.contributed_sections],
        }
        return TemplateResponse(request, "admin/personas/grantproposal/review.html", context)

    def _decide(self, request: HttpRequest, proposal: GrantProposal) -> HttpResponse:
        decision = request.POST.get("decision")
        if decision not in ("approve", "reject"):
            return HttpResponseBadRequest("decision must be 'approve' or 'reject'")
        here = reverse("admin:personas_grantproposal_change", args=[proposal.pk])
        try:
            if decision == "approve":
                # A draft's prompt is written here, as its owner confirms (personas.services).
                prompt = request.POST.get("system_prompt")
                persona = services.proposal_approve(
                    proposal=proposal,
                    actor=request.user,
                    system_prompt=prompt if not proposal.persona.system_prompt.strip() else None,
                )
                done = f"Confirmed: {persona.name} is at generation {persona.generation}."
            else:
                services.proposal_reject(proposal=proposal, actor=request.user)
                done = "Rejected: nothing of the persona changed."
        except ValidationError as refused:
            self.message_user(request, " ".join(refused.messages), messages.ERROR)
            return HttpResponseRedirect(here)
        self.message_user(request, done, messages.SUCCESS)
        return HttpResponseRedirect(
            reverse("admin:personas_persona_change", args=[proposal.persona_id])
        )
