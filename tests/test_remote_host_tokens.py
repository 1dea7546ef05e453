"""What an agent host keeps and does with its tokens (serving.connect), exactly: the token file
only its account reads, when a kept token counts as expired, the refresh made before the SDK
sees them and the issuer it is made to, and what the command prints (VX-REMOTE-1,
VX-REMOTE-3). The authorization server here is httpx's MockTransport, answering as Virgo's
does; the same steps against a real virgo-web are tests/test_remote_mcp_live.py's."""

import asyncio
import contextlib
import json
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from serving import connect
from serving.connect import ConsentNeeded, TokenFile

ISSUER = "https://virgo.example.org"
ENDPOINT = f"{ISSUER}/mcp/1c9d0b37-5b7e-4d47-9f0e-4d7a2c1b9e01"
TOKEN_ENDPOINT = f"{ISSUER}/oauth/token/"
NOW = 1_800_000_000.0
CLIENT = OAuthClientInformationFull(
    client_id="host-client", redirect_uris=[AnyUrl("http://127.0.0.1/callback")]
)


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect.time, "time", lambda: NOW)


def kept(path: Path, **tokens: Any) -> TokenFile:
    storage = TokenFile(path, CLIENT)
    asyncio.run(storage.set_tokens(OAuthToken(**{"access_token": "old-access", **tokens})))
    return storage


def test_tokens_are_kept_in_a_file_only_the_account_reads(tmp_path: Path, frozen: None) -> None:
    """VX-REMOTE-3: the directory of the tokens is made 0700 (those above it, such as ~/.config,
    as the account makes any), the file 0600, and the file says when the access token expires,
    a margin early so that a token is never sent in its last seconds."""
    path = tmp_path / "config" / "virgo" / "remote" / "persona.json"
    kept(path, refresh_token="old-refresh", expires_in=600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    document = json.loads(path.read_text())
    assert document["expires_at"] == NOW + 600 - connect.EXPIRY_MARGIN
    assert document["tokens"]["access_token"] == "old-access"
    assert document["tokens"]["refresh_token"] == "old-refresh"
    assert [entry.name for entry in path.parent.iterdir()] == ["persona.json"]


def test_a_temporary_file_left_readable_is_made_private_before_tokens_go_in(
    tmp_path: Path,
) -> None:
    """VX-REMOTE-3: a temporary file an earlier run left, readable by others, keeps its mode
    through O_CREAT; it is made 0600 before the tokens are written to it."""
    path = tmp_path / "persona.json"
    left = path.with_suffix(".tmp")
    left.write_text("")
    left.chmod(0o644)
    kept(path, expires_in=600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not left.exists()


def test_kept_tokens_are_read_back_and_a_file_that_is_not_theirs_is_none(tmp_path: Path) -> None:
    """What the SDK is handed: the tokens kept; nothing for a missing file, one that is not JSON,
    not an object, without tokens, or whose tokens are not a token."""
    path = tmp_path / "persona.json"
    storage = kept(path, refresh_token="old-refresh", expires_in=600)
    read = asyncio.run(storage.get_tokens())
    assert read is not None and (read.access_token, read.refresh_token) == (
        "old-access",
        "old-refresh",
    )
    for content in (
        "not json",
        "[]",
        '{"expires_at": 1}',
        '{"tokens": "old-access"}',
        '{"tokens": {"token_type": "Bearer"}}',
    ):
        path.write_text(content)
        assert asyncio.run(storage.get_tokens()) is None, content
    path.unlink()
    assert asyncio.run(storage.get_tokens()) is None


@pytest.mark.parametrize(
    ("expires_at", "expired"),
    [
        (NOW - 1, True),
        (NOW, True),
        (NOW + 1, False),
        (None, False),
        ("soon", False),
    ],
)
def test_a_token_counts_as_expired_from_the_moment_kept(
    tmp_path: Path, frozen: None, expires_at: Any, expired: bool
) -> None:
    path = tmp_path / "persona.json"
    path.write_text(json.dumps({"tokens": {"access_token": "a"}, "expires_at": expires_at}))
    assert TokenFile(path, CLIENT).expired() is expired


def test_no_file_is_not_expired_and_a_token_without_a_lifetime_never_is(
    tmp_path: Path, frozen: None
) -> None:
    path = tmp_path / "persona.json"
    assert TokenFile(path, CLIENT).expired() is False
    storage = kept(path)
    assert json.loads(path.read_text())["expires_at"] is None
    assert storage.expired() is False


def test_forgetting_removes_the_file_and_the_client_is_the_one_given(tmp_path: Path) -> None:
    path = tmp_path / "persona.json"
    storage = kept(path, expires_in=600)
    storage.forget()
    assert not path.exists()
    storage.forget()
    assert asyncio.run(storage.get_client_info()) is CLIENT
    other = OAuthClientInformationFull(
        client_id="other", redirect_uris=[AnyUrl("http://127.0.0.1/callback")]
    )
    asyncio.run(storage.set_client_info(other))
    assert asyncio.run(storage.get_client_info()) is other


class AuthorizationServer:
    """Virgo's metadata and token endpoint, as httpx's MockTransport: the requests it was sent."""

    def __init__(self, *, issuer: str = ISSUER, refresh_status: int = 200) -> None:
        self.issuer = issuer
        self.refresh_status = refresh_status
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url == f"{ISSUER}/.well-known/oauth-authorization-server":
            return httpx.Response(
                200, json={"issuer": self.issuer, "token_endpoint": TOKEN_ENDPOINT}
            )
        if request.method == "POST" and request.url == TOKEN_ENDPOINT:
            if self.refresh_status != 200:
                return httpx.Response(self.refresh_status, json={"error": "invalid_grant"})
            return httpx.Response(
                200,
                json={
                    "access_token": "new-access",
                    "token_type": "Bearer",
                    "expires_in": 600,
                    "refresh_token": "new-refresh",
                },
            )
        return httpx.Response(404)

    def refresh(self, storage: TokenFile) -> None:
        async def run() -> None:
            async with httpx.AsyncClient(transport=httpx.MockTransport(self)) as http:
                await connect.refresh_if_expired(ENDPOINT, "host-client", storage, http)

        asyncio.run(run())


def expired_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **tokens: Any) -> TokenFile:
    storage = kept(tmp_path / "persona.json", expires_in=0, **tokens)
    monkeypatch.setattr(connect.time, "time", lambda: NOW + 3600)
    return storage


def test_an_expired_token_is_refreshed_at_the_installations_own_token_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-REMOTE-1: the refresh names the client and the persona's resource (RFC 8707), is sent
    to the token endpoint the endpoint's own installation names, and its tokens are kept."""
    storage = expired_tokens(tmp_path, monkeypatch, refresh_token="old-refresh")
    server = AuthorizationServer()
    server.refresh(storage)
    metadata, token = server.requests
    assert metadata.method == "GET"
    assert token.url == TOKEN_ENDPOINT
    assert parse_qs(token.content.decode()) == {
        "grant_type": ["refresh_token"],
        "refresh_token": ["old-refresh"],
        "client_id": ["host-client"],
        "resource": [ENDPOINT],
    }
    renewed = asyncio.run(storage.get_tokens())
    assert renewed is not None and renewed.access_token == "new-access"
    assert renewed.refresh_token == "new-refresh"
    assert json.loads(storage.path.read_text())["expires_at"] == (
        NOW + 3600 + 600 - connect.EXPIRY_MARGIN
    )


def test_a_refresh_refused_forgets_the_tokens_so_the_owner_is_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-REMOTE-2: the connection, the persona or the account revoked: the refresh is refused,
    and the tokens kept are forgotten rather than offered to the endpoint again."""
    storage = expired_tokens(tmp_path, monkeypatch, refresh_token="old-refresh")
    AuthorizationServer(refresh_status=400).refresh(storage)
    assert not storage.path.exists()


def test_a_refresh_is_never_sent_to_a_server_that_answers_as_another_issuer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-REMOTE-1: the metadata at the endpoint's installation names another issuer: the refresh
    token is not sent anywhere, and the command says which issuer answered."""
    storage = expired_tokens(tmp_path, monkeypatch, refresh_token="old-refresh")
    server = AuthorizationServer(issuer="https://elsewhere.example.org")
    with pytest.raises(SystemExit) as refused:
        server.refresh(storage)
    assert str(refused.value) == (
        f"{ISSUER} answers as the authorization server https://elsewhere.example.org"
    )
    assert [request.method for request in server.requests] == ["GET"]
    assert storage.path.exists()


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda storage: storage.forget(), id="no-tokens"),
        pytest.param(
            lambda storage: asyncio.run(
                storage.set_tokens(OAuthToken(access_token="a", expires_in=0))
            ),
            id="no-refresh-token",
        ),
        pytest.param(
            lambda storage: asyncio.run(
                storage.set_tokens(OAuthToken(access_token="a", refresh_token="r", expires_in=7200))
            ),
            id="not-expired",
        ),
    ],
)
def test_nothing_is_asked_of_the_server_without_an_expired_refreshable_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spoil: Callable[[TokenFile], Any]
) -> None:
    storage = expired_tokens(tmp_path, monkeypatch, refresh_token="old-refresh")
    spoil(storage)
    server = AuthorizationServer()
    server.refresh(storage)
    assert server.requests == []


def test_tokens_are_kept_under_the_config_home_by_persona(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert connect.default_tokens(ENDPOINT) == (
        tmp_path / "xdg" / "virgo" / "remote" / "1c9d0b37-5b7e-4d47-9f0e-4d7a2c1b9e01.json"
    )
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert connect.default_tokens(ENDPOINT) == (
        tmp_path / "home" / ".config" / "virgo" / "remote" / f"{ENDPOINT.rpartition('/')[2]}.json"
    )


def test_a_session_that_cannot_ask_the_owner_says_how_to_connect_again() -> None:
    """An agent's session, mid-launch, whose tokens were refused: one line naming the command,
    never a consent page nobody will open."""
    with pytest.raises(ConsentNeeded) as no_owner:
        asyncio.run(connect._no_owner("https://virgo.example.org/oauth/authorize/?x=1"))
    assert str(no_owner.value) == (
        "the persona's endpoint refused the tokens kept for it (the connection, the persona or "
        "the owner's account was revoked): connect again with python -m serving.connect"
    )
    with pytest.raises(ConsentNeeded, match=r"^no consent page can be answered here$"):
        asyncio.run(connect._no_code())


class Session:
    """The MCP session connect() is handed: the tools it lists and the result of a call."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.calls: list[tuple[str, Any]] = []

    async def list_tools(self) -> Any:
        return SimpleNamespace(
            tools=[SimpleNamespace(name="workspace_list"), SimpleNamespace(name="claim")]
        )

    async def call_tool(self, name: str, arguments: Any) -> Any:
        self.calls.append((name, arguments))
        return self.result


def run_connect(
    monkeypatch: pytest.MonkeyPatch, session: Session, call: str | None, arguments: str = "{}"
) -> tuple[int, dict[str, Any]]:
    opened: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def remote_session(*args: Any, **kwargs: Any) -> AsyncIterator[Session]:
        opened.update(args=args, kwargs=kwargs)
        yield session

    monkeypatch.setattr(connect, "remote_session", remote_session)
    status = asyncio.run(
        connect.connect(ENDPOINT, "host-client", Path("tokens.json"), 8765, call, arguments, "rt")
    )
    return status, opened


def test_the_command_lists_the_tools_one_per_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    session = Session(result=None)
    status, opened = run_connect(monkeypatch, session, None)
    assert status == 0
    assert capsys.readouterr().out == "workspace_list\nclaim\n"
    assert opened == {
        "args": (ENDPOINT, "host-client", Path("tokens.json")),
        "kwargs": {"port": 8765, "refresh_token": "rt"},
    }
    assert session.calls == []


@pytest.mark.parametrize(("is_error", "status"), [(False, 0), (True, 1)])
def test_a_call_prints_its_result_and_a_refusal_is_a_failing_status(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    is_error: bool,
    status: int,
) -> None:
    result = {"ok": not is_error, "reason": "fermé"}
    session = Session(SimpleNamespace(structuredContent=result, isError=is_error))
    assert run_connect(monkeypatch, session, "workspace_list", '{"path": "."}')[0] == status
    assert session.calls == [("workspace_list", {"path": "."})]
    assert capsys.readouterr().out == json.dumps(result, indent=2, ensure_ascii=False) + "\n"


def test_a_call_without_structured_content_prints_an_empty_object(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    session = Session(SimpleNamespace(structuredContent=None, isError=False))
    assert run_connect(monkeypatch, session, "claim")[0] == 0
    assert capsys.readouterr().out == "{}\n"


def test_the_owner_is_shown_the_consent_url(capsys: pytest.CaptureFixture[str]) -> None:
    redirect = connect.Redirect(ISSUER)
    try:
        asyncio.run(redirect.send_owner(f"{ISSUER}/oauth/authorize/?client_id=host-client"))
    finally:
        redirect.close()
    assert capsys.readouterr().out == (
        "Open this URL in a browser signed in to Virgo as the persona's owner, and allow:\n"
        f"{ISSUER}/oauth/authorize/?client_id=host-client\n"
    )


def test_the_redirect_listens_on_the_loopback_port_asked_for() -> None:
    """RFC 8252: the redirect is a loopback address, on the port given (0: one chosen)."""
    chosen = connect.Redirect(ISSUER)
    try:
        port = chosen.server.server_port
        assert chosen.server.server_address[0] == "127.0.0.1"
        assert chosen.uri == f"http://127.0.0.1:{port}/callback"
    finally:
        chosen.close()
    asked = connect.Redirect(ISSUER, port)
    try:
        assert asked.uri == f"http://127.0.0.1:{port}/callback"
        assert httpx.get(f"http://127.0.0.1:{port}/elsewhere").status_code == 404
        assert not asked.arrived.is_set() and asked.answer == {}
    finally:
        asked.close()


def test_two_connects_at_once_each_get_a_port_of_their_own() -> None:
    """RFC 8252: with no port asked for, the system picks a free one, so two hosts connecting on
    one machine at the same moment never collide."""
    first, second = connect.Redirect(ISSUER), connect.Redirect(ISSUER)
    try:
        assert first.server.server_port != second.server.server_port
    finally:
        first.close()
        second.close()
