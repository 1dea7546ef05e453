"""The virgo-channel adapter: the one HTTP client Virgo talks to the hub with.

Every request carries `Idempotency-Key: <correlation id>`; the hub applies a key once per route
and answers a repeat with the stored response, so a retry (ours, or a persona's repeated call
under the same correlation id) never applies anything twice. Connection errors, timeouts and 5xx
answers are retried with capped exponential backoff and jitter, a bounded number of times; what
is still unanswered after that is `unknown`, never success.

The hub credential (VIRGO_CHANNEL_TOKEN) comes from settings only. Nothing this module reports
(reasons, log lines) is built from strings it did not make itself: exception texts can carry
URLs and hub error bodies can echo headers, so only status codes, exception kinds and
slug-shaped error codes of the hub ever leave it.
"""

import json
import logging
import random
import re
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import httpx
from django.conf import settings

logger = logging.getLogger("virgo.channel")

PROTOCOL_PREFIX = "/v1"
_SLUG = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
# Answers that say the hub did not (or may not have) finished: worth another attempt.
_RETRY_STATUSES = frozenset({408, 425, 429})


class Outcome(StrEnum):
    OK = "ok"
    REJECTED = "rejected"
    UNAUTHORIZED = "unauthorized"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class HubReply:
    """What one logical request came to, after retries.

    OK: a 2xx, the hub did it (or had already done it under this key). REJECTED: a 4xx, the hub
    refused and did nothing. UNAUTHORIZED: the hub refused Virgo's credential, nothing was done.
    UNKNOWN: no answer could be had; the request may or may not have been applied.
    """

    outcome: Outcome
    reason: str
    attempts: int
    status_code: int | None = None
    body: dict[str, Any] = field(default_factory=dict)


class ChannelNotConfigured(Exception):
    """VIRGO_CHANNEL_URL is not set: no human surface can be reached."""


def hub_code(value: object, default: str) -> str:
    """A hub-supplied reason, if it has the shape of an error code; otherwise `default`."""
    return value if isinstance(value, str) and _SLUG.match(value) else default


@dataclass(frozen=True, slots=True)
class ChannelClient:
    base_url: str
    token: str = ""
    timeout: float = 5.0
    retries: int = 3
    backoff: float = 0.25
    backoff_max: float = 4.0

    @classmethod
    def from_settings(cls) -> "ChannelClient":
        if not settings.VIRGO_CHANNEL_URL:
            raise ChannelNotConfigured("VIRGO_CHANNEL_URL is not set: the hub cannot be reached")
        return cls(
            base_url=settings.VIRGO_CHANNEL_URL,
            token=settings.VIRGO_CHANNEL_TOKEN,
            timeout=settings.VIRGO_CHANNEL_TIMEOUT,
            retries=max(0, settings.VIRGO_CHANNEL_RETRIES),
            backoff=settings.VIRGO_CHANNEL_BACKOFF,
            backoff_max=settings.VIRGO_CHANNEL_BACKOFF_MAX,
        )

    def post(self, path: str, body: dict[str, Any], *, idempotency_key: str) -> HubReply:
        content = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        return self._request("POST", path, idempotency_key, content=content)

    def get(
        self, path: str, *, idempotency_key: str, params: dict[str, Any] | None = None
    ) -> HubReply:
        return self._request("GET", path, idempotency_key, params=params)

    def _headers(self, idempotency_key: str) -> dict[str, str]:
        headers = {
            "Idempotency-Key": idempotency_key,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _request(
        self,
        method: str,
        path: str,
        idempotency_key: str,
        *,
        content: bytes | None = None,
        params: dict[str, Any] | None = None,
    ) -> HubReply:
        route = PROTOCOL_PREFIX + path
        attempts = self.retries + 1
        reason = "no_attempt"
        status: int | None = None
        with httpx.Client(
            base_url=self.base_url, timeout=self.timeout, follow_redirects=False
        ) as client:
            for attempt in range(1, attempts + 1):
                try:
                    response = client.request(
                        method,
                        route,
                        content=content,
                        params=params,
                        headers=self._headers(idempotency_key),
                    )
                except httpx.TimeoutException:
                    reason, status = "timeout", None
                except httpx.ConnectError:
                    reason, status = "hub_unreachable", None
                except httpx.TransportError:
                    reason, status = "connection_lost", None
                else:
                    status = response.status_code
                    if status < 500 and status not in _RETRY_STATUSES:
                        return self._answer(response, attempt)
                    reason = f"hub_error_{status}"
                logger.warning(
                    "virgo-channel %s %s attempt %d/%d: %s (key %s)",
                    method,
                    route,
                    attempt,
                    attempts,
                    reason,
                    idempotency_key,
                )
                if attempt < attempts:
                    time.sleep(self._delay(attempt))
        return HubReply(Outcome.UNKNOWN, reason, attempts, status)

    def _delay(self, attempt: int) -> float:
        """Capped exponential backoff with jitter: half fixed, half random, never zero."""
        cap = min(self.backoff_max, self.backoff * 2 ** (attempt - 1))
        return cap / 2 + random.uniform(0, cap / 2)

    def _answer(self, response: httpx.Response, attempt: int) -> HubReply:
        try:
            parsed = response.json()
        except ValueError:
            parsed = {}
        body = parsed if isinstance(parsed, dict) else {}
        status = response.status_code
        if status < 400:
            return HubReply(Outcome.OK, "ok", attempt, status, body)
        if status in (401, 403):
            return HubReply(Outcome.UNAUTHORIZED, "hub_refused_credentials", attempt, status)
        reason = hub_code(body.get("error"), f"hub_rejected_{status}")
        return HubReply(Outcome.REJECTED, reason, attempt, status)
