"""The directory as a page, for a signed-in person with a browser (issue 24).

The same request, filters, pages and refusals as the JSON (cards.api.DirectoryView): a browser
asks for text/html and gets this rendering of the answer; a client that asks for JSON, or for
anything, gets JSON. Nothing is read here that the JSON does not hold, but the skill map: the
skill filter offers its skills by name, as the cards show them, and sends their ids.
"""

from typing import Any

from django.contrib import admin
from django.template import loader
from rest_framework import renderers

from cards.filters import MAX_VALUES
from personas.models import Skill


class DirectoryPageRenderer(renderers.BaseRenderer):
    media_type = "text/html"
    format = "html"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> str:
        context = renderer_context or {}
        request, response = context["request"], context["response"]
        status = response.status_code
        query = request.query_params
        page = {
            **admin.site.each_context(request),
            "title": "Directory",
            "status": status,
            "entries": data.get("results", []) if status == 200 else [],
            "next": data.get("next") if status == 200 else None,
            "previous": data.get("previous") if status == 200 else None,
            "problems": _problems(data) if status >= 400 else [],
            "signed_out": status in (401, 403) and not request.user.is_authenticated,
            "skills": query.getlist("skill")[:MAX_VALUES],
            "skill_map": list(Skill.objects.order_by("name").values_list("slug", "name")),
            "tags": query.getlist("tag")[:MAX_VALUES],
            "provider": query.get("provider", ""),
            "q": query.get("q", ""),
        }
        return loader.render_to_string("cards/directory.html", page, request=request._request)


def _problems(data: Any) -> list[str]:
    """A refusal in words: its detail, or each parameter named with what is wrong with it."""
    if not isinstance(data, dict):
        return [str(data)]
    if "detail" in data:
        return [str(data["detail"])]
    return [
        f"{name}: {'; '.join(map(str, reasons))}"
        for name, reasons in data.items()
        if isinstance(reasons, list)
    ]
