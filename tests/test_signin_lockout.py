"""Password sign-in is limited per username and per source address (VX-SEC-4): the admin's login
page and the token endpoint stop answering a password guesser, say so clearly, and the lockout
can be lifted by `virgo signin unlock`."""

import os
import re
import shlex
import stat
import subprocess
import sys
import time
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import django_ratelimit.core
import pytest
from django.contrib import admin
from django.contrib.auth import authenticate
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AnonymousUser
from django.core.cache import caches
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, RequestFactory, override_settings
from prometheus_client import REGISTRY
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from personas import api
from tests.admin_support import assert_secure_html
from tests.factories import make_owner
from tests.failing_caches import went_without
from tests.live import REPO, RedisServer
from tests.owner_clients import PASSWORD, fresh_rate_limits  # noqa: F401 (autouse fixture)
from virgo import signin
from virgo.outages import SHARED_CACHE
from virgo.settings import redis_cache

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
TOKEN = "/api/auth/token/"
ATTACKER = "203.0.113.66"
VIRGO = Path(sys.executable).with_name("virgo")


@pytest.fixture(autouse=True)
def still_rate_limit_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every count of a test happens at one instant: django-ratelimit's windows are fixed, and
    a window's edge passing mid-test starts its budgets from zero, which once let a guess
    through after the lockout. A test that needs another instant sets its own."""
    now = time.time()
    monkeypatch.setattr(django_ratelimit.core, "time", SimpleNamespace(time=lambda: now))


def sign_in(client: Client, username: str, password: str) -> Any:
    return client.post(LOGIN, {"username": username, "password": password, "next": "/admin/"})


def signed_in(response: Any) -> bool:
    return response.status_code == 302 and response["Location"] == "/admin/"


def guess(username: str, *, address: str = ATTACKER, times: int = 25) -> list[int]:
    client = Client(REMOTE_ADDR=address)
    return [sign_in(client, username, f"guess-{n}").status_code for n in range(times)]


def test_25_wrong_passwords_then_the_right_one_is_refused_for_the_username_and_the_address() -> (
    None
):
    """VX-SEC-4: the admin answers the first failures as wrong passwords, then pauses sign-in for
    that username and that address: the right password is refused too, with a clear 429 page
    under the site's headers. Another username from another address still signs in."""
    ada, grace, alan = make_owner(), make_owner(), make_owner()
    statuses = guess(ada.username)
    assert statuses[:5] == [200] * 5
    assert statuses[5:] == [429] * 20

    refusals = refusals_counted()
    refused = sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD)
    assert refused.status_code == 429
    assert refusals_counted() == refusals + 1
    assert_secure_html(refused)
    assert 0 < int(refused["Retry-After"]) <= 900
    assert "no-cache" in refused["Cache-Control"]
    page = refused.content.decode()
    assert "Too many failed sign-ins for this username or from this address" in page
    assert "virgo signin unlock" in page
    # The admin's own page, its title, and the pause in whole minutes rounded up.
    minutes = -(-int(refused["Retry-After"]) // 60)
    assert f"try again in {minutes} minute{'s' if minutes != 1 else ''}." in page
    assert f"<title>Sign-in paused | {admin.site.site_title}</title>" in page
    assert f'<div id="site-name"><a href="/admin/">{admin.site.site_header}</a>' in page
    assert '<button class="theme-toggle">' in page
    assert "_auth_user_id" not in Client(REMOTE_ADDR=ATTACKER).session

    # The username, from anywhere; the address, for anyone.
    assert sign_in(Client(REMOTE_ADDR="198.51.100.7"), ada.username, PASSWORD).status_code == 429
    assert sign_in(Client(REMOTE_ADDR=ATTACKER), grace.username, PASSWORD).status_code == 429
    other = Client(REMOTE_ADDR="198.51.100.8")
    assert signed_in(sign_in(other, alan.username, PASSWORD))
    assert other.get("/admin/").status_code == 200


def refusals_counted() -> float:
    return (
        REGISTRY.get_sample_value("virgo_rate_limit_refusals_total", {"limit": "virgo.signin"})
        or 0.0
    )


@pytest.mark.parametrize(
    ("seconds", "said"), [(60, "1 minute."), (61, "2 minutes."), (899, "15 minutes.")]
)
def test_the_pause_is_said_in_whole_minutes_rounded_up(seconds: int, said: str) -> None:
    """VX-SEC-4: a pause of a minute and a second is said as two minutes, never as less than it
    is; Retry-After keeps the exact seconds."""
    request = RequestFactory().post(LOGIN)
    request.user = AnonymousUser()
    page = signin.locked_out_page(request, seconds)
    assert f"try again in {said}" in page.render().content.decode()
    assert page["Retry-After"] == str(seconds)


def test_connecting_the_failure_counter_again_counts_each_failure_once() -> None:
    """VX-SEC-4: the app connects the failure counter when it starts; connecting it again keeps
    the one receiver, so the budget is still five failures, not fewer."""
    signin.connect()
    ada = make_owner()
    assert guess(ada.username, times=6) == [200] * 5 + [429]


def test_a_sign_in_under_the_limit_is_unaffected() -> None:
    """VX-SEC-4: a few mistyped passwords, then the right one, signs in; successful sign-ins
    never count, however many, nor clear the failures before them (or an attacker could clear
    an address's count by signing in to an account of their own)."""
    ada = make_owner()
    assert guess(ada.username, times=4) == [200] * 4
    client = Client(REMOTE_ADDR=ATTACKER)
    assert signed_in(sign_in(client, ada.username, PASSWORD))
    for _ in range(30):
        assert signed_in(sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD))
    assert guess(ada.username, times=1) == [200]
    assert sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD).status_code == 429


def test_the_username_budget_ignores_case_and_the_address_budget_rotating_usernames(
    settings: Any,
) -> None:
    """VX-SEC-4: `ADA` and `ada` share a budget; trying many usernames from one address spends
    the address's budget (VIRGO_SIGNIN_FAILURES_PER_ADDRESS) even though no username's is."""
    ada = make_owner("ada")
    assert guess("ADA", times=5) == [200] * 5
    assert sign_in(Client(REMOTE_ADDR="198.51.100.7"), "ada", PASSWORD).status_code == 429
    settings.VIRGO_SIGNIN_FAILURES_PER_ADDRESS = 6
    for name in ("u1", "u2", "u3"):
        assert guess(name, address="192.0.2.9", times=2) == [200, 200]
    assert guess("u4", address="192.0.2.9", times=1) == [429]
    assert ada.is_active


def test_an_address_lifted_alone_and_authenticate_sees_the_address(settings: Any) -> None:
    """VX-SEC-4: a spent address stops authenticate() itself for any username asked from it (the
    request's address counts, not only the username); lifting the address alone, where no
    username was ever lifted, lets the next owner from there sign in."""
    settings.VIRGO_SIGNIN_FAILURES_PER_ADDRESS = 4
    for name in ("u1", "u2"):
        assert guess(name, times=2) == [200, 200]
    grace = make_owner()
    from_attacker = RequestFactory().post(LOGIN, REMOTE_ADDR=ATTACKER)
    assert authenticate(from_attacker, username=grace.username, password=PASSWORD) is None
    # The four failures, and the refused authenticate() as a fifth.
    assert signin.lift(signin.Budget(signin.ADDRESS, ATTACKER)) == 5
    assert authenticate(from_attacker, username=grace.username, password=PASSWORD) == grace
    assert signed_in(sign_in(Client(REMOTE_ADDR=ATTACKER), grace.username, PASSWORD))


def test_a_sign_in_with_no_username_spends_no_accounts_budget() -> None:
    """VX-SEC-4: a form posted without a username is counted under the empty name, which no
    account can have, so it never spends an owner's budget."""
    assert signin.normal_username(None) == "" == signin.normal_username("  ")
    assert [budget.value for budget in signin.budgets(None, None)] == [""]


def test_a_request_with_no_peer_address_still_counts_its_username() -> None:
    """VX-SEC-4: behind a Unix socket there is no client address: the username's budget alone
    counts, and sign-in works as ever."""
    ada = make_owner()
    no_address = RequestFactory().post(LOGIN, REMOTE_ADDR="")
    assert [budget.kind for budget in signin.budgets(no_address, ada.username)] == ["username"]
    assert signed_in(sign_in(Client(REMOTE_ADDR=""), ada.username, PASSWORD))


def test_the_address_is_the_client_behind_the_trusted_proxies(settings: Any) -> None:
    """VX-SEC-4: the address budget counts virgo.clients' address, not the proxy's."""
    settings.VIRGO_TRUSTED_PROXIES = ["10.0.0.1"]
    settings.VIRGO_SIGNIN_FAILURES_PER_ADDRESS = 3
    owners = [make_owner() for _ in range(3)]

    def via_proxy(client_address: str, username: str, password: str) -> int:
        client = Client(REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR=client_address)
        return sign_in(client, username, password).status_code

    assert [via_proxy("203.0.113.5", "nobody", "x") for _ in range(4)] == [200] * 3 + [429]
    assert via_proxy("203.0.113.5", owners[0].username, PASSWORD) == 429
    assert via_proxy("203.0.113.6", owners[1].username, PASSWORD) == 302
    # A client cannot step out of its budget by writing its own X-Forwarded-For.
    forged = "198.51.100.1, 203.0.113.5"
    assert via_proxy(forged, owners[2].username, PASSWORD) == 429


def test_ipv6_clients_are_counted_per_64_and_ipv4_clients_per_address(settings: Any) -> None:
    """VX-SEC-4: one IPv6 host holds a whole /64, so every address in it shares one budget (here
    addresses differing in the last and in the 65th bit), while the /64s beside it keep their
    own; an IPv4 client is counted by its own address alone, also when a dual-stack socket
    shows it as ::ffff:a.b.c.d."""
    settings.VIRGO_SIGNIN_FAILURES_PER_ADDRESS = 3
    ada = make_owner()

    def status(address: str, username: str = ada.username, password: str = PASSWORD) -> int:
        return sign_in(Client(REMOTE_ADDR=address), username, password).status_code

    spent = ("2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:7fff:ffff:ffff:ffff")
    assert [status(address, f"nobody-{n}", "x") for n, address in enumerate(spent)] == [200] * 3
    assert status("2001:db8:1:2:8000::9") == 429
    assert status("2001:db8:1:2::1") == 429
    assert status("2001:db8:1:3::1") == 302
    assert status("2001:db8:1:1:ffff:ffff:ffff:ffff") == 302

    grace = make_owner()
    assert [status("192.0.2.1", f"nobody-{n}", "x") for n in range(3)] == [200] * 3
    assert status("192.0.2.1", grace.username) == 429
    assert status("::ffff:192.0.2.1", grace.username) == 429
    assert status("192.0.2.2", grace.username) == 302
    assert status("::ffff:192.0.2.3", grace.username) == 302
    # Nor does an IPv4 client spend the budget of the IPv6 /64 its mapped form falls in.
    assert [status("::ffff:198.51.100.1", f"nobody-{n}", "x") for n in range(3)] == [200] * 3
    assert status("::ffff:198.51.100.2", grace.username) == 302
    assert status("::1", grace.username) == 302


@pytest.mark.parametrize(
    ("backend", "fail_open"),
    [
        ("UnreachableCache", False),
        ("RefusedCache", False),
        ("ForgetfulCache", False),
        ("ForgetfulCache", True),
    ],
    ids=["redis-error", "os-error", "lost-count", "lost-count-ratelimit-fail-open"],
)
def test_sign_in_fails_closed_when_the_counts_cannot_be_kept(
    backend: str, fail_open: bool, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """VX-SEC-4, VX-REL-1: with a shared cache that fails (Redis's error, the operating system's,
    or a backend that swallows its errors and keeps nothing), no password is checked and the
    right one signs no one in: both doors answer 503 with Retry-After, and authenticate()
    refuses. Not even django-ratelimit's RATELIMIT_FAIL_OPEN opens sign-in."""
    ada = make_owner()
    checked: list[str] = []
    check_password = ModelBackend.authenticate

    def counted(self: ModelBackend, request: Any, username: Any = None, **kwargs: Any) -> Any:
        checked.append(username)
        return check_password(self, request, username=username, **kwargs)

    monkeypatch.setattr(ModelBackend, "authenticate", counted)
    # The token endpoint's own per-address request limit is virgo.limits' (its outages are
    # tests/test_redis_unreachable.py's); here only the sign-in budgets are at stake.
    monkeypatch.setattr(api, "address_retry_after", lambda *args, **kwargs: None)
    failing = {"default": {"BACKEND": f"tests.failing_caches.{backend}"}}
    before = went_without("signin")
    with override_settings(CACHES=failing, RATELIMIT_FAIL_OPEN=fail_open):
        # First, while this process has not yet seen the cache fail: the failing call itself,
        # logged once for the operator with its error, and counted as a sign-in without Redis.
        with (
            caplog.at_level("WARNING", logger="virgo.outages"),
            pytest.raises(signin.Unavailable) as first,
        ):
            authenticate(username=ada.username, password=PASSWORD)
        assert 0 < first.value.retry_after <= 5
        [line] = [r.getMessage() for r in caplog.records if r.name == "virgo.outages"]
        assert re.match(r"Redis \(the cache\) is unreachable \(signin, \w+: \S", line), line
        if backend == "ForgetfulCache":
            assert "CountLost: no sign-in count for the username from the cache" in line
        assert went_without("signin") == before + 1
        # Then, with the cache known to be down, what each door answers meanwhile.
        browser = Client(REMOTE_ADDR=ATTACKER)
        page = sign_in(browser, ada.username, PASSWORD)
        assert page.status_code == 503
        assert 0 < int(page["Retry-After"]) <= 5
        body = page.content.decode()
        assert "Sign-in is unavailable for a moment" in body
        # The admin's own page (its title and header), saying when to try again.
        seconds = int(page["Retry-After"])
        assert f"Try again in {seconds} second{'s' if seconds != 1 else ''}." in body
        assert f"<title>Sign-in unavailable | {admin.site.site_title}</title>" in body
        assert f'<div id="site-name"><a href="/admin/">{admin.site.site_header}</a>' in body
        assert '<button class="theme-toggle">' in body
        assert "_auth_user_id" not in browser.session
        # The page's own attempt went without the cache as well: counted, not tried.
        assert went_without("signin") == before + 2
        token = APIClient(REMOTE_ADDR=ATTACKER).post(
            TOKEN, {"username": ada.username, "password": PASSWORD}, format="json"
        )
        assert (token.status_code, token.json()["code"]) == (503, "signin_unavailable")
        assert 0 < int(token["Retry-After"]) <= 5
    assert checked == []
    assert not Token.objects.filter(user=ada).exists()


def test_the_token_endpoint_shares_the_budgets_and_answers_json(settings: Any) -> None:
    """VX-SEC-4: `POST /api/auth/token/` counts into the same budgets and answers a lockout as
    JSON (`signin_locked`, Retry-After); its own per-address limit still applies first."""
    settings.VIRGO_TOKEN_RATE_LIMIT = "1000/h"
    ada, grace = make_owner(), make_owner()
    client = APIClient(REMOTE_ADDR=ATTACKER)
    answers = [
        client.post(TOKEN, {"username": ada.username, "password": "x"}, format="json")
        for _ in range(6)
    ]
    assert [answer.status_code for answer in answers] == [422] * 5 + [429]
    locked = client.post(TOKEN, {"username": ada.username, "password": PASSWORD}, format="json")
    assert locked.status_code == 429
    assert locked["Content-Type"] == "application/json"
    assert locked.json() == {
        "detail": "Too many failed sign-ins for this username or from this address. "
        "Sign-in is paused for them; try again later.",
        "code": "signin_locked",
    }
    assert 0 < int(locked["Retry-After"]) <= 900
    # The admin's door is shut for that username too; the API's for a username the admin's
    # failures locked.
    assert sign_in(Client(REMOTE_ADDR="198.51.100.7"), ada.username, PASSWORD).status_code == 429
    guess(grace.username, address="192.0.2.10", times=5)
    other = APIClient(REMOTE_ADDR="198.51.100.9")
    refused = other.post(TOKEN, {"username": grace.username, "password": PASSWORD}, format="json")
    assert refused.json()["code"] == "signin_locked"

    settings.VIRGO_TOKEN_RATE_LIMIT = "1/h"
    fresh = APIClient(REMOTE_ADDR="198.51.100.10")
    assert fresh.post(TOKEN, {"username": "x", "password": "y"}, format="json").status_code == 422
    limited = fresh.post(TOKEN, {"username": "x", "password": "y"}, format="json")
    assert limited.json()["code"] == "rate_limited"


def test_a_token_request_that_is_no_object_is_a_400_not_a_500() -> None:
    """VX-SEC-4: the sign-in limit reads the username only from an object (schemathesis sent
    `[null, null]`, and reading it was a 500)."""
    client = APIClient(REMOTE_ADDR=ATTACKER)
    for body in ([None, None], "ada", 7):
        response = client.post(TOKEN, body, format="json")
        assert response.status_code == 400, body
        assert "non_field_errors" in response.json() or "username" in response.json()


def test_authenticate_checks_no_password_while_locked() -> None:
    """VX-SEC-4: the lockout holds in `authenticate()` itself, whatever door asks."""
    ada = make_owner()
    guess(ada.username, times=5)
    assert authenticate(username=ada.username, password=PASSWORD) is None
    assert not Client().login(username=ada.username, password=PASSWORD)


def test_a_lockout_is_lifted_and_unlock_says_what_it_lifted(settings: Any) -> None:
    """VX-SEC-4: lifting a username's and an address's budget lets the owner sign in at once."""
    from virgo import signin

    ada, grace = make_owner(), make_owner()
    guess(ada.username)
    assert sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD).status_code == 429
    assert signin.lift(signin.Budget(signin.USERNAME, ada.username)) == 26
    # The address is still paused for everyone.
    assert sign_in(Client(REMOTE_ADDR=ATTACKER), grace.username, PASSWORD).status_code == 429
    assert signin.lift(signin.Budget(signin.ADDRESS, ATTACKER)) == 27
    assert signed_in(sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD))
    # A new count starts: the next failures are counted from zero.
    assert guess(ada.username, times=5) == [200] * 5


def test_a_lift_starts_a_new_count_in_an_owner_private_file(settings: Any) -> None:
    """VX-SEC-4: where the counts are this server's own, lifting a budget writes its new
    generation (16 hex digits) to an owner-private file in an owner-private directory under
    VIRGO_HOME; with the limits switched off there was nothing to lift: it says 0."""
    from virgo import signin

    budget = signin.Budget(signin.USERNAME, "nobody-yet")
    assert signin.lift(budget) == 0
    path = budget.generation_file
    assert re.fullmatch(r"[0-9a-f]{16}", path.read_text(encoding="ascii"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    settings.RATELIMIT_ENABLE = False
    guess("nobody-else", times=3)
    assert signin.lift(signin.Budget(signin.USERNAME, "nobody-else")) == 0


def page_commands(page: str, *, username: str, address: str) -> list[list[str]]:
    """The unlock commands the lockout page gives, filled in, as a shell would split them."""
    given = re.findall(r"<code>(virgo signin unlock [^<]*)</code>", page)
    filled = [command.replace("NAME", username).replace("ADDRESS", address) for command in given]
    return [shlex.split(command) for command in filled]


def test_the_embedded_servers_lockout_is_lifted_by_the_command_in_another_process(
    virgo_home: Path,
) -> None:
    """VX-SEC-4: under the embedded settings (no Redis: the counts in the server process's own
    memory, here this test's), the commands the lockout page gives, run as processes of their
    own with the installation's VIRGO_HOME, lift the lockout the server counted: the owner
    signs in at once, and the next failures are counted from zero."""
    ada = make_owner()
    guess(ada.username)
    refused = sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD)
    assert refused.status_code == 429
    commands = page_commands(refused.content.decode(), username=ada.username, address=ATTACKER)
    assert [command[:4] for command in commands] == [
        ["virgo", "signin", "unlock", "--username"],
        ["virgo", "signin", "unlock", "--address"],
    ]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/"),
        "DJANGO_SETTINGS_MODULE": "virgo.settings",
        "VIRGO_EMBEDDED": "1",
        "VIRGO_HOME": str(virgo_home),
    }
    for command, lifted in zip(commands, (ada.username, ATTACKER), strict=True):
        # `virgo` is `python -m virgo.cli`; run from the checkout, it is this checkout's code.
        done = subprocess.run(
            [sys.executable, "-m", "virgo.cli", *command[1:]], cwd=REPO, env=env,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
        kind = "username" if lifted == ada.username else "address"
        assert done.stdout == (
            f"Lifted {kind} {lifted!r}: the server counts its failed sign-ins from zero again.\n"
        )
    assert signed_in(sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD))
    assert guess(ada.username, times=5) == [200] * 5
    assert sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD).status_code == 429


@pytest.mark.parametrize("spoiled", ["a directory in its place", "not ASCII"])
def test_an_unreadable_generation_fails_closed(
    spoiled: str, virgo_home: Path, caplog: pytest.LogCaptureFixture, settings: Any
) -> None:
    """VX-SEC-4: in the embedded default the generations are files under VIRGO_HOME; one that
    cannot be read checks no password, as an unreachable cache does: 503, and the right password
    signs no one in. The log names the file; the cache is not taken for down (its outage would
    send card reads and rate limits past it), and another username signs in."""
    ada, grace = make_owner(), make_owner()
    budget = signin.Budget(signin.USERNAME, signin.normal_username(ada.username))
    if spoiled == "not ASCII":
        budget.generation_file.parent.mkdir(parents=True)
        budget.generation_file.write_bytes(b"\xff\xfe")
    else:
        budget.generation_file.mkdir(parents=True)
    page = sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD)
    assert page.status_code == 503
    assert page["Retry-After"] == str(settings.VIRGO_DEGRADED_RETRY_SECONDS)
    assert "Sign-in is unavailable for a moment" in page.content.decode()
    assert "_auth_user_id" not in Client(REMOTE_ADDR=ATTACKER).session
    logged = [r.getMessage() for r in caplog.records if r.name == "virgo.signin"]
    reason = "'ascii' codec can't decode" if spoiled == "not ASCII" else "Is a directory"
    assert len(logged) == 1
    assert logged[0].startswith(
        f"Password sign-in is refused: the lockout generation {budget.generation_file} cannot "
        f"be read ({reason}"
    )
    assert logged[0].endswith(
        "); sign-in for that username or address is refused until it is removed or repaired"
    )
    assert SHARED_CACHE.should_try("card")
    assert signed_in(sign_in(Client(REMOTE_ADDR="198.51.100.7"), grace.username, PASSWORD))


def test_unlock_refuses_an_unusable_argument() -> None:
    """VX-SEC-4: the command names what it cannot use rather than lift nothing."""
    with pytest.raises(CommandError, match=r"--address: 'nowhere' is not an IP address"):
        call_command("signin", "unlock", "--address", "nowhere")
    with pytest.raises(CommandError, match=r"--username NAME and/or --address ADDRESS"):
        call_command("signin", "unlock")


@pytest.mark.live
def test_virgo_signin_unlock_lifts_a_lockout_kept_in_redis(
    private_redis: RedisServer, tmp_path: Path
) -> None:
    """VX-SEC-4: the README's command, run as its own process against the deployment's Redis,
    lifts the lockout the web process sees."""
    redis_cache = {
        "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": private_redis.url}
    }
    # Undone before the Redis stops (fixtures end after the test body).
    with override_settings(CACHES=redis_cache):
        ada = make_owner()
        guess(ada.username)
        assert sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD).status_code == 429
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_CACHE_URL")}
        env.update(
            DJANGO_SETTINGS_MODULE="virgo.settings",
            VIRGO_EMBEDDED="1",
            VIRGO_HOME=str(tmp_path / "home"),
            REDIS_URL=private_redis.url,
        )
        done = subprocess.run(
            [
                str(VIRGO), "signin", "unlock",
                "--username", ada.username, "--address", ATTACKER,
            ],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert (
            f"Lifted username {ada.username!r}: 26 failed sign-ins in this window (was locked out)."
            in done.stdout
        )
        assert f"Lifted address {ATTACKER!r}: 26 failed sign-ins" in done.stdout
        assert signed_in(sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD))


@pytest.mark.live
@pytest.mark.mutation
def test_a_lift_kept_in_redis_starts_a_new_count_that_never_expires(
    private_redis: RedisServer,
) -> None:
    """VX-SEC-4: where the counts are shared, lifting a budget stores its new generation (16 hex
    digits) in Redis without an expiry, so a lifted lockout cannot come back when a key expires;
    every process then counts from zero, and the owner signs in at once."""
    with override_settings(CACHES={"default": redis_cache(private_redis.url)}):
        ada = make_owner()
        guess(ada.username)
        budget = signin.Budget(signin.USERNAME, signin.normal_username(ada.username))
        assert signin.lift(budget) == 25
        assert signin.lift(signin.Budget(signin.ADDRESS, ATTACKER)) == 25
        redis = caches["default"].client.get_client()
        key = caches["default"].make_key(budget.generation_key)
        assert re.fullmatch(r"[0-9a-f]{16}", caches["default"].get(budget.generation_key))
        assert redis.ttl(key) == -1
        assert signed_in(sign_in(Client(REMOTE_ADDR=ATTACKER), ada.username, PASSWORD))
        assert guess(ada.username, times=5) == [200] * 5


def test_in_a_windows_last_second_the_wait_is_one_second(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """VX-SEC-4: the wait said (Retry-After, the page's minutes) is never 0: at the very end of
    a budget's window django-ratelimit says 0 seconds are left, and the wait is 1."""
    budget = signin.Budget(signin.USERNAME, "last-second")
    period = settings.VIRGO_SIGNIN_LOCKOUT_SECONDS
    # django-ratelimit's window ends where the key's crc32 puts it in the period: now, here.
    now = 1_800_000 * period + zlib.crc32(f":{budget.value}".encode()) % period
    monkeypatch.setattr(django_ratelimit.core, "time", SimpleNamespace(time=lambda: float(now)))
    (used,) = signin.usage([budget], request=None, count=True)
    assert (used.failures, used.seconds_left) == (1, 1)
