"""VX-SEC-16: the secret corpus (tests/secret_corpus.py) is as large as the rule asks, and what
the secrets boundary makes of it is the baseline recorded here.

The baseline is a measurement, not a target: a change to detection (or to the corpus) changes
these figures, and this test fails until they are updated on purpose, with the table of
`python -m tests.secret_corpus` to say what moved.
"""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import secret_corpus
from tests.secret_corpus import LOCATIONS, NEGATIVES, ORDINARY_PATHS, POSITIVES, Report

REPO = Path(__file__).resolve().parent.parent

# The corpus the baseline below was measured on.
CORPUS_SHA256 = "0b47b676b2a900d0a47011ae1bba74e53072b695a24e0e66d7f411f586aff0ff"

# Baseline, measured on Kingfisher 2.14.0's rules (runtime.secret_rules) beside detect-secrets
# 1.5.0's plugins, and runtime.credentials' locations, as of VX-SEC-16's corpus.
FOUND = 162
PROVIDERS = 102
MISSED_PROVIDERS = {
    "Algolia", "Alibaba Cloud", "Asana", "Azure DevOps", "Codecov", "Cohere", "Contentful",
    "Docker registry", "Facebook", "Mapbox", "Notion", "NuGet", "Okta", "Railway", "Yandex",
}  # fmt: skip
# Providers some but not all of whose cases are found: (found, cases). Every other provider not
# missed entirely has all its cases found.
PARTLY_FOUND = {
    "Azure": (2, 3), "Discord": (2, 3), "Doppler": (1, 2), "Dropbox": (1, 2), "Fly.io": (1, 2),
    "Generic": (5, 8), "Google": (3, 5), "Grafana": (2, 3), "HTTP Basic auth": (1, 2),
    "Netlify": (1, 2), "Sentry": (1, 2), "Twilio": (1, 2), "Twitch": (1, 2), "npm": (2, 3),
}  # fmt: skip
KNOWN_FALSE_POSITIVES = {
    "login form script": "Secret Keyword",
    "i18n strings": "Secret Keyword",
    "AWS documentation example keys": "betterleaks.aws-access-token",
    "jwt.io example in a test": "betterleaks.jwt",
}
LOCATIONS_FOUND = 16
# Kingfisher's rules: how many it exports, how many it reports only as another rule's
# dependency (not run), how many are run on every text for want of a keyword.
KINGFISHER_RULES = 488
KINGFISHER_DEPENDENCIES = 47
RUN_ON_EVERY_TEXT = 7
KNOWN_PATH_FALSE_POSITIVES = {".env.example": ".env.*", "docs/secrets-management.md": "secrets*"}


@pytest.fixture(scope="module")
def report() -> Report:
    return secret_corpus.measure()


def corpus_sha256() -> str:
    cases: list[list[str]] = [[p.provider, p.filename, p.snippet, p.secret] for p in POSITIVES]
    cases += [[n.name, n.filename, n.text] for n in NEGATIVES]
    cases += [[p.path, p.why] for p in LOCATIONS + ORDINARY_PATHS]
    return hashlib.sha256(json.dumps(cases).encode()).hexdigest()


def test_the_corpus_is_as_large_as_the_rule_asks() -> None:
    """VX-SEC-16: at least 150 credentials across at least 60 providers, at least 50 ordinary
    files, and credential locations with ordinary paths beside them."""
    assert len(POSITIVES) >= 150
    assert len({case.provider for case in POSITIVES}) >= 60
    assert len(NEGATIVES) >= 50
    assert LOCATIONS and ORDINARY_PATHS


def test_every_case_is_named_once() -> None:
    """VX-SEC-16: a case the table names is one case: no credential, ordinary file or path is
    listed twice, and no path is both a location and an ordinary path."""
    for names in (
        [case.name for case in POSITIVES],
        [case.name for case in NEGATIVES],
        [case.path for case in LOCATIONS + ORDINARY_PATHS],
    ):
        assert len(names) == len(set(names))


def test_every_credential_is_in_its_snippet_and_nowhere_in_an_ordinary_file() -> None:
    """VX-SEC-16: each positive's exact value occurs in the snippet that is scanned (its
    template's place-holder was filled), and no ordinary file holds one."""
    assert [case.name for case in POSITIVES if case.secret not in case.snippet] == []
    assert [case.name for case in POSITIVES if secret_corpus.SECRET in case.snippet] == []
    ordinary = "\n".join(case.text for case in NEGATIVES)
    assert [case.name for case in POSITIVES if case.secret in ordinary] == []


def test_the_corpus_is_the_same_on_every_run() -> None:
    """VX-SEC-16: the corpus is built from labels, not drawn at random, so the figures below
    are of the same strings on every run and every machine."""
    assert corpus_sha256() == CORPUS_SHA256


def test_recall_is_the_recorded_baseline(report: Report) -> None:
    """VX-SEC-16: overall recall, and recall by provider, are what `measure()` computes now."""
    assert (report.found, len(report.values)) == (FOUND, len(POSITIVES))
    assert report.recall == FOUND / len(POSITIVES)
    assert len(report.by_provider) == PROVIDERS
    assert set(report.missed_providers) == MISSED_PROVIDERS
    partly = {p: hits for p, hits in report.by_provider.items() if 0 < hits[0] < hits[1]}
    assert partly == PARTLY_FOUND


def test_false_positives_are_the_recorded_baseline(report: Report) -> None:
    """VX-SEC-16: the ordinary files and paths judged credentials, and what judged them, are the
    ones recorded; a known false positive that stops being one shows up here too."""
    assert report.false_positives == KNOWN_FALSE_POSITIVES
    assert report.path_false_positives == KNOWN_PATH_FALSE_POSITIVES


def test_no_ordinary_file_is_flagged_beyond_the_known_false_positives(report: Report) -> None:
    """VX-SEC-16: an ordinary file or path the boundary newly refuses is a regression, named."""
    new = {n: k for n, k in report.false_positives.items() if n not in KNOWN_FALSE_POSITIVES}
    assert new == {}
    new_paths = set(report.path_false_positives) - set(KNOWN_PATH_FALSE_POSITIVES)
    assert new_paths == set()


def test_location_recall_is_the_recorded_baseline(report: Report) -> None:
    """VX-SEC-16: the credential locations the catalogue knows, of those listed beyond it."""
    assert report.locations_found == LOCATIONS_FOUND
    assert len(report.missed_locations) == len(LOCATIONS) - LOCATIONS_FOUND


def test_the_command_prints_the_figures() -> None:
    """VX-SEC-16: `python -m tests.secret_corpus` sets Django up itself and prints recall,
    false positives, location recall, the providers missed entirely and the rule set run."""
    result = subprocess.run(
        [sys.executable, "-m", "tests.secret_corpus"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    out = result.stdout
    assert f"value recall          {FOUND}/{len(POSITIVES)}" in out
    assert f"false positives       {len(KNOWN_FALSE_POSITIVES)}/{len(NEGATIVES)}" in out
    assert f"location recall       {LOCATIONS_FOUND}/{len(LOCATIONS)}" in out
    assert f"Providers missed entirely ({len(MISSED_PROVIDERS)})" in out
    assert all(name in out for name in KNOWN_FALSE_POSITIVES)
    run = KINGFISHER_RULES - KINGFISHER_DEPENDENCIES
    assert (
        f"Kingfisher 2.14.0: {KINGFISHER_RULES} rules; {run} run (28 translated, "
        f"{RUN_ON_EVERY_TEXT} on every text), {KINGFISHER_DEPENDENCIES} not run (0 do not compile)"
    ) in out
    assert f"Rules not run ({KINGFISHER_DEPENDENCIES}):" in out


def test_the_rule_set_is_the_recorded_one(report: Report) -> None:
    """VX-SEC-16: the rules measured are Kingfisher's, each run or named with why not: every
    pattern compiles in Python's re once translated; those not run are only the ones Kingfisher
    itself reports solely as another rule's dependency."""
    rules = report.rules
    assert (rules.version, rules.exported) == ("2.14.0", KINGFISHER_RULES)
    assert len(rules.rules) == KINGFISHER_RULES - KINGFISHER_DEPENDENCIES
    assert set(rules.skipped.values()) == {
        "reported by Kingfisher only as another rule's dependency"
    }
    assert len(rules.always) == RUN_ON_EVERY_TEXT


def test_readme_states_the_measured_figures(report: Report) -> None:
    """VX-SEC-16: the figures docs/mcp.md states (the secrets boundary) are what the command
    measures today."""
    readme = (REPO / "docs" / "mcp.md").read_text()
    stated = (
        f"Today it finds {report.found} of {len(report.values)} credentials "
        f"({round(100 * report.recall)}%"
    )
    assert stated in readme
    flagged = sum(kind is not None for kind in report.ordinary.values())
    assert f"wrongly\nrefuses {flagged} of {len(report.ordinary)} ordinary files" in readme
