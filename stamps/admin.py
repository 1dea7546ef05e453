"""Admin pieces for a persona's page: its generations, each stamp read-only, and their diff.

Nothing here is registered on its own: both are contributed to the persona's page
(personas.admin.personas.PersonaAdmin), which the records keep free of what is built on them.

Stamps are owner-private: the inline and both views show them only to the persona's owner and
to superusers (stamps.selectors.may_view_stamps); anyone else gets no rows and a 404.
"""

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join

from personas.admin.personas import PersonaAdmin
from personas.models import Generation, Persona
from stamps.models import stamp_file_state
from stamps.quarantine import is_quarantined, restore_command
from stamps.selectors import may_view_stamps, stamp_diff, stamp_document
from virgo.admin_permissions import NoEditsMixin


def _stamp_url(
    admin_site: admin.AdminSite, generation: Generation, other: int | None = None
) -> str:
    if other is None:
        return reverse(
            f"{admin_site.name}:personas_persona_stamp",
            args=[generation.persona_id, generation.number],
        )
    return reverse(
        f"{admin_site.name}:personas_persona_stamp_diff",
        args=[generation.persona_id, generation.number, other],
    )


class GenerationInline(NoEditsMixin, admin.TabularInline):
    """Every generation of the persona: number, time, hashes, standing or why not. Read-only."""

    model = Generation
    fields = ("number", "created_at", "standing_state", "composition_hash", "stamp_link")
    readonly_fields = fields
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False
    verbose_name = "generation"
    verbose_name_plural = "generations and capability stamps"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Generation]:
        # Not super(): it empties the queryset unless the user may view generations in general,
        # which nobody may. Whether this persona's rows show is decided per persona, below.
        return Generation.objects.select_related("stamp").order_by("-number")

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return isinstance(obj, Persona) and may_view_stamps(request.user, obj)

    @admin.display(description="standing")
    def standing_state(self, generation: Generation) -> str:
        if generation.standing is None:
            return "stamp owed (build pending)"
        if generation.standing:
            return "standing"
        reasons = format_html_join(
            "", "<li>{}</li>", ((r,) for r in generation.not_standing_reasons)
        )
        if is_quarantined(generation):
            # Which file and why are in the reasons (stamps.quarantine); this says what to do.
            return format_html(
                "<strong>QUARANTINED</strong> (card withdrawn, runtime refuses):<ul>{}</ul>"
                "Put the stored stamp back with <code>{}</code>, or make a new generation.",
                reasons,
                restore_command(generation.persona),
            )
        return format_html("not standing:<ul>{}</ul>", reasons)

    @admin.display(description="stamp")
    def stamp_link(self, generation: Generation) -> str:
        if not hasattr(generation, "stamp"):
            return "—"
        return format_html(
            '<a href="{}">{}</a>',
            _stamp_url(self.admin_site, generation),
            generation.stamp_hash[:16],
        )


class StampPages:
    """The read-only stamp page and the generation diff page of a persona's admin."""

    def __init__(self, model_admin: admin.ModelAdmin) -> None:
        self.admin_site = model_admin.admin_site

    def urls(self) -> list[URLPattern]:
        return [
            path(
                "<path:object_id>/generations/<int:number>/stamp/",
                self.admin_site.admin_view(self.stamp_view),  # type: ignore[arg-type]
                name="personas_persona_stamp",
            ),
            path(
                "<path:object_id>/generations/<int:number>/diff/<int:other>/",
                self.admin_site.admin_view(self.stamp_diff_view),  # type: ignore[arg-type]
                name="personas_persona_stamp_diff",
            ),
        ]

    def _visible_generation(self, request: HttpRequest, object_id: str, number: int) -> Generation:
        persona = Persona.objects.select_related("agent").filter(pk=unquote(object_id)).first()
        if persona is None or not may_view_stamps(request.user, persona):
            raise Http404("No such stamp.")
        generation = (
            persona.generations.select_related("stamp", "persona").filter(number=number).first()
        )
        if generation is None:
            raise Http404("No such generation.")
        return generation

    def _context(self, request: HttpRequest, generation: Generation, title: str) -> dict[str, Any]:
        persona = generation.persona
        return {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": Persona._meta,
            "original": persona,
            "persona": persona,
            "generation": generation,
        }

    def stamp_view(self, request: HttpRequest, object_id: str, number: int) -> HttpResponse:
        generation = self._visible_generation(request, object_id, number)
        context = self._context(
            request, generation, f"Capability stamp of {generation.persona}, generation {number}"
        )
        stamp = getattr(generation, "stamp", None)
        if stamp is not None:
            document = stamp_document(stamp)
            path = stamp.path
            file_state = stamp_file_state(generation)
            context.update(
                stamp=stamp,
                document=document,
                tools=document["tools"],
                pretty=json.dumps(document, indent=2, ensure_ascii=False),
                file_path=path,
                file_state=file_state,
                quarantined=is_quarantined(generation),
                restore_command=restore_command(generation.persona),
                others=[
                    (other, _stamp_url(self.admin_site, generation, other))
                    for other in generation.persona.generations.exclude(number=number)
                    .filter(stamp__isnull=False)
                    .order_by("-number")
                    .values_list("number", flat=True)
                ],
            )
        return TemplateResponse(request, "admin/stamps/stamp_detail.html", context)

    def stamp_diff_view(
        self, request: HttpRequest, object_id: str, number: int, other: int
    ) -> HttpResponse:
        generation = self._visible_generation(request, object_id, number)
        against = self._visible_generation(request, object_id, other)
        if not (hasattr(generation, "stamp") and hasattr(against, "stamp")):
            raise Http404("Both generations need a stamp to be compared.")
        old, new = sorted((generation, against), key=lambda g: g.number)
        diff = stamp_diff(stamp_document(old.stamp), stamp_document(new.stamp))
        context = self._context(
            request,
            generation,
            f"{generation.persona}: stamp of generation {old.number} → {new.number}",
        )
        context.update(old=old, new=new, diff=diff)
        return TemplateResponse(request, "admin/stamps/stamp_diff.html", context)


PersonaAdmin.contributed_inlines.append(GenerationInline)
PersonaAdmin.contributed_urls.append(lambda model_admin: StampPages(model_admin).urls())
