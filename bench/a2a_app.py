"""The reference: the a2a-sdk's own card route in a Starlette app, as an SDK user would serve it.

Run by uvicorn (uvloop + httptools). It serves the exact card Virgo serves, parsed into the SDK's
AgentCard, at the same path; BENCH_CARD_FILE and BENCH_CARD_PATH name both.
"""

import json
import os
from pathlib import Path

from a2a.client.card_resolver import parse_agent_card
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from starlette.applications import Starlette

_card = parse_agent_card(json.loads(Path(os.environ["BENCH_CARD_FILE"]).read_bytes()))
app = Starlette(
    routes=create_agent_card_routes(
        _card,
        card_url=os.environ["BENCH_CARD_PATH"],
        cache_control=os.environ.get("BENCH_CACHE_CONTROL", "public, max-age=300"),
    )
)
