"""The owners' REST API: /api/agents/ and /api/personas/ (SPEC-0009 persona management).

Views and serializers are thin. Input serializers check shapes only and refuse any key they
do not accept (a request that tries to set `skills` is told so, never silently ignored); the
services in personas.services validate the domain and write. Which objects a caller can
reach comes from personas.selectors: another owner's agent or persona is a 404.

Authentication is by token or by session; DRF's SessionAuthentication enforces CSRF on
session writes. Every write counts against the caller's owner mutation budget
(personas.ratelimits), shared with the admin.
"""

from collections.abc import Mapping
from typing import Any, ClassVar

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from django.db import transaction
from django_ratelimit import UNSAFE
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from rest_framework import serializers, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.parsers import FormParser, JSONParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.throttling import BaseThrottle

from personas import selectors, services, surfaces
from personas.addresses import ADDRESS_SHAPE
from personas.catalogue import VERBS
from personas.models import (
    Agent,
    GrantProposal,
    HumanSurface,
    Persona,
    PersonaClass,
    RevocationReason,
)
from personas.ratelimits import mutation_retry_after
from personas.surfaces import BINDING_SHAPE
from virgo import metrics, signin
from virgo.api import (
    ANY_TEXT,
    ObjectId,
    ObjectUuid,
    StrictBoolean,
    StrictChoice,
    StrictCursorPagination,
    StrictInteger,
    Text,
    UniqueList,
)
from virgo.limits import address_retry_after
from virgo.openapi import field_errors, refusal
from virgo.outages import logged_by_outage

READ_ONLY_REASONS: dict[str, str] = {
    "id": "read-only: assigned by the server",
    "uuid": "read-only: assigned by the server when the persona is created",
    "skills": "read-only: skills are derived from verb_subset and never set by hand; "
    "change verb_subset instead",
    "generation": "read-only: every change to what the persona is opens the next generation",
    "standing": "read-only: set when the generation's capability stamp is built",
    "card_url": "read-only: derived from the persona's own base path",
    "revoked_at": "read-only: revoke through POST /api/personas/{uuid}/revoke/",
    "revocation_reason": "read-only: revoke through POST /api/personas/{uuid}/revoke/",
    "owner": "read-only: the owner is the authenticated caller",
    "created_at": "read-only",
    "updated_at": "read-only",
}


# Input ----------------------------------------------------------------------------------------


class StrictInput(serializers.Serializer):
    """Refuses keys it does not accept, naming each one and why."""

    extra_reasons: ClassVar[dict[str, str]] = {}

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, Mapping):
            refused = {
                key: [self.extra_reasons.get(key) or READ_ONLY_REASONS.get(key) or "unknown field"]
                for key in data
                if key not in self.fields
            }
            if refused:
                raise serializers.ValidationError(refused)
        return super().to_internal_value(data)


class StrictInputSchema(OpenApiSerializerExtension):
    """The OpenAPI schema of a StrictInput says what it does: no keys beyond its fields."""

    target_class = StrictInput
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, "additionalProperties": False}


BINDING_REASON = "not a hub binding: printable ASCII characters, no spaces"


def _names(**kwargs: Any) -> UniqueList:
    return UniqueList(child=Text(max_length=200), **kwargs)


def _verbs(**kwargs: Any) -> UniqueList:
    """Verb names of the catalogue; the services say which lie outside the agent's grant."""
    return UniqueList(child=StrictChoice(choices=[verb.name for verb in VERBS]), **kwargs)


class AgentInput(StrictInput):
    name = Text(max_length=120)
    self_description = Text(allow_blank=True, default="")
    granted_verbs = _verbs()
    granted_queues = _names()


class PersonaInput(StrictInput):
    """What an owner authors. verb_subset and queues are required: scope is never implied."""

    name = Text(max_length=120)
    description = Text(allow_blank=True, default="")
    system_prompt = Text(help_text="Authored by the owner, never generated.")
    verb_subset = _verbs()
    queues = _names()
    persona_class = StrictChoice(choices=PersonaClass.choices)
    address = Text(
        max_length=200,
        pattern=RegexValidator(ADDRESS_SHAPE, "not an address: 2 or 3 lowercase slugs"),
        help_text="A registered address path, e.g. `work/core/reviewer`",
    )
    graph_namespace = Text(allow_blank=True, default="", max_length=200)
    human_surface_bindings = UniqueList(
        child=Text(max_length=200, pattern=RegexValidator(BINDING_SHAPE, BINDING_REASON)),
        default=list,
        help_text=(
            "Where the persona may talk to humans: surfaces registered to you (/api/surfaces/), "
            "or `virgo:persona/<uuid>`, the mailbox of one of your personas."
        ),
    )
    ask_first_verbs = _verbs(
        default=list,
        help_text=(
            "Verbs of verb_subset that wait for confirmation before they run, though no global "
            "boundary asks: the owning lead answers, or you when there is none."
        ),
    )
    owning_lead = ObjectUuid(queryset=Persona.objects.none(), allow_null=True, default=None)
    discoverable = StrictBoolean(required=False)

    extra_reasons = {"agent": "cannot be changed after creation; create a new persona instead"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Without a request (the schema generator describing the shape) nothing is reachable.
        if "request" in self.context:
            user = self.context["request"].user
            self.fields["owning_lead"].queryset = selectors.personas_visible_to(user)


class SurfaceInput(StrictInput):
    binding = Text(
        max_length=200,
        pattern=RegexValidator(BINDING_SHAPE, BINDING_REASON),
        help_text="The hub's id of the place, e.g. `teams:chat/ops`; one owner holds each.",
    )
    label = Text(max_length=200, allow_blank=True, default="")


class RevokeInput(StrictInput):
    reason_code = StrictChoice(choices=RevocationReason.choices)
    reason = Text(
        max_length=services.REVOCATION_REASON_LIMIT,
        help_text="Why: kept in the audit event, never shown to peers (they see the code).",
    )
    generation = StrictInteger(
        min_value=1,
        required=False,
        help_text="Revoke only this generation; without it the whole persona, finally.",
    )


class PersonaCreateInput(PersonaInput):
    agent = ObjectId(queryset=Agent.objects.none())

    extra_reasons: ClassVar[dict[str, str]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "request" in self.context:
            user = self.context["request"].user
            self.fields["agent"].queryset = selectors.agents_visible_to(user)


# Output ---------------------------------------------------------------------------------------


class AgentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    owner = serializers.IntegerField(source="owner_id")
    name = serializers.CharField()
    self_description = serializers.CharField()
    granted_verbs = serializers.ListField(child=serializers.CharField())
    granted_queues = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class SurfaceOutput(serializers.Serializer):
    id = serializers.IntegerField()
    owner = serializers.IntegerField(source="owner_id")
    binding = serializers.CharField()
    label = serializers.CharField()
    registered_at = serializers.DateTimeField()


class PersonaOutput(serializers.Serializer):
    uuid = serializers.UUIDField()
    agent = serializers.IntegerField(source="agent_id")
    name = serializers.CharField()
    description = serializers.CharField()
    system_prompt = serializers.CharField()
    verb_subset = serializers.ListField(child=serializers.CharField())
    queues = serializers.ListField(child=serializers.CharField())
    skills = serializers.ListField(child=serializers.DictField())
    persona_class = serializers.CharField()
    address = serializers.CharField(source="address.path")
    graph_namespace = serializers.CharField()
    human_surface_bindings = serializers.ListField(child=serializers.CharField())
    ask_first_verbs = serializers.ListField(child=serializers.CharField())
    owning_lead = serializers.UUIDField(source="owning_lead.uuid", allow_null=True)
    discoverable = serializers.BooleanField()
    generation = serializers.IntegerField()
    standing = serializers.BooleanField(allow_null=True)
    card_url = serializers.CharField()
    revoked_at = serializers.DateTimeField(allow_null=True)
    revocation_reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class RevocationOutput(serializers.Serializer):
    persona = serializers.UUIDField(source="persona.uuid")
    generations = serializers.ListField(
        child=serializers.IntegerField(), help_text="The generations this revocation revoked."
    )
    reason_code = serializers.CharField()
    revoked_at = serializers.DateTimeField(source="at")


class ProposalOutput(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.SerializerMethodField()
    review_url = serializers.SerializerMethodField(
        help_text="The admin page where the owner reviews the diff and decides."
    )
    persona = serializers.UUIDField(source="persona.uuid")
    status = serializers.ChoiceField(
        source="effective_status", choices=GrantProposal.Status.choices
    )
    via = serializers.ChoiceField(choices=GrantProposal.Via.choices)
    proposed_by = serializers.IntegerField(source="proposed_by_id", allow_null=True)
    proposed_at = serializers.DateTimeField()
    decided_by = serializers.IntegerField(source="decided_by_id", allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    base_generation = serializers.IntegerField()
    applied_generation = serializers.IntegerField(allow_null=True)
    changes = serializers.DictField()
    diff = serializers.DictField(
        help_text="Tools added and removed, access changed, skills, queues and bindings, with "
        "the current and the next stamp hash; `widening` says why it waits for the owner."
    )

    def get_url(self, proposal: GrantProposal) -> str:
        return reverse("api-proposal-detail", [proposal.pk], request=self.context.get("request"))

    def get_review_url(self, proposal: GrantProposal) -> str:
        return proposal.review_url


# Views ----------------------------------------------------------------------------------------


class OwnerMutationThrottle(BaseThrottle):
    """The shared owner mutation budget; DRF turns a refusal into 429 with Retry-After."""

    # What the budget counts (personas.ratelimits); the API schema documents 429 for these.
    counted_methods = UNSAFE

    def __init__(self) -> None:
        self.retry_after: int | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        self.retry_after = mutation_retry_after(request._request)
        return self.retry_after is None

    def wait(self) -> float | None:
        return self.retry_after


class ById(StrictCursorPagination):
    ordering = "id"
    page_size = 50
    max_page_size = 100


class OwnerViewSet(viewsets.ViewSet):
    permission_classes = [IsAuthenticated]
    throttle_classes = [OwnerMutationThrottle]
    pagination_class = ById

    def paginated(self, queryset: Any, output: type[serializers.Serializer]) -> Response:
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queryset, self.request, view=self)
        return paginator.get_paginated_response(output(page, many=True).data)


def _owner_schema(
    *,
    inputs: type[serializers.Serializer],
    create_inputs: type[serializers.Serializer],
    output: type[serializers.Serializer],
    key: OpenApiParameter,
    tag: str,
    accepted: dict[int, Any] | None = None,
) -> Any:
    """The OpenAPI description of one owner resource: list, create, read, replace, patch, delete."""
    detail = {"parameters": [key], "tags": [tag]}
    update_responses: Any = {200: output, **(accepted or {})}
    location = OpenApiParameter(
        "Location",
        OpenApiTypes.URI,
        OpenApiParameter.HEADER,
        response=[201],
        required=True,
        description="The new object's URL.",
    )
    return extend_schema_view(
        list=extend_schema(responses=output, tags=[tag]),
        create=extend_schema(
            request=create_inputs,
            responses={201: output, **(accepted or {})},
            parameters=[location],
            tags=[tag],
        ),
        retrieve=extend_schema(responses=output, **detail),
        update=extend_schema(request=inputs, responses=update_responses, **detail),
        partial_update=extend_schema(request=inputs, responses=update_responses, **detail),
        destroy=extend_schema(responses={204: None}, **detail),
    )


@_owner_schema(
    inputs=AgentInput,
    create_inputs=AgentInput,
    output=AgentOutput,
    key=OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH),
    tag="agents",
)
class AgentViewSet(OwnerViewSet):
    def _agent(self, pk: str) -> Agent:
        return get_object_or_404(selectors.agents_visible_to(self.request.user), pk=pk)

    def list(self, request: Request) -> Response:
        return self.paginated(selectors.agents_visible_to(request.user), AgentOutput)

    def create(self, request: Request) -> Response:
        data = AgentInput(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        agent = services.agent_create(owner=request.user, **data.validated_data)
        return Response(
            AgentOutput(agent).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": reverse("api-agent-detail", [agent.pk], request=request)},
        )

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(AgentOutput(self._agent(pk)).data)

    def update(self, request: Request, pk: str, partial: bool = False) -> Response:
        agent = self._agent(pk)
        data = AgentInput(data=request.data, partial=partial, context={"request": request})
        data.is_valid(raise_exception=True)
        agent = services.agent_update(agent=agent, actor=request.user, **data.validated_data)
        return Response(AgentOutput(agent).data)

    def partial_update(self, request: Request, pk: str) -> Response:
        return self.update(request, pk, partial=True)

    def destroy(self, request: Request, pk: str) -> Response:
        services.agent_delete(agent=self._agent(pk), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


@_owner_schema(
    inputs=PersonaInput,
    create_inputs=PersonaCreateInput,
    output=PersonaOutput,
    key=OpenApiParameter("uuid", OpenApiTypes.UUID, OpenApiParameter.PATH),
    tag="personas",
    accepted={
        202: OpenApiResponse(
            ProposalOutput,
            description="The write widens the persona's grant (a new persona's grant does, "
            "unless it would not stand), so the grant is held as a proposal for the owner's "
            "approval (Location: the proposal); nothing of it runs or is advertised yet. A new "
            "persona is created granting nothing, its uuid in `persona`.",
        )
    },
)
class PersonaViewSet(OwnerViewSet):
    lookup_field = "uuid"

    def _personas(self) -> Any:
        return selectors.personas_visible_to(self.request.user).select_related(
            "address", "owning_lead"
        )

    def _persona(self, uuid: str) -> Persona:
        return get_object_or_404(self._personas(), uuid=uuid)

    def list(self, request: Request) -> Response:
        return self.paginated(self._personas(), PersonaOutput)

    def create(self, request: Request) -> Response:
        data = PersonaCreateInput(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        agent = fields.pop("agent")
        discoverable = fields.pop("discoverable", None)
        with transaction.atomic():
            change = services.persona_draft(
                agent=agent, actor=request.user, via=GrantProposal.Via.API, **fields
            )
            if discoverable:
                services.persona_set_discoverable(
                    persona=change.persona, actor=request.user, discoverable=True, via="api"
                )
        if change.proposal is not None:
            return self._accepted(request, change.proposal)
        persona = self._persona(str(change.persona.uuid))
        return Response(
            PersonaOutput(persona).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": reverse("api-persona-detail", [persona.uuid], request=request)},
        )

    def retrieve(self, request: Request, uuid: str) -> Response:
        return Response(PersonaOutput(self._persona(uuid)).data)

    def update(self, request: Request, uuid: str, partial: bool = False) -> Response:
        persona = self._persona(uuid)
        data = PersonaInput(data=request.data, partial=partial, context={"request": request})
        data.is_valid(raise_exception=True)
        changes = dict(data.validated_data)
        discoverable = changes.pop("discoverable", None)
        # One transaction: a refused discoverability change undoes the rest of the request.
        proposal = None
        with transaction.atomic():
            if changes:
                proposal = services.persona_submit(
                    persona=persona, actor=request.user, via=GrantProposal.Via.API, **changes
                ).proposal
            if discoverable is not None:
                services.persona_set_discoverable(
                    persona=persona, actor=request.user, discoverable=discoverable, via="api"
                )
        if proposal is not None:
            return self._accepted(request, proposal)
        return Response(PersonaOutput(self._persona(uuid)).data)

    @staticmethod
    def _accepted(request: Request, proposal: GrantProposal) -> Response:
        """A write that widens the grant waits for the owner: nothing of it runs yet."""
        output = ProposalOutput(proposal, context={"request": request}).data
        return Response(
            output, status=status.HTTP_202_ACCEPTED, headers={"Location": output["url"]}
        )

    def partial_update(self, request: Request, uuid: str) -> Response:
        return self.update(request, uuid, partial=True)

    def destroy(self, request: Request, uuid: str) -> Response:
        services.persona_delete(persona=self._persona(uuid), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=RevokeInput,
        responses={200: RevocationOutput},
        parameters=[OpenApiParameter("uuid", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        tags=["personas"],
    )
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, uuid: str) -> Response:
        """Revoke the persona, or one generation of it, at once: its card answers 410 Gone."""
        persona = self._persona(uuid)
        data = RevokeInput(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        revocation = services.persona_revoke(
            persona=persona, actor=request.user, via="api", **data.validated_data
        )
        return Response(RevocationOutput(revocation).data)


@extend_schema_view(
    list=extend_schema(responses=SurfaceOutput, tags=["surfaces"]),
    create=extend_schema(
        request=SurfaceInput,
        responses={201: SurfaceOutput},
        parameters=[
            OpenApiParameter(
                "Location",
                OpenApiTypes.URI,
                OpenApiParameter.HEADER,
                response=[201],
                required=True,
                description="The new object's URL.",
            )
        ],
        tags=["surfaces"],
    ),
    retrieve=extend_schema(
        responses=SurfaceOutput,
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        tags=["surfaces"],
    ),
    destroy=extend_schema(
        responses={204: None, 422: field_errors("A persona is still bound to the surface.")},
        parameters=[OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        tags=["surfaces"],
    ),
)
class SurfaceViewSet(OwnerViewSet):
    """The owner's human surfaces: the places on the hub their personas may be bound to.

    Registering a binding claims it (the first owner holds it); it is given up by deleting it,
    once no persona is bound to it. There is no update: a binding is an identity.
    """

    def _surface(self, pk: str) -> HumanSurface:
        return get_object_or_404(selectors.surfaces_visible_to(self.request.user), pk=pk)

    def list(self, request: Request) -> Response:
        return self.paginated(selectors.surfaces_visible_to(request.user), SurfaceOutput)

    def create(self, request: Request) -> Response:
        data = SurfaceInput(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        surface = surfaces.surface_register(
            owner=request.user, actor=request.user, **data.validated_data
        )
        return Response(
            SurfaceOutput(surface).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": reverse("api-surface-detail", [surface.pk], request=request)},
        )

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(SurfaceOutput(self._surface(pk)).data)

    def destroy(self, request: Request, pk: str) -> Response:
        surfaces.surface_remove(surface=self._surface(pk), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


_PROPOSAL_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH)
_DECIDED = {
    200: ProposalOutput,
    403: refusal("Decided with an API token: only the owner's own session (with CSRF) decides."),
    409: refusal("Already decided, or stale: the persona changed after it was proposed."),
}


@extend_schema_view(
    list=extend_schema(responses=ProposalOutput, tags=["proposals"]),
    retrieve=extend_schema(responses=ProposalOutput, parameters=[_PROPOSAL_ID], tags=["proposals"]),
    approve=extend_schema(
        request=None, responses=_DECIDED, parameters=[_PROPOSAL_ID], tags=["proposals"]
    ),
    reject=extend_schema(
        request=None, responses=_DECIDED, parameters=[_PROPOSAL_ID], tags=["proposals"]
    ),
)
class ProposalViewSet(OwnerViewSet):
    """Changes that would widen a persona's grant, waiting for its owner; only the owner sees
    them. Approving makes the change as an immediate one would; rejecting changes nothing.

    A decision needs the owner's own session (the admin's sign-in, with its CSRF token): an API
    token that could propose a widening must not be able to approve it too.
    """

    def _proposal(self, pk: str) -> GrantProposal:
        return get_object_or_404(selectors.proposals_visible_to(self.request.user), pk=pk)

    def list(self, request: Request) -> Response:
        paginator = self.pagination_class()
        queryset = selectors.proposals_visible_to(request.user)
        page = paginator.paginate_queryset(queryset, request, view=self)
        data = ProposalOutput(page, many=True, context={"request": request}).data
        return paginator.get_paginated_response(data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(ProposalOutput(self._proposal(pk), context={"request": request}).data)

    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, services.proposal_approve)

    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, services.proposal_reject)

    def _decide(self, request: Request, pk: str, decide: Any) -> Response:
        proposal = self._proposal(pk)
        if not isinstance(request.successful_authenticator, SessionAuthentication):
            return Response(
                {
                    "detail": "Only the owner's own session decides a proposal: sign in to the "
                    "admin, or call this with your session and its CSRF token, not a token.",
                    "code": "session_required",
                },
                status=status.HTTP_403_FORBIDDEN,
            )
        try:
            decide(proposal=proposal, actor=request.user)
        except services.StaleProposal as stale:
            return Response(
                {"detail": " ".join(stale.messages), "code": "stale"},
                status=status.HTTP_409_CONFLICT,
            )
        except DjangoValidationError as refused:
            return Response(
                {"detail": " ".join(refused.messages), "code": "decided"},
                status=status.HTTP_409_CONFLICT,
            )
        proposal.refresh_from_db()
        return Response(ProposalOutput(proposal, context={"request": request}).data)


class TokenInput(AuthTokenSerializer):
    """A username and a password, as JSON strings or form fields, never trimmed."""

    username = Text(write_only=True)
    password = Text(write_only=True, pattern=ANY_TEXT)
    token = None


class TokenView(ObtainAuthToken):
    """`POST /api/auth/token/` with username and password: the caller's API token.

    Password guessing is bounded per source IP (VIRGO_TOKEN_RATE_LIMIT, every request) and by
    the sign-in limit shared with the admin (virgo.signin: failures per username and per
    address); a limited request gets 429 with Retry-After before the credentials are checked,
    and while those counts cannot be reached (Redis down) 503 with Retry-After (VX-REL-1).
    """

    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser, FormParser]
    permission_classes = [AllowAny]
    serializer_class = TokenInput

    @extend_schema(
        request=TokenInput,
        responses={
            200: inline_serializer("Token", {"token": serializers.CharField()}),
            429: refusal(
                "Too many token requests from this address (`rate_limited`), or too many "
                "failed sign-ins for this username or from this address (`signin_locked`)."
            ),
            503: refusal(
                "Failed sign-ins cannot be counted right now, so no password is checked "
                "(`signin_unavailable`); Retry-After says when to try again."
            ),
        },
        tags=["auth"],
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        retry_after = address_retry_after(
            request, group="virgo.token", rate=settings.VIRGO_TOKEN_RATE_LIMIT
        )
        if retry_after is not None:
            return Response(
                {"detail": "Too many token requests.", "code": "rate_limited"},
                status=429,
                headers={"Retry-After": str(retry_after)},
            )
        data = request.data
        username = data.get("username") if isinstance(data, Mapping) else ""
        try:
            locked = signin.refused(request, username)
            if locked is not None:
                return Response(
                    {"detail": signin.LOCKED_OUT, "code": "signin_locked"},
                    status=429,
                    headers={"Retry-After": str(locked)},
                )
            return super().post(request, *args, **kwargs)
        except signin.Unavailable as unavailable:
            metrics.UNAVAILABLE_RESPONSES.labels(reason="signin").inc()
            return logged_by_outage(
                Response(
                    {"detail": signin.UNAVAILABLE, "code": "signin_unavailable"},
                    status=503,
                    headers={"Retry-After": str(unavailable.retry_after)},
                )
            )
