# Fixtures: real services for the `live` tests (tests/live.py) and a real OpenID provider
# (tests/oidc_support.py); a private VIRGO_HOME and flush-safe stored stamps for every test
# (tests/stamp_fixtures.py).
pytest_plugins = ["tests.live", "tests.oidc_support", "tests.stamp_fixtures", "tests.card_support"]
