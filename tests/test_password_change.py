"""VX-SEC-17: the admin's password change is a door that checks a password, limited like the
login page; and a changed password ends what the old one opened: the account's API tokens and
its other sessions."""

import time
import uuid
from types import SimpleNamespace
from typing import Any

import django_ratelimit.core
import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from tests.factories import make_owner
from tests.owner_clients import PASSWORD, fresh_rate_limits, token_client  # noqa: F401 (autouse)

pytestmark = pytest.mark.django_db

CHANGE = "/admin/password_change/"
ATTACKER = "203.0.113.66"
NEW_PASSWORD = "a different horse entirely 9"


def signed_in_client(user: Any, address: str = ATTACKER) -> Client:
    client = Client(REMOTE_ADDR=address)
    response = client.post(
        "/admin/login/", {"username": user.username, "password": PASSWORD, "next": "/admin/"}
    )
    assert response.status_code == 302, response.content[:500]
    return client


def change(client: Client, old: str, new: str = NEW_PASSWORD) -> Any:
    return client.post(CHANGE, {"old_password": old, "new_password1": new, "new_password2": new})


def test_guessing_the_old_password_is_limited_like_sign_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-SEC-17, VX-SEC-4: a stolen session cannot guess the password behind it: wrong old
    passwords count against the sign-in budget, then even the right one is refused with the
    lockout page (429, Retry-After), and the login page is paused for that username too."""
    # A name of its own, so no budget of another test's owner is this one's; and a clock that
    # stands still, so the test cannot straddle the edge of a count's window (django-ratelimit's
    # windows are fixed, and a new one counts from zero).
    owner = make_owner(f"guesser-{uuid.uuid4().hex[:12]}")
    now = time.time()
    monkeypatch.setattr(django_ratelimit.core, "time", SimpleNamespace(time=lambda: now))
    client = signed_in_client(owner)
    statuses = [change(client, f"guess-{n}").status_code for n in range(8)]
    assert statuses[0] == 200 and 429 in statuses, statuses
    refused = change(client, PASSWORD)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "Too many failed sign-ins" in refused.content.decode()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)
    login = Client(REMOTE_ADDR="198.51.100.9").post(
        "/admin/login/", {"username": owner.username, "password": PASSWORD}
    )
    assert login.status_code == 429


def test_a_wrong_old_password_is_the_forms_own_error_below_the_limit() -> None:
    """VX-SEC-17: one mistake is answered as Django answers it, on the form."""
    owner = make_owner()
    response = change(signed_in_client(owner), "not it")
    assert response.status_code == 200
    assert "Your old password was entered incorrectly" in response.content.decode()


def test_a_password_change_rotates_api_tokens_and_ends_other_sessions() -> None:
    """VX-SEC-17: the old token answers 401, another browser signed in with the old password is
    signed out, the browser that made the change stays signed in."""
    owner = make_owner()
    old_token = token_client(owner)
    assert old_token.get("/api/agents/").status_code == 200
    elsewhere = signed_in_client(owner, "198.51.100.20")
    here = signed_in_client(owner)
    done = change(here, PASSWORD)
    assert (done.status_code, done["Location"]) == (302, "/admin/password_change/done/")
    assert not Token.objects.filter(user=owner).exists()
    assert old_token.get("/api/agents/").status_code == 401
    assert elsewhere.get("/admin/").status_code == 302
    assert here.get("/admin/").status_code == 200


def test_any_door_that_sets_a_password_rotates_the_tokens_and_a_sign_in_does_not() -> None:
    """VX-SEC-17: set_password anywhere (a command, the user admin) ends the tokens; a save that
    leaves the password as it was (last_login at each sign-in, a name) keeps them."""
    owner = make_owner()
    key = Token.objects.create(user=owner).key
    signed_in_client(owner)
    owner.first_name = "Ada"
    owner.save()
    assert Token.objects.filter(key=key).exists()
    user = get_user_model().objects.get(pk=owner.pk)
    user.set_password(NEW_PASSWORD)
    user.save()
    assert not Token.objects.filter(user=owner).exists()


def test_without_the_counts_no_old_password_is_checked() -> None:
    """VX-SEC-17, VX-REL-1: with the shared cache gone, the change answers 503 as sign-in does,
    and the password stays as it was."""
    owner = make_owner()
    client = signed_in_client(owner)
    failing = {"default": {"BACKEND": "tests.failing_caches.UnreachableCache"}}
    with override_settings(CACHES=failing):
        response = change(client, PASSWORD)
    assert response.status_code == 503
    assert "Sign-in is unavailable for a moment" in response.content.decode()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)
