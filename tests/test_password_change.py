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
from django.contrib.auth.hashers import make_password
from django.core import serializers
from django.db import connection
from django.db.models.signals import pre_save
from django.test import Client, RequestFactory, override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from tests.factories import make_owner
from tests.owner_clients import PASSWORD, fresh_rate_limits, token_client  # noqa: F401 (autouse)
from virgo import passwords

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
    # Django's own error, code and all: what reads the form (a template, a client) tells it
    # from the new password's validation errors by that code.
    assert response.context["form"].has_error("old_password", "password_incorrect")


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
    assert int(response["Retry-After"]) > 0
    assert "Sign-in is unavailable for a moment" in response.content.decode()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def still_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """django-ratelimit's windows are fixed and a new one counts from zero: a clock that stands
    still keeps a test from straddling the edge of one."""
    now = time.time()
    monkeypatch.setattr(django_ratelimit.core, "time", SimpleNamespace(time=lambda: now))


@override_settings(VIRGO_SIGNIN_FAILURES_PER_ADDRESS=3, VIRGO_SIGNIN_FAILURES_PER_USERNAME=50)
def test_old_passwords_guessed_from_one_address_spend_that_addresss_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-SEC-17, VX-SEC-4: the form's wrong old passwords count against the address as well as
    the username, as a sign-in's do; once the address's budget is spent, the change (right
    password or not) gets the lockout page, and so does another account's sign-in from there."""
    still_clock(monkeypatch)
    address = "203.0.113.71"
    owner = make_owner(f"address-{uuid.uuid4().hex[:12]}")
    client = signed_in_client(owner, address)
    assert [change(client, f"guess-{n}").status_code for n in range(3)] == [200, 200, 200]
    refused = change(client, PASSWORD)
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.content.decode()
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)
    other = make_owner(f"bystander-{uuid.uuid4().hex[:12]}")
    login = Client(REMOTE_ADDR=address).post(
        "/admin/login/", {"username": other.username, "password": PASSWORD}
    )
    assert login.status_code == 429


@override_settings(VIRGO_SIGNIN_FAILURES_PER_ADDRESS=3, VIRGO_SIGNIN_FAILURES_PER_USERNAME=50)
def test_an_address_locked_by_other_usernames_cannot_change_a_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-SEC-17, VX-SEC-4: the change is held to the address's budget before any password is
    checked, whichever usernames spent it: the lockout page, not the form's error."""
    still_clock(monkeypatch)
    address = "203.0.113.72"
    owner = make_owner(f"locked-{uuid.uuid4().hex[:12]}")
    client = signed_in_client(owner, address)
    guesser = Client(REMOTE_ADDR=address)
    for n in range(3):
        guesser.post("/admin/login/", {"username": f"nobody-{n}", "password": "x"})
    refused = change(client, PASSWORD)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)


def test_the_form_is_bound_as_djangos_password_change_form_is() -> None:
    """VX-SEC-17: the form stands in for Django's AdminPasswordChangeForm, so it takes its data
    the way any Django form does (first, by position) and checks the old password with it."""
    owner = make_owner()
    request = RequestFactory().post(CHANGE, REMOTE_ADDR="198.51.100.30")
    data = {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    right = passwords.LimitedPasswordChangeForm(owner, data, request=request)
    assert right.is_valid(), right.errors
    wrong = passwords.LimitedPasswordChangeForm(
        owner, {**data, "old_password": "not it"}, request=request
    )
    assert not wrong.is_valid()
    assert wrong.has_error("old_password", "password_incorrect")


def test_connect_ties_the_rotation_to_the_user_model_alone() -> None:
    """VX-SEC-17: connect() (run when the app is ready) is what makes any saved password change
    rotate the tokens; it listens to the user model only, so saving anything else (a token
    itself) is none of its business."""
    user_model = get_user_model()
    owner = make_owner()
    # Unhooked first, so that what follows shows connect() itself doing the hooking.
    pre_save.disconnect(passwords.end_what_the_old_password_opened, sender=user_model)
    try:
        key = Token.objects.create(user=owner).key
        owner.set_password("changed while unhooked 1")
        owner.save()
        assert Token.objects.filter(key=key).exists()
        passwords.connect()
        Token.objects.filter(key=key).delete()
        key = Token.objects.create(user=owner).key
        owner.set_password(NEW_PASSWORD)
        owner.save()
        assert not Token.objects.filter(key=key).exists()
    finally:
        # Hooked again whatever happened above, so no later test runs without the rotation.
        pre_save.connect(passwords.end_what_the_old_password_opened, sender=user_model)


def test_a_save_that_leaves_the_password_out_keeps_the_tokens_and_reads_nothing() -> None:
    """VX-SEC-17: a save naming its fields without the password stores no new password (a
    set_password not saved changes nothing) and, as each sign-in's last_login save is one,
    costs no look-up; a save naming the password does rotate the tokens."""
    owner = make_owner()
    key = Token.objects.create(user=owner).key
    owner.set_password(NEW_PASSWORD)
    owner.first_name = "Ada"
    owner.save(update_fields=["first_name"])
    assert Token.objects.filter(key=key).exists()
    with CaptureQueriesContext(connection) as queries:
        owner.save(update_fields=["last_login"])
    assert len(queries) == 1, [query["sql"] for query in queries]
    owner.save(update_fields=["password"])
    assert not Token.objects.filter(key=key).exists()


def password_reads(queries: CaptureQueriesContext) -> list[str]:
    return [
        query["sql"]
        for query in queries
        if query["sql"].startswith("SELECT") and '"password"' in query["sql"]
    ]


def test_saves_with_no_stored_password_to_compare_read_none() -> None:
    """VX-SEC-17: a new account has no old password, and a fixture's raw save must not read the
    database (Django's rule for pre_save while loading data): neither looks one up."""
    with CaptureQueriesContext(connection) as queries:
        owner = make_owner()
    assert password_reads(queries) == []
    owner.password = "pbkdf2_sha256$1$salt$notarealhash="
    (fixture,) = serializers.deserialize("json", serializers.serialize("json", [owner]))
    with CaptureQueriesContext(connection) as queries:
        fixture.save()
    assert password_reads(queries) == []


# The installation moved to a stronger hasher since these accounts last set a password: their
# stored hashes are MD5's, which Django rehashes at the next sign-in.
STRONGER_HASHER = override_settings(
    PASSWORD_HASHERS=[
        "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        "django.contrib.auth.hashers.MD5PasswordHasher",
    ]
)


def test_a_sign_in_that_rehashes_the_same_password_keeps_the_tokens() -> None:
    """VX-SEC-17: Django storing the password just verified under the current hasher is no
    change of password: the sign-in rehashes it and the account's token still answers."""
    owner = make_owner()
    assert owner.password.startswith("md5$")
    api = token_client(owner)
    with STRONGER_HASHER:
        signed_in_client(owner)
        owner.refresh_from_db()
        assert owner.password.startswith("pbkdf2_sha256$")
        assert owner.check_password(PASSWORD)
    assert api.get("/api/agents/").status_code == 200


@pytest.mark.parametrize(
    "new_password",
    [
        pytest.param(lambda user: user.set_password(PASSWORD), id="set_password-of-the-same"),
        pytest.param(lambda user: user.set_password(NEW_PASSWORD), id="set_password"),
        pytest.param(lambda user: user.set_unusable_password(), id="unusable"),
        pytest.param(
            lambda user: setattr(user, "password", make_password(NEW_PASSWORD, hasher="md5")),
            id="another-hash-under-the-old-hasher",
        ),
        pytest.param(
            lambda user: setattr(user, "password", "pbkdf2_sha256$1000$salt$notarealhash="),
            id="a-hash-the-current-hasher-would-replace",
        ),
    ],
)
def test_what_only_looks_like_a_rehash_ends_the_tokens(new_password: Any) -> None:
    """VX-SEC-17: from an outdated hash, any store that is not Django's own rehash (set_password,
    even of the same password, which marks itself a change; an unusable password; a hash the
    current hasher would not keep) deletes the tokens."""
    owner = make_owner()
    key = Token.objects.create(user=owner).key
    with STRONGER_HASHER:
        new_password(owner)
        owner.save()
    assert not Token.objects.filter(key=key).exists()


def test_a_stored_current_hash_is_never_rehashed() -> None:
    """VX-SEC-17: a hash the current hasher keeps is never Django's to replace, so any other
    hash stored over it is a change, whoever set it."""
    owner = make_owner()
    key = Token.objects.create(user=owner).key
    owner.password = make_password(NEW_PASSWORD)
    owner.save()
    assert not Token.objects.filter(key=key).exists()


@pytest.mark.parametrize(
    "stored", ["legacy$not-a-known-hash", make_password(None)], ids=["unknown", "unusable"]
)
def test_a_hash_over_one_no_hasher_reads_is_a_change(stored: str) -> None:
    """VX-SEC-17: a stored value no configured hasher identifies (an import's, a hand-edited
    row's, an unusable password: an account that signed in only through its identity provider)
    is never taken for one Django rehashed: what is stored over it ends the tokens."""
    owner = make_owner()
    key = Token.objects.create(user=owner).key
    type(owner).objects.filter(pk=owner.pk).update(password=stored)
    owner.password = make_password(NEW_PASSWORD)
    owner.save()
    assert not Token.objects.filter(key=key).exists()
