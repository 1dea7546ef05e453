"""The owners' mutation rate limit, shared by the API and the admin (SPEC-0009 S9-RL-3).

"Owner mutation endpoints inherit the human web UI's session rate limits": one budget per
signed-in user, counted over every state-changing request to the owner surfaces (API writes,
admin saves, deletes, actions and discoverability toggles), VIRGO_MUTATION_RATE_LIMIT per
window. Counting uses django-ratelimit on the shared cache, so it holds across processes when
Redis is configured; while Redis is unreachable each process counts alone (virgo.limits), and
the owner's change goes through as usual.
"""

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit import UNSAFE

from virgo import limits

GROUP = "virgo.owner-mutation"


def mutation_retry_after(request: HttpRequest) -> int | None:
    """Count this request against its user's budget; the seconds to wait when it is spent.

    Returns None when the request is allowed (or is not a mutation). Callers answer 429 with
    Retry-After set to the returned value.
    """
    return limits.retry_after(
        request, group=GROUP, key="user", rate=settings.VIRGO_MUTATION_RATE_LIMIT, method=UNSAFE
    )
