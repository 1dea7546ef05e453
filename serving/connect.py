"""`python -m serving.connect <endpoint> --client-id <id>`: an agent host's way to a persona's
tools over the network (VX-REMOTE-1, VX-REMOTE-3).

Nothing of the installation is needed here: no database, no settings, no key. The `mcp` SDK's
own OAuth client finds the authorization server from the endpoint's 401, sends the persona's
owner to the consent page (the URL is printed, to open in a browser signed in to the admin),
receives the code on a loopback port (RFC 8252), and exchanges it with PKCE and the resource
indicator. The tokens are kept in a file only this account can read, refreshed when they
expire; the owner revoking the connection, the persona or their account ends them.

It lists the persona's tools, one per line, or with `--call` calls one and prints its result.
"""

import argparse
import asyncio
import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

ENDPOINT_MARK = "/mcp/"
CONSENT_SECONDS = 600
EXPIRY_MARGIN = 30


class TokenFile:
    """The SDK's token storage: the client id given, and the tokens in a file of mode 0600 with
    the moment their access token expires (the SDK keeps that in memory only)."""

    def __init__(self, path: Path, client: OAuthClientInformationFull) -> None:
        self.path = path
        self.client = client

    def _read(self) -> dict[str, Any] | None:
        try:
            kept = json.loads(self.path.read_bytes())
        except (FileNotFoundError, ValueError):
            return None
        return kept if isinstance(kept, dict) and isinstance(kept.get("tokens"), dict) else None

    async def get_tokens(self) -> OAuthToken | None:
        kept = self._read()
        try:
            return OAuthToken.model_validate(kept["tokens"]) if kept else None
        except ValueError:
            return None

    def expired(self) -> bool:
        kept = self._read()
        expires_at = kept.get("expires_at") if kept else None
        return isinstance(expires_at, int | float) and expires_at <= time.time()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        # A little early, so that a token is not sent in its last seconds.
        lifetime = tokens.expires_in
        expires_at = time.time() + lifetime - EXPIRY_MARGIN if lifetime is not None else None
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        # A temporary file left from before keeps its own mode through O_CREAT: made private
        # here, before any token is written to it.
        os.fchmod(descriptor, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump({"tokens": tokens.model_dump(), "expires_at": expires_at}, handle)
        os.replace(temporary, self.path)

    def forget(self) -> None:
        self.path.unlink(missing_ok=True)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def refresh_if_expired(
    endpoint: str, client_id: str, storage: TokenFile, http: httpx.AsyncClient
) -> None:
    """Tokens kept from an earlier run whose access token has expired are refreshed here, before
    the SDK sees them: the SDK, new in each run, would take them for current and, refused, send
    the owner to the consent page again. A refresh refused (the connection, the persona or the
    account revoked) forgets them, and the owner is asked."""
    tokens = await storage.get_tokens()
    if tokens is None or not tokens.refresh_token or not storage.expired():
        return
    issuer = issuer_of(endpoint)
    metadata = (await http.get(f"{issuer}/.well-known/oauth-authorization-server")).json()
    if metadata.get("issuer") != issuer:
        raise SystemExit(f"{issuer} answers as the authorization server {metadata.get('issuer')}")
    answer = await http.post(
        metadata["token_endpoint"],
        data={
            "grant_type": "refresh_token",
            "refresh_token": tokens.refresh_token,
            "client_id": client_id,
            "resource": endpoint,
        },
    )
    if answer.status_code != 200:
        storage.forget()
        return
    await storage.set_tokens(OAuthToken.model_validate(answer.json()))


class Redirect:
    """The loopback end of the redirect: one answer to /callback, its issuer checked (RFC 9207:
    a code sent back by another authorization server is refused, not exchanged)."""

    def __init__(self, issuer: str, port: int = 0) -> None:
        self.issuer = issuer
        self.answer: dict[str, list[str]] = {}
        self.arrived = threading.Event()
        redirect = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != "/callback":
                    self.send_error(404)
                    return
                redirect.answer = parse_qs(parts.query)
                body = b"Virgo: you may close this page and return to the terminal.\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                redirect.arrived.set()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = HTTPServer(("127.0.0.1", port), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_port}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    async def send_owner(self, authorization_url: str) -> None:
        print(
            "Open this URL in a browser signed in to Virgo as the persona's owner, and allow:\n"
            f"{authorization_url}",
            flush=True,
        )

    async def code(self) -> tuple[str, str | None]:
        if not await asyncio.to_thread(self.arrived.wait, CONSENT_SECONDS):
            raise SystemExit(f"no answer from the consent page within {CONSENT_SECONDS} s")
        answer = self.answer
        if "error" in answer:
            reason = answer.get("error_description", answer["error"])[0]
            raise SystemExit(f"the owner did not grant access: {reason}")
        if answer.get("iss") != [self.issuer]:
            raise SystemExit(f"the code came from {answer.get('iss')}, not from {self.issuer}")
        return answer["code"][0], answer.get("state", [None])[0]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def issuer_of(endpoint: str) -> str:
    """The installation an endpoint URL belongs to: what its authorization server is called."""
    base, mark, persona = endpoint.rpartition(ENDPOINT_MARK)
    parts = urlsplit(endpoint)
    if not mark or not persona or parts.scheme not in ("http", "https") or not parts.netloc:
        raise SystemExit(f"{endpoint!r} is not a persona's endpoint: <base URL>/mcp/<persona uuid>")
    return base


def default_tokens(endpoint: str) -> Path:
    home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return home / "virgo" / "remote" / f"{endpoint.rpartition(ENDPOINT_MARK)[2]}.json"


class ConsentNeeded(Exception):
    """The tokens kept are refused and nobody is here to ask the owner again."""


async def _no_owner(authorization_url: str) -> None:
    raise ConsentNeeded(
        "the persona's endpoint refused the tokens kept for it (the connection, the persona or "
        "the owner's account was revoked): connect again with python -m serving.connect"
    )


async def _no_code() -> tuple[str, str | None]:
    raise ConsentNeeded("no consent page can be answered here")


@asynccontextmanager
async def remote_session(
    endpoint: str,
    client_id: str,
    tokens: Path,
    *,
    port: int = 0,
    refresh_token: str | None = None,
    interactive: bool = True,
) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with the persona's endpoint, its tokens kept in `tokens`.

    `interactive` sends the owner to the consent page when no token is kept or the kept ones are
    refused; otherwise that is ConsentNeeded (an agent's session, mid-launch).
    """
    redirect = Redirect(issuer_of(endpoint), port) if interactive else None
    redirect_uri = redirect.uri if redirect is not None else "http://127.0.0.1/callback"
    storage = TokenFile(
        tokens,
        OAuthClientInformationFull(
            client_id=client_id,
            redirect_uris=[AnyUrl(redirect_uri)],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope="mcp",
        ),
    )
    provider = OAuthClientProvider(
        server_url=endpoint,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[AnyUrl(redirect_uri)], scope="mcp", token_endpoint_auth_method="none"
        ),
        storage=storage,
        redirect_handler=redirect.send_owner if redirect is not None else _no_owner,
        callback_handler=redirect.code if redirect is not None else _no_code,
    )
    try:
        if refresh_token is not None and await storage.get_tokens() is None:
            # Handed over by the owner (Remote access > Connections), once: spent at once for
            # the first access token, as an expired one would be; later runs keep what it gave.
            await storage.set_tokens(
                OAuthToken(access_token="", refresh_token=refresh_token, expires_in=0)
            )
        async with httpx.AsyncClient(timeout=60) as plain:
            await refresh_if_expired(endpoint, client_id, storage, plain)
        async with (
            httpx.AsyncClient(auth=provider, timeout=60) as http,
            streamable_http_client(endpoint, http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        if redirect is not None:
            redirect.close()


async def connect(
    endpoint: str,
    client_id: str,
    tokens: Path,
    port: int,
    call: str | None,
    arguments: str,
    refresh_token: str | None = None,
) -> int:
    async with remote_session(
        endpoint, client_id, tokens, port=port, refresh_token=refresh_token
    ) as session:
        if call is None:
            for tool in (await session.list_tools()).tools:
                print(tool.name)
            return 0
        result = await session.call_tool(call, json.loads(arguments))
        print(json.dumps(result.structuredContent or {}, indent=2, ensure_ascii=False))
        return 1 if result.isError else 0


def host_parser(program: str, description: str) -> argparse.ArgumentParser:
    """The options every agent-host command shares: which endpoint, as which client, with which
    tokens (serving.connect, serving.remote_launch)."""
    parser = argparse.ArgumentParser(prog=program, description=description)
    parser.add_argument("endpoint", help="the persona's endpoint: <base URL>/mcp/<persona uuid>")
    parser.add_argument("--client-id", required=True, help="the client the owner registered")
    parser.add_argument("--tokens", type=Path, help="where the tokens are kept (0600)")
    parser.add_argument("--port", type=int, default=0, help="the loopback port of the redirect")
    parser.add_argument(
        "--refresh-token-file",
        type=Path,
        help="a connection the owner opened for this host in the admin: no consent page",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = host_parser("python -m serving.connect", __doc__.split("\n\n")[0])
    parser.add_argument("--call", metavar="TOOL", help="call this tool instead of listing them")
    parser.add_argument("--arguments", default="{}", help="the call's arguments, as JSON")
    options = parser.parse_args(argv)
    refresh_token = None
    if options.refresh_token_file is not None:
        refresh_token = options.refresh_token_file.read_text().strip()
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(
            connect(
                options.endpoint,
                options.client_id,
                options.tokens or default_tokens(options.endpoint),
                options.port,
                options.call,
                options.arguments,
                refresh_token,
            )
        )
    return 130


if __name__ == "__main__":
    sys.exit(main())
