import pytest

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

# Helpers that test modules used to import from one another live in these modules; pytest
# rewrites their asserts as it did where they were, so a failing check still says what it found.
pytest.register_assert_rewrite(
    "tests.admin_support",
    "tests.card_import_support",
    "tests.card_lock_support",
    "tests.deploy_support",
    "tests.grant_support",
    "tests.revocation_support",
    "tests.secrets_support",
    "tests.serve_support",
    "tests.signing_support",
    "tests.status_list_support",
    "tests.web_support",
)
