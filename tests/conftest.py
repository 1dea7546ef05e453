# Fixtures: real services for the `live` tests (tests/live.py), a real OpenID provider
# (tests/oidc_support.py), real DNS and HTTPS servers for the organization proofs
# (tests/proof_servers.py); a private VIRGO_HOME, an empty per-process cache and flush-safe
# stored stamps for every test (tests/stamp_fixtures.py).
pytest_plugins = [
    "tests.live",
    "tests.oidc_support",
    "tests.proof_servers",
    "tests.stamp_fixtures",
    "tests.card_support",
]
