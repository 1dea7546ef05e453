"""The reference: the a2a-sdk's own card route in a Starlette app, as an SDK user would serve it.

Run by uvicorn (uvloop + httptools). It serves the exact card Virgo serves, parsed into the SDK's
AgentCard, at the same path; BENCH_CARD_FILE and BENCH_CARD_PATH name both. With BENCH_SIGN=1 it
signs the card itself once at start, as an SDK user does (create_agent_card_signer, ES256, a
key of its own) in place of the signatures Virgo's copy carries.
"""

import json
import os
from pathlib import Path

from a2a.client.card_resolver import parse_agent_card
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.utils.signing import create_agent_card_signer
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.applications import Starlette

_card = parse_agent_card(json.loads(Path(os.environ["BENCH_CARD_FILE"]).read_bytes()))
if os.environ.get("BENCH_SIGN") == "1":
    del _card.signatures[:]
    _card = create_agent_card_signer(
        ec.generate_private_key(ec.SECP256R1()),
        {"alg": "ES256", "kid": "bench", "typ": "JOSE", "jku": None},
    )(_card)
app = Starlette(
    routes=create_agent_card_routes(
        _card,
        card_url=os.environ["BENCH_CARD_PATH"],
        cache_control=os.environ.get("BENCH_CACHE_CONTROL", "public, max-age=300"),
    )
)
