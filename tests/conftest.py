# Fixtures for tests against real services (PostgreSQL, Redis, Celery processes): tests/live.py.
pytest_plugins = ["tests.live"]
