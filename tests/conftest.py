# Fixtures: real services for the `live` tests (tests/live.py); a private VIRGO_HOME and
# flush-safe stored stamps for every test (tests/stamp_fixtures.py).
pytest_plugins = [
    "tests.live",
    "tests.stamp_fixtures",
    "tests.card_support",
    # Real DNS and HTTPS servers on loopback for the organization proofs (VX-ID-2).
    "tests.proof_servers",
]
