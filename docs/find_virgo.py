"""How an orchestrator finds Virgo's personas and checks one (README "How an orchestrator finds
Virgo"): catalog -> registry -> card -> verify -> status.

Nothing of Virgo's is imported: httpx, the a2a-sdk (card signatures), PyJWT and rfc8785 (the
status list's signature), as any peer would use them. After `make run`, from the checkout:

    .venv/bin/python docs/find_virgo.py --token KEY [--origin http://127.0.0.1:8000]
        [--text "review pull requests"] [--filter publisher=demo.virgo.example ...]

Exits 1, saying why, when any check fails.
"""

import argparse
import base64
import gzip
import sys
from typing import Any

import httpx
import jwt
import rfc8785
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import create_signature_verifier

REGISTRY_TYPE = "application/ai-registry+json"
PINNED_GRANT = "https://virgo.dev/a2a/extensions/pinned-grant/v1"
REVOCATION_STATUS = "https://virgo.dev/a2a/extensions/revocation-status/v1"


def walk(origin: str, token: str, text: str, filters: dict[str, list[str]]) -> None:
    client = httpx.Client(timeout=10)
    # 1. Catalog: public, at the well-known path of the origin you chose.
    catalog = client.get(f"{origin}/.well-known/ai-catalog.json").json()
    [registry] = [e["url"] for e in catalog["entries"] if e["type"] == REGISTRY_TYPE]
    print(f"catalog: {catalog['host']['displayName']}; registry at {registry}")

    # 2. Registry: ARD search with a token, every page, then facets over the same query.
    auth = {"Authorization": f"Token {token}"}
    query: dict[str, Any] = {"text": text, "filter": filters} if filters else {"text": text}
    results: list[dict[str, Any]] = []
    body: dict[str, Any] = {"query": query, "pageSize": 10}
    while True:
        answer = client.post(f"{registry}search", json=body, headers=auth)
        answer.raise_for_status()
        page = answer.json()
        results += page["results"]
        if "pageToken" not in page:
            break
        body = {**body, "pageToken": page["pageToken"]}
    for entry in results:
        print(f"search: {entry['score']:3d} {entry['displayName']}  {entry['identifier']}")
    facets = {"facets": [{"field": "publisher"}, {"field": "tags", "limit": 3}]}
    explored = client.post(
        f"{registry}explore", json={"query": query, "resultType": facets}, headers=auth
    ).json()["facets"]
    for field, counts in explored.items():
        print(f"explore: {field} {counts['buckets']} and {counts['otherCount']} more")
    if not results:
        raise SystemExit(f"nothing in the registry answers {query}")
    entry = results[0]

    # 3. Card: the entry's url. 4. Verify: its signatures with the keys of the origin you chose
    # (never with a jku a card names), then its pinned grant against the registry's attestation.
    keys = {k["kid"]: k for k in client.get(f"{origin}/.well-known/jwks.json").json()["keys"]}

    def key(kid: str, jku: str | None) -> jwt.PyJWK:
        if kid not in keys:
            raise jwt.PyJWKError(f"unknown kid {kid}")
        return jwt.PyJWK(keys[kid])

    card = client.get(entry["url"]).json()
    create_signature_verifier(key, ["ES256", "EdDSA"])(parse_agent_card(card))
    extensions = {e["uri"]: e.get("params", {}) for e in card["capabilities"]["extensions"]}
    digest = extensions[PINNED_GRANT]["grantDigest"]
    attested = [a for a in entry["trustManifest"]["attestations"] if a["type"] == "pinned-grant"]
    if [a["digest"] for a in attested] != [digest]:
        raise SystemExit("the registry's pinned-grant digest is not the card's")
    print(f"card: {entry['url']} verified; its grant digest is the registry's ({digest[:16]}…)")

    # 5. Status: the list the (verified) card names, on the same origin, verified with the same
    # keys; then the card's bit. One fetch answers for every card of this installation.
    place = extensions[REVOCATION_STATUS]
    if not place["statusListCredential"].startswith(origin + "/"):
        raise SystemExit("the card names a status list on another origin")
    status = client.get(place["statusListCredential"]).json()
    unsigned = {k: v for k, v in status.items() if k != "signatures"}
    payload = base64.urlsafe_b64encode(rfc8785.dumps(unsigned)).rstrip(b"=").decode()
    verified = 0
    for signature in status["signatures"]:
        kid = jwt.get_unverified_header(f"{signature['protected']}.{payload}.")["kid"]
        if kid in keys:
            jwt.api_jws.decode(
                f"{signature['protected']}.{payload}.{signature['signature']}",
                key(kid, None).key,
                algorithms=[keys[kid]["alg"]],
            )  # raises if forged
            verified += 1
    if not verified:
        raise SystemExit("no signature of the status list is by a key of the JWKS")
    encoded = status["credentialSubject"]["encodedList"].removeprefix("u")
    bits = gzip.decompress(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    index = int(place["statusListIndex"])
    revoked = bits[index // 8] >> (7 - index % 8) & 1
    print(f"status: index {index} of {len(bits) * 8} is {'REVOKED' if revoked else 'not revoked'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--origin", default="http://127.0.0.1:8000")
    parser.add_argument("--token", required=True, help="an API token (POST /api/auth/token/)")
    parser.add_argument("--text", default="review pull requests")
    parser.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="an ARD filter, e.g. publisher=demo.virgo.example; values of one path are ORed",
    )
    args = parser.parse_args(argv)
    filters: dict[str, list[str]] = {}
    for item in args.filter:
        path, _, value = item.partition("=")
        filters.setdefault(path, []).append(value)
    try:
        walk(args.origin.rstrip("/"), args.token, args.text, filters)
    except (httpx.HTTPError, jwt.PyJWTError, KeyError, ValueError) as error:
        print(f"find_virgo: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
