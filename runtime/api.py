"""`POST /api/personas/<uuid>/explain/`: runtime.explain for the persona's owner.

Only the owner's own personas are found (a moderator explains only their own too: the answer
names the owner's authority and learned choices); any other uuid is a 404, as for the other
persona endpoints. The body is `{"tool": ..., "args": {...}}`; a missing or wrong field is a
400 naming it. Nothing is written, so no mutation budget is spent.
"""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.generics import get_object_or_404
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from personas.api import StrictInput
from personas.selectors import personas_owned_by
from runtime.explain import explain
from virgo.api import Text


class ExplainInput(StrictInput):
    tool = Text(max_length=100)
    args = serializers.DictField(required=False, default=dict)


class ExplainView(APIView):
    @extend_schema(
        request=ExplainInput,
        responses={200: OpenApiTypes.OBJECT},
        parameters=[OpenApiParameter("uuid", OpenApiTypes.UUID, OpenApiParameter.PATH)],
        tags=["personas"],
    )
    def post(self, request: Request, uuid: Any) -> Response:
        """What the runtime would decide for one tool call of the persona, without making it."""
        persona = get_object_or_404(personas_owned_by(request.user), uuid=uuid)
        data = ExplainInput(data=request.data)
        data.is_valid(raise_exception=True)
        found = explain(persona, data.validated_data["tool"], data.validated_data["args"])
        return Response(found.as_json())
