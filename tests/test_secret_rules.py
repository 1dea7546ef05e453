"""VX-SEC-16: Kingfisher's rule set as runtime.secret_rules runs it: exported from the installed
binary once, translated from Rust's regex syntax, prefiltered by each pattern's keywords, and
every rule that is not run named with its reason.

Credential-like strings are assembled at run time, so no scanner reading this file finds one.
"""

import hashlib
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import kingfisher
import pytest

from runtime import secret_rules
from runtime.credentials import find_secret
from runtime.secret_rules import (
    MAX_STARTS,
    build_rule,
    build_rule_set,
    compile_rule,
    rule_set,
    translate,
)

REPO = Path(__file__).resolve().parent.parent
HEX = hashlib.sha256(b"secret-rules").hexdigest()


def entry(rule_id: str, pattern: str, **extra: Any) -> dict[str, Any]:
    """A rule as `kingfisher rules list -f json` prints it."""
    return {"id": rule_id, "name": rule_id, "pattern": pattern, "confidence": "high",
            "visible": True, "examples": [], **extra}  # fmt: skip


@pytest.mark.parametrize(
    ("rust", "python"),
    [
        # Mid-pattern flags hold to the end of their group, in Python only scoped.
        (r"\b(p8e-(?i)[a-z0-9]{4})\b", r"\b(p8e-(?i:[a-z0-9]{4}))\b"),
        # ... and for the later alternatives of that group too, each scoped on its own.
        (r"a(?i)b|c", r"a(?i:b)|(?i:c)"),
        (r"(?:x(?s)y|z)w", r"(?:x(?s:y)|(?s:z))w"),
        # Leading flags are Python's global ones already; a scoped one is left as it is.
        (r"(?s)(?i)ab(?-i:C)", r"(?s)(?i)ab(?-i:C)"),
        # Rust's end of text, and its POSIX classes, which Python would read as a nested set.
        (r"key\z", r"key\Z"),
        (r"pat[[:alnum:]_]{3}", r"pat[0-9A-Za-z_]{3}"),
        # Escaped parentheses and bars, and those in a class, are no groups or alternatives.
        (r"\((?i)a\|[(|)]b\)", r"\((?i:a\|[(|)]b\))"),
    ],
)
def test_rust_syntax_is_translated_to_what_python_reads_the_same_way(
    rust: str, python: str
) -> None:
    """VX-SEC-16: a flag group past the start is scoped to the end of its enclosing group and
    reopened after each `|` of it; `\\z` is `\\Z`; POSIX classes are ranges."""
    assert translate(rust) == python
    re.compile(python)


def test_a_translated_flag_matches_as_kingfisher_matches() -> None:
    """VX-SEC-16: `p8e-(?i)...` takes upper-case after the prefix, not in it; the flag opened in
    one alternative holds in the next one too, and ends with their group."""
    adobe = compile_rule(r"\b(p8e-(?i)[a-z0-9]{4})\b")
    assert adobe.search("p8e-AB12") and not adobe.search("P8E-ab12")
    alternatives = compile_rule(r"(?:a(?i)b|c)d")
    assert alternatives.fullmatch("aBd") and alternatives.fullmatch("Cd")
    assert not alternatives.fullmatch("ABd") and not alternatives.fullmatch("aBD")


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"\p{Lu}{4}", "bad escape \\p"),
        (r"a(?U)b+", "unknown extension ?U"),
        (r"x[[:^alpha:]]", "Possible nested set"),
    ],
)
def test_a_rule_that_does_not_compile_is_reported_with_its_reason(
    pattern: str, reason: str
) -> None:
    """VX-SEC-16: a pattern Python's `re` cannot read as Kingfisher does (a Unicode property,
    Rust's swap-greed flag, a nested class `re` would read as something else) is not run, and
    the rule set says which and why, beside the ones it drops by Kingfisher's own judgement."""
    rules = build_rule_set("test", [
        entry("kept", r"keep_[a-f0-9]{8}"),
        entry("broken", pattern),
        entry("dependency", r"dep_[a-f0-9]{8}", visible=False),
        entry("unsure", r"low_[a-f0-9]{8}", confidence="low"),
    ])  # fmt: skip
    assert [rule.id for rule in rules.rules] == ["kept"]
    assert set(rules.skipped) == {"broken", "dependency", "unsure"}
    assert rules.skipped["broken"].startswith("does not compile in Python's re: ")
    assert reason in rules.skipped["broken"]
    assert "dependency" in rules.skipped["dependency"]
    assert rules.skipped["unsure"] == "low confidence"
    assert rules.exported == 4


@pytest.mark.parametrize(
    ("pattern", "keywords"),
    [
        (r"\bghp_[0-9a-zA-Z]{36}\b", {"ghp_"}),
        (r"(?i)\b(?:heroku)(?:[ \t\w.-]{0,20})=([0-9a-f]{8})", {"heroku"}),
        # Alternatives each give theirs; a class of a few characters spells them out.
        (r"\b(?:AKIA|ASIA)[A-Z2-7]{16}", {"akia", "asia"}),
        (r"\bEAA[MC][a-z0-9]{100,}", {"eaam", "eaac"}),
        # The longest of the literals every match holds.
        (r"sk_(?:live|test)_[a-z0-9]{24}_suffix", {"sk_live_", "sk_test_"}),
        # Nothing three characters long that every match holds: the rule runs on every text.
        (r"SK[0-9a-fA-F]{32}", set()),
        (r"(?:ab|cd)?[0-9]{12}", set()),
    ],
)
def test_a_patterns_keywords_are_the_literals_every_match_holds(
    pattern: str, keywords: set[str]
) -> None:
    """VX-SEC-16: keywords come from the pattern as `re` parses it, case-folded: one of them is
    in every match, or the rule has none."""
    assert build_rule(entry("rule", pattern)).keywords == keywords


def test_a_rule_whose_keyword_is_absent_is_not_run_and_one_in_another_case_is() -> None:
    """VX-SEC-16: the prefilter runs a rule only on a text that holds its keyword, in any case
    (as `(?i)` matches it, the Kelvin sign included); a rule without keywords runs always."""
    rules = build_rule_set("test", [
        entry("heroku", r"(?i)\b(?:heroku)(?:[ \t\w.-]{0,20})=\s*([0-9a-f]{32})"),
        entry("token", r"\btok_[a-f0-9]{32}"),
        entry("twilio", r"SK[0-9a-fA-F]{32}"),
    ])  # fmt: skip
    assert [rule.id for rule, _ in rules.starts("nothing to see")] == ["twilio"]
    shouting = f"HEROKU_API_KEY = {HEX[:32]}"
    assert [rule.id for rule, _ in rules.starts(shouting)] == ["heroku", "twilio"]
    assert [(rule.id, secret) for rule, secret in rules.matches(shouting)] == [("heroku", HEX[:32])]
    kelvin = f"HEROKU_API_KEY = {HEX[:32]}".replace("K", "\u212a")
    assert [rule.id for rule, _ in rules.matches(kelvin)] == ["heroku"]


def test_a_keyword_inside_a_longer_one_is_found_too() -> None:
    """VX-SEC-16: keywords are found at every position, overlapping ones included: `sk_` is in
    `sk_live_`, `live_` inside it."""
    rules = build_rule_set("test", [
        entry("long", r"\bsk_live_[a-f0-9]{8}"),
        entry("short", r"\bsk_[a-f0-9]{8}"),
        entry("inner", r"live_[a-f0-9]{8}!"),
    ])  # fmt: skip
    found = rules.starts(f"sk_live_{HEX[:8]}! and sk_{HEX[:8]}")
    assert {rule.id: count for rule, count in found} == {"long": 1, "short": 2, "inner": 1}


def test_a_rule_that_reaches_reads_line_by_line_when_named_too_often() -> None:
    """VX-SEC-16: a pattern that may run on past a line (`curl` ... five lines ... `-u`) is run
    on the whole text while its keyword is named at most MAX_STARTS times there, else on each
    line that names it no more often than that."""
    rules = build_rule_set("test", [
        entry("curl", r"\bcurl\b(?:.*|.*(?:[\r\n]{1,2}.*){1,5})[ \t](?:-u)[ \t]{0,5}(\w+:\w+)"),
    ])  # fmt: skip
    (curl,) = rules.rules
    assert curl.reaches
    spread = "curl https://example.org \\\n  -u deployer:" + HEX[:16] + "\n"
    assert [secret for _, secret in rules.matches(spread)] == ["deployer:" + HEX[:16]]
    crowded = "curl " * (MAX_STARTS + 1) + "\n" + spread
    assert [secret for _, secret in rules.matches(crowded)] == []
    assert [secret for _, secret in rules.matches(crowded.replace("\\\n ", ""))] == [
        "deployer:" + HEX[:16]
    ]


def test_the_secret_is_the_group_that_holds_it() -> None:
    """VX-SEC-16: a URI's secret is its password group; a group inside a repetition is a piece
    of the format, not the secret (the whole match is); a rule whose secret group has no keyword
    of its own is generic, and judged by the value filters."""
    uri = build_rule(entry("uri", r"(?P<uri>postgres://(?P<user>\w+):(?P<password>[^@\s]+)@\w+)"))
    match = uri.regex.search(f"postgres://app:{HEX[:12]}@db")
    assert (uri.secret(match), uri.generic) == (HEX[:12], True)
    webhook = build_rule(entry("hook", r"https://hooks\.example\.com/(?:[a-z0-9]{4}-){2}[a-z]+"))
    match = webhook.regex.search("https://hooks.example.com/ab12-cd34-tail")
    assert (webhook.secret(match), webhook.generic) == (match.group(0), False)


def test_the_rule_set_is_the_installed_kingfishers() -> None:
    """VX-SEC-16: the rules are those of the kingfisher-bin wheel requirements/base.txt pins
    (2.14.0: Betterleaks' rules and Veles'), every one run or named with its reason."""
    rules = rule_set()
    version = metadata.version("kingfisher-bin")
    assert rules.version == version == kingfisher.__version__ == "2.14.0"
    assert f"kingfisher-bin=={version}\n" in (REPO / "requirements/base.txt").read_text()
    assert rules.exported == len(rules.rules) + len(rules.skipped) == 488
    families = {rule.id.split(".")[0] for rule in rules.rules}
    assert families == {"betterleaks", "veles"}
    assert not [why for why in rules.skipped.values() if why.startswith("does not compile")]


def test_the_exported_list_is_kept_for_the_next_process(
    virgo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-SEC-16: the binary runs once per Kingfisher build: its list is kept owner-private
    under VIRGO_HOME, named by version and binary digest, and read back without running it."""
    version, digest = secret_rules.installed_build()
    first = secret_rules.load_entries(version, digest)
    cached = secret_rules.cache_path(version, digest)
    assert cached.parent == virgo_home / "cache"
    assert cached.name.startswith(f"kingfisher-{version}-")
    assert cached.stat().st_mode & 0o777 == 0o600

    def no_binary() -> list[dict[str, Any]]:
        raise AssertionError("the binary ran although its list was kept")

    monkeypatch.setattr(secret_rules, "export_rules", no_binary)
    assert secret_rules.load_entries(version, digest) == first


def test_a_home_that_cannot_be_written_costs_the_binary_not_the_rules(
    settings: Any, tmp_path: Path
) -> None:
    """VX-SEC-16: where VIRGO_HOME cannot hold the list (hidden, read-only, or not a directory,
    as in a sandbox), the rules are still read, from the binary, in each process."""
    settings.VIRGO_HOME = tmp_path / "not-a-directory"
    settings.VIRGO_HOME.write_text("")
    version, digest = secret_rules.installed_build()
    entries = secret_rules.load_entries(version, digest)
    assert len(entries) == rule_set().exported
    assert not secret_rules.cache_path(version, digest).exists()


def test_the_rule_sets_findings_are_what_credentials_reports() -> None:
    """VX-SEC-16: runtime.credentials names the Kingfisher rule that found a credential, and a
    run of one character where a rule's random part goes (a doc's placeholder) is none."""
    token = "ghp_" + HEX[:36]
    assert find_secret(f"GITHUB_TOKEN={token}\n") == "betterleaks.github-pat"
    assert find_secret("GITHUB_TOKEN=ghp_" + "x" * 36 + "\n") is None


def test_an_unquoted_value_after_a_keyword_counts_only_when_it_reads_as_random() -> None:
    """VX-SEC-16: outside config files, what follows `secret... =` unquoted is a credential
    only when it has the entropy of a random token; a version or a setting's name stays
    readable (the ordinary files of the corpus hold such lines)."""
    random_value = "Zq8vN2rTx7Lm4Kp9Wd3sQ1yB6cF0hJ5gA8eR2tU7"
    found = find_secret(f"db_password = {random_value}\n", filename="notes.md")
    assert found == "Secret Keyword"
    assert find_secret("secret_scheme = v2.1.0-rc1\n", filename="notes.md") is None
