"""The hub's callback into Virgo: signed answers to confirmation requests.

Not session-based (the hub is a server, authenticated by an HMAC signature over the body), so
CSRF does not apply; the body is bounded before it is read.
"""

import json

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from channel.callbacks import CallbackRefused, answer_once
from channel.signing import HEADER, BadSignature, verify
from virgo.limits import address_retry_after
from virgo.methods import allow_methods


def _error(status: int, code: str, detail: str) -> JsonResponse:
    return JsonResponse({"error": code, "detail": detail}, status=status)


@csrf_exempt
@allow_methods("POST")
def decision_callback(request: HttpRequest) -> JsonResponse:
    # Counted before the body is read or a signature checked: both cost the server more than
    # the sender.
    retry_after = address_retry_after(
        request, group="virgo.channel-callback", rate=settings.VIRGO_CHANNEL_CALLBACK_RATE_LIMIT
    )
    if retry_after is not None:
        response = _error(429, "rate_limited", "too many callbacks from this address")
        response["Retry-After"] = str(retry_after)
        return response
    limit = settings.VIRGO_CHANNEL_CALLBACK_MAX_BYTES
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if not declared.isdigit() or int(declared) > limit:
        return _error(413, "payload_too_large", f"callback bodies are at most {limit} bytes")
    body = request.body
    if len(body) > limit:
        return _error(413, "payload_too_large", f"callback bodies are at most {limit} bytes")
    try:
        signed = verify(
            secret=settings.VIRGO_CHANNEL_SECRET,
            body=body,
            header=request.headers.get(HEADER, ""),
            tolerance=settings.VIRGO_CHANNEL_CALLBACK_TOLERANCE,
        )
    except BadSignature as exc:
        return _error(401, "bad_signature", str(exc))
    try:
        payload = json.loads(body)
    except ValueError:
        return _error(400, "invalid_json", "the body is not JSON")
    try:
        record = answer_once(
            payload, signed=signed, tolerance=settings.VIRGO_CHANNEL_CALLBACK_TOLERANCE
        )
    except CallbackRefused as refused:
        return _error(refused.status, refused.code, refused.detail)
    return JsonResponse({"correlation_id": record.correlation_id, "decision": record.decision})
