"""The admin's index says what each list holds (issue 43): every model it lists has a line in the
owner's words under its name, from virgo.admin_site.MODEL_DESCRIPTIONS. The index's order and its
sidebar are tests/test_owner_pages.py's; tests/test_browser_walk.py's first hour sees it at
1280 px."""

import pytest
from django.test import Client
from django.utils.html import escape

from tests.factories import make_owner

pytestmark = pytest.mark.django_db

DECISION_RECORDS = (
    "Calls that asked first: what a persona wanted to do, who was asked, and the answer"
)


def test_every_model_the_index_lists_says_what_its_list_holds() -> None:
    """VX-OPS-11, issue 43: a moderator's index lists every app; each model on it has a
    description, shown under its name, and the runtime's decision records say what they are in
    the owner's words. The runtime's own page shows the same lines."""
    client = Client()
    client.force_login(make_owner("moderator", is_superuser=True))
    index = client.get("/admin/")
    assert index.status_code == 200
    described = {
        model["model"]._meta.label: model["description"]
        for app in index.context["app_list"]
        for model in app["models"]
    }
    assert {"runtime.DecisionRecord", "auth.User", "oauth2_provider.Application"} <= set(described)
    assert not [label for label, description in described.items() if not description]
    page = index.content.decode()
    for description in described.values():
        assert f'<p class="model-description">{escape(description)}</p>' in page
    assert described["runtime.DecisionRecord"] == DECISION_RECORDS
    runtime = client.get("/admin/runtime/").content.decode()
    assert f'<p class="model-description">{escape(DECISION_RECORDS)}</p>' in runtime
