"""The owner's "New persona from an agent card" page, beside the persona pages: the admin face
of personas.card_import, whose refusals it shows on the field each concerns."""

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from personas.models import Agent, Persona, PersonaClass

if TYPE_CHECKING:
    from personas import card_import


class CardImportForm(forms.Form):
    url = forms.CharField(
        required=False, label="Card URL", help_text="http(s); a bare host means its well-known card"
    )
    file = forms.FileField(required=False, label="or a card file")
    agent = forms.ModelChoiceField(queryset=Agent.objects.none())
    address = forms.CharField(help_text="A registered address, e.g. work/core/reviewer")
    persona_class = forms.ChoiceField(label="Class", choices=PersonaClass.choices)

    def __init__(self, *args: Any, owner: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.owner = owner
        # Only the owner's own agents can be chosen: another's id is "not one of the choices".
        agent_field = self.fields["agent"]
        assert isinstance(agent_field, forms.ModelChoiceField)
        agent_field.queryset = Agent.objects.filter(owner=owner).order_by("name")

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean() or {}
        if bool(cleaned.get("url")) == bool(cleaned.get("file")):
            raise ValidationError("Give the card's URL or its file, one of the two.")
        return cleaned


class CardImportPage:
    """ "New persona from an agent card", beside the persona pages: a draft on one of the
    owner's own agents, its grant a proposal the owner then reviews (personas.card_import)."""

    def __init__(self, model_admin: admin.ModelAdmin) -> None:
        self.model_admin = model_admin

    def urls(self) -> list[URLPattern]:
        view = self.model_admin.admin_site.admin_view(self.view)  # type: ignore[arg-type]
        return [path("from-card/", view, name="personas_persona_from_card")]

    def view(self, request: HttpRequest) -> HttpResponse:
        if not (request.user.is_active and request.user.is_staff):
            raise PermissionDenied
        form = CardImportForm(request.POST or None, request.FILES or None, owner=request.user)
        if request.method == "POST" and form.is_valid():
            limited = self.model_admin.rate_limited(request)  # type: ignore[attr-defined]
            if limited is not None:
                return limited
            outcome = self._import(form)
            if outcome is not None:
                for skipped in outcome.mapping.unmapped:
                    self.model_admin.message_user(
                        request,
                        f"Not mapped: {skipped.id or skipped.name}: {skipped.reason}",
                        messages.WARNING,
                    )
                self.model_admin.message_user(
                    request,
                    f"Drafted {outcome.persona.name}: write its system prompt and confirm its "
                    "grant here.",
                    messages.SUCCESS,
                )
                return HttpResponseRedirect(
                    reverse("admin:personas_grantproposal_change", args=[outcome.proposal.pk])
                )
        context = {
            **self.model_admin.admin_site.each_context(request),
            "title": "New persona from an agent card",
            "opts": Persona._meta,
            "form": form,
        }
        return TemplateResponse(request, "admin/personas/persona/from_card.html", context)

    @staticmethod
    def _import(form: CardImportForm) -> "card_import.CardImport | None":
        """The draft, or None with each refusal on the form field it concerns: a problem of the
        card itself on the field that carried it (`url` or `file`)."""
        # Imported here: the A2A client it uses takes a tenth of a second, at every command's
        # start if the admin imported it (VX-OPS-10's start-up figure, make bench).
        from personas import card_import

        data = form.cleaned_data
        source = "file" if data["file"] else "url"
        try:
            if data["file"]:
                card = card_import.parse_card(data["file"].read(card_import.CARD_LIMIT + 1))
            else:
                # Only ever fetched as http(s), never opened as a path on the server.
                card = card_import.fetch_card(data["url"])
            return card_import.import_card(
                card,
                agent=data["agent"],
                actor=form.owner,
                persona_class=data["persona_class"],
                address=data["address"],
                source=data["file"].name if data["file"] else data["url"],
            )
        except card_import.CardImportError as refused:
            form.add_error(refused.field if refused.field in form.fields else source, str(refused))
        except PermissionDenied as refused:
            form.add_error(None, str(refused))
        except ValidationError as refused:
            if not hasattr(refused, "error_dict"):
                form.add_error(None, refused.messages)
                return None
            for field, problems in refused.message_dict.items():
                form.add_error(field if field in form.fields else None, problems)
        return None
