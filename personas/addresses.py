"""The grammar of canonical registered addresses (root/workspace/project/role hierarchy).

`root/<role>` is the reserved root: two segments only. `<workspace>/<role>` is a scope-wide
role; `<workspace>/<project>/<role>` is a project duty. Every segment is a lowercase slug.
Nothing here invents an address: callers pass one, and it must also be registered.
"""

import re

from django.core.exceptions import ValidationError

ROOT_WORKSPACE = "root"
FIRST_PERSONA_ADDRESS = "root/secretary"
FIRST_PERSONA_NAME = "Secretary"

_SLUG = r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?"
_SEGMENT = re.compile(rf"^{_SLUG}$")
# The shape alone (2 or 3 slugs), as the API's schema states it; the rules of `root` are below.
ADDRESS_SHAPE = rf"^{_SLUG}(?:/{_SLUG}){{1,2}}$"


def address_problem(path: object) -> str | None:
    """Why `path` is not a canonical address, or None when it is."""
    if not isinstance(path, str) or not path:
        return "an address is required (the factory has no default address)"
    segments = path.split("/")
    if len(segments) not in (2, 3):
        return (
            f"address {path!r} must have 2 segments (root or scope-wide role) "
            f"or 3 (project duty), not {len(segments)}"
        )
    for segment in segments:
        if not _SEGMENT.match(segment):
            return f"address {path!r} has a non-canonical segment {segment!r} (lowercase slug)"
    if segments[0] == ROOT_WORKSPACE and len(segments) != 2:
        return f"address {path!r}: the reserved root takes exactly two segments (root/<role>)"
    if ROOT_WORKSPACE in segments[1:]:
        return f"address {path!r}: 'root' is reserved for the first segment"
    return None


def validate_address(path: object) -> str:
    problem = address_problem(path)
    if problem:
        raise ValidationError({"address": [problem]})
    assert isinstance(path, str)
    return path
