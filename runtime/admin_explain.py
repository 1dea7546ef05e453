"""The persona's "Try a call" page in the admin: runtime.explain for one call, as a page; and
the diff page's list of the persona's policy vectors a grant proposal would change.

Contributed to the persona's admin (personas.admin.personas.PersonaAdmin.contributed_urls), as the
stamp pages and the card import are, so the records never import the runtime. The view is thin: the
form reads the tool and the arguments, runtime.explain answers, the template shows the answer.
Nothing is written (no record, no file, no rate-limit count: nothing changes), nobody is asked
and the tool does not run.

Who may open it: the persona's owner and moderators (superusers), as for its stamps; other
staff get a 404, as for any persona they cannot see, and anyone not staff a 403.
"""

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from personas import services
from personas.admin.personas import PersonaAdmin
from personas.admin.proposals import GrantProposalAdmin
from personas.catalogue import VERBS
from personas.models import GrantProposal, Persona
from personas.selectors import personas_visible_to
from runtime import vectors
from runtime.confirmations import key_values
from runtime.explain import Explanation, explain
from runtime.rules import RULES
from runtime.stamp import StampUnavailable, load_active_stamp
from stamps.vectors import PersonaUnexplainable

# The tools a global boundary governs: every tool of the rule table's examples and each verb
# the catalogue puts behind a boundary. Offered beside the stamp's, so an owner can ask what
# a boundary does to a tool the persona has not got (the answer: refused, not in the stamp).
BOUNDARY_TOOLS: tuple[str, ...] = tuple(
    sorted(
        {example.tool for rule in RULES for example in (*rule.match, *rule.not_match)}
        | {verb.name for verb in VERBS if verb.boundary is not None}
    )
)

VERDICT_WORDS = {
    "allow": "Allowed: the tool would run.",
    "confirm": "Asked first: the call would wait for a confirmation.",
    "deny": "Denied: the call would be refused, whatever anyone answered.",
    "refused": "Refused before any rule was applied.",
}

CONSUMER_WORDS = (
    ("mcp_server", "MCP server's tool list"),
    ("launcher_allowlist", "launcher's allowlist"),
    ("handler_table", "handler's table"),
)


class TryCallForm(forms.Form):
    tool = forms.ChoiceField(
        help_text="The tools of the persona's current stamp, and the tools a global boundary "
        "governs."
    )
    arguments = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "cols": 60, "spellcheck": "false"}),
        help_text='A JSON object, e.g. {"path": "QUEUE.md"}. Empty means no arguments.',
    )

    def __init__(self, *args: Any, stamp_tools: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        others = [name for name in BOUNDARY_TOOLS if name not in stamp_tools]
        choices: list[tuple[str, Any]] = []
        if stamp_tools:
            choices.append(("In the persona's stamp", [(name, name) for name in stamp_tools]))
        choices.append(
            ("Governed by a global boundary, not in the stamp", [(n, n) for n in others])
        )
        field = self.fields["tool"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices

    def clean_arguments(self) -> dict[str, Any]:
        text = self.cleaned_data["arguments"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"Arguments are not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).",
                code="not_json",
            ) from None
        if not isinstance(value, dict):
            kind = {list: "a list", str: "a string", bool: "true or false"}.get(
                type(value), "a number" if isinstance(value, int | float) else "null"
            )
            raise ValidationError(
                f'Arguments must be a JSON object such as {{"path": "QUEUE.md"}}, not {kind}.',
                code="not_object",
            )
        return value


def stamp_tools(persona: Persona) -> list[str]:
    """The tools of the persona's current stamp, read as explain reads it; none if it has no
    usable stamp (explain then says why for every tool)."""
    try:
        return sorted(load_active_stamp(persona, dry_run=True).tools)
    except StampUnavailable:
        return []


def shown(found: Explanation) -> dict[str, Any]:
    """The explanation as the template lays it out: words for each part, no JSON."""
    rule = found.rule
    operation = found.operation
    return {
        "verdict": found.verdict,
        "verdict_words": VERDICT_WORDS.get(found.verdict, found.verdict),
        "refused_because": found.refused_because,
        "code": found.code,
        "reason": found.reason,
        "consumers": (
            [(label, found.consumers[key]) for key, label in CONSUMER_WORDS]
            if found.consumers is not None
            else None
        ),
        "rule": {
            "kind": rule.get("kind"),
            "id": rule.get("id"),
            "boundary": rule.get("boundary"),
            "learned_choice": rule.get("learned_choice"),
            "layer": rule.get("layer"),
            "asked_under": rule.get("asked_under"),
        },
        "confirmation": found.confirmation,
        "operation": (
            {
                "action": operation["handler_action"],
                "keys": key_values(
                    {"target": operation["target_scope"], "shape": operation["shape"]}
                ),
            }
            if operation is not None
            else None
        ),
        "stamp": found.stamp,
        "notes": found.notes,
    }


class TryCallPage:
    """`<persona>/try/` beside the persona's change page."""

    def __init__(self, model_admin: admin.ModelAdmin) -> None:
        self.model_admin = model_admin

    def urls(self) -> list[URLPattern]:
        view = self.model_admin.admin_site.admin_view(self.view)  # type: ignore[arg-type]
        return [path("<path:object_id>/try/", view, name="personas_persona_try")]

    def view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not (request.user.is_active and request.user.is_staff):
            raise PermissionDenied
        try:
            persona = (
                personas_visible_to(request.user)
                .select_related("agent__owner")
                .filter(pk=int(unquote(object_id)))
                .first()
            )
        except ValueError:
            persona = None
        if persona is None:
            raise Http404("No such persona.")
        tools = stamp_tools(persona)
        data = request.POST if request.method == "POST" else None
        initial = {"tool": request.GET.get("tool", tools[0] if tools else "")}
        form = TryCallForm(data, initial=initial, stamp_tools=tools)
        found = None
        if form.is_valid():
            found = explain(persona, form.cleaned_data["tool"], form.cleaned_data["arguments"])
        context = {
            **self.model_admin.admin_site.each_context(request),
            "title": f"Try a call of {persona.name}",
            "opts": Persona._meta,
            "original": persona,
            "persona": persona,
            "persona_url": reverse("admin:personas_persona_change", args=[persona.pk]),
            "form": form,
            "tried": {"tool": form.cleaned_data["tool"]} if found else None,
            "answer": shown(found) if found else None,
        }
        return TemplateResponse(request, "admin/personas/persona/try_call.html", context)


def proposal_vectors(request: HttpRequest, proposal: GrantProposal) -> str:
    """The diff page's section: which of the persona's policy vectors (those its current grant
    gives, as `virgo stamp vectors` exports them) the pending proposal would decide otherwise,
    each from -> to. runtime.vectors computes it; nothing is written."""
    if not proposal.decidable:
        return ""
    context: dict[str, Any] = {"proposal": proposal}
    proposed = services.proposal_next_generation(proposal=proposal, actor=request.user)
    if proposed is None:
        context["unavailable"] = "approving it would make no generation now"
    else:
        try:
            replayed = vectors.what_a_proposal_changes(proposal.persona, proposed)
        except PersonaUnexplainable as exc:
            context["unavailable"] = f"the persona has no current grant to draw them from: {exc}"
        else:
            if replayed is None:
                context["unavailable"] = "the next stamp would not stand"
            else:
                context["replay"] = replayed
                context["changed"] = [
                    {
                        "id": change.id,
                        "tool": change.tool,
                        "arguments": key_values({"shape": {"arguments": change.arguments}}),
                        "before": change.expected,
                        "after": change.now,
                    }
                    for change in replayed.changed
                ]
    return render_to_string("admin/personas/grantproposal/vectors.html", context, request)


PersonaAdmin.contributed_urls.append(lambda model_admin: TryCallPage(model_admin).urls())
GrantProposalAdmin.contributed_sections.append(proposal_vectors)
