"""VX-SEC-16: how runtime.secret_rules gets Kingfisher's list (the installed build's digest, the
binary's exact command line, the cache file's name and content) and how a rule set picks the
rules to run on a text and reads a match's secret, pinned with exact values.

Credential-like strings are assembled at run time, so no scanner reading this file finds one.
"""

import base64
import hashlib
import json
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import kingfisher
import pytest

from runtime import secret_rules
from runtime.secret_rules import (
    MAX_STARTS,
    RuleSetUnavailable,
    build_rule,
    build_rule_set,
)

HEX = hashlib.sha256(b"secret-rules-loading").hexdigest()


def entry(rule_id: str, pattern: str) -> dict[str, Any]:
    """A rule as `kingfisher rules list -f json` prints it."""
    return {"id": rule_id, "pattern": pattern, "confidence": "high", "visible": True}


# The installed build --------------------------------------------------------------------------


def test_the_build_is_named_by_the_binarys_own_record_digest() -> None:
    """VX-SEC-16: the digest that names the cached list is the RECORD's sha256 of
    kingfisher/bin/kingfisher (urlsafe base64, unpadded, as RECORD writes it): that of the
    binary Virgo runs, not of another file of the wheel (its console script has one too)."""
    binary = Path(kingfisher.get_binary_path()).read_bytes()
    expected = base64.urlsafe_b64encode(hashlib.sha256(binary).digest()).rstrip(b"=").decode()
    version, digest = secret_rules.installed_build()
    assert (version, digest) == (metadata.version("kingfisher-bin"), expected)


def test_a_wheel_whose_record_names_no_binary_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-SEC-16: without the binary's RECORD line there is no build to name a cache by: the
    rule set is unavailable, and says which distribution and file it looked for."""
    monkeypatch.setattr(secret_rules.metadata, "files", lambda name: None)
    version = metadata.version("kingfisher-bin")
    with pytest.raises(RuleSetUnavailable) as raised:
        secret_rules.installed_build()
    assert str(raised.value) == (
        f"kingfisher-bin {version}'s RECORD names no kingfisher/bin/kingfisher"
    )


def test_the_cache_file_is_named_by_version_and_sixteen_digest_characters(
    virgo_home: Path,
) -> None:
    """VX-SEC-16: the cached list lies in VIRGO_HOME's `cache/`, named by the version and the
    first sixteen letters and digits of the digest (base64's `-`, `_` and `=` dropped)."""
    path = secret_rules.cache_path("2.14.0", "aB-cD_eF=0123456789XYZuvw")
    assert path == virgo_home / "cache" / "kingfisher-2.14.0-aBcDeF0123456789.json"


# The binary -----------------------------------------------------------------------------------


def test_the_binary_lists_its_rules_once_without_environment_or_update_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-SEC-16: the export runs `kingfisher rules list --format json` with no update check,
    quietly, in an empty environment, within a minute; its JSON output is the list."""
    calls: list[tuple[list[str], dict[str, Any]]] = []

    def run(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        calls.append((command, options))
        return subprocess.CompletedProcess(command, 0, stdout='[{"id": "a"}]', stderr="")

    monkeypatch.setattr(secret_rules.subprocess, "run", run)
    assert secret_rules.export_rules() == [{"id": "a"}]
    binary = kingfisher.get_binary_path()
    assert calls == [
        (
            [binary, "rules", "list", "--format", "json", "--no-update-check", "--quiet"],
            {"capture_output": True, "text": True, "check": True, "timeout": 60, "env": {}},
        )
    ]


@pytest.mark.parametrize(
    "failure",
    [
        OSError("no such file"),
        subprocess.CalledProcessError(2, "kingfisher"),
        subprocess.TimeoutExpired("kingfisher", 60),
    ],
)
def test_a_failing_binary_makes_the_rules_unavailable(
    monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """VX-SEC-16: a binary that cannot start, fails or hangs leaves no rule set: the error names
    the command and the failure, rather than a scan passing what it could not judge."""

    def run(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
        raise failure

    monkeypatch.setattr(secret_rules.subprocess, "run", run)
    with pytest.raises(RuleSetUnavailable) as raised:
        secret_rules.export_rules()
    binary = kingfisher.get_binary_path()
    assert str(raised.value) == f"`{binary} rules list --format json` failed: {failure}"
    assert raised.value.__cause__ is failure


def test_output_that_is_not_json_makes_the_rules_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-SEC-16: a binary printing something other than JSON gives no rule set either."""
    monkeypatch.setattr(
        secret_rules.subprocess,
        "run",
        lambda command, **options: subprocess.CompletedProcess(command, 0, stdout="oops"),
    )
    with pytest.raises(RuleSetUnavailable, match="failed: Expecting value"):
        secret_rules.export_rules()


# The cache ------------------------------------------------------------------------------------


def test_the_cache_is_written_whole_and_owner_private(virgo_home: Path) -> None:
    """VX-SEC-16: `_write_cache` creates VIRGO_HOME's `cache/` owner-only, writes the list as
    JSON to a file only its owner reads, and leaves no temporary file beside it."""
    path = secret_rules.cache_path("1.0", "digest")
    secret_rules._write_cache(path, [{"id": "a", "pattern": "x"}])
    assert json.loads(path.read_text()) == [{"id": "a", "pattern": "x"}]
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    secret_rules._write_cache(path, [])
    assert path.read_text() == "[]"


@pytest.mark.parametrize("content", ["{not json", "\udcff"])
def test_an_unreadable_cache_is_replaced_from_the_binary(
    virgo_home: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    """VX-SEC-16: a cache file that is not JSON (a crash, an edit) is read from the binary
    again and rewritten; a missing one is written."""
    exported = [{"id": "fresh"}]
    monkeypatch.setattr(secret_rules, "export_rules", lambda: exported)
    path = secret_rules.cache_path("1.0", "digest")
    path.parent.mkdir(parents=True)
    path.write_text(content, errors="surrogateescape")
    assert secret_rules.load_entries("1.0", "digest") == exported
    assert json.loads(path.read_text()) == exported
    path.unlink()
    assert secret_rules.load_entries("1.0", "digest") == exported
    assert json.loads(path.read_text()) == exported


def test_a_kept_list_is_read_for_its_own_build_only(
    virgo_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-SEC-16: the list kept for one build is not read for another version or digest."""
    monkeypatch.setattr(secret_rules, "export_rules", lambda: [{"id": "exported"}])
    old = secret_rules.cache_path("1.0", "digest")
    old.parent.mkdir(parents=True)
    old.write_text('[{"id": "kept"}]')
    assert secret_rules.load_entries("1.0", "digest") == [{"id": "kept"}]
    assert secret_rules.load_entries("2.0", "digest") == [{"id": "exported"}]
    assert secret_rules.load_entries("1.0", "other") == [{"id": "exported"}]


# Running rules --------------------------------------------------------------------------------


def test_the_secret_is_the_whole_match_when_no_group_took_part() -> None:
    """VX-SEC-16: a rule's secret is its first secret group that matched something; an
    optional group that did not take part leaves the whole match as the secret."""
    rule = build_rule(entry("optional", r"tok_(?:-([a-f]{4}))?"))
    assert rule.secret_groups == (1,)
    assert rule.secret(rule.regex.search("tok_")) == "tok_"
    assert rule.secret(rule.regex.search("tok_-abcd")) == "abcd"
    whole = build_rule(entry("whole", r"tok_[a-f]{4}"))
    assert whole.secret(whole.regex.search("tok_abcd")) == "tok_abcd"


def test_rules_without_keywords_start_zero_times_and_the_others_as_often_as_named() -> None:
    """VX-SEC-16: `starts` lists a rule without keywords with count 0 on every text, and a
    rule with keywords with the number of times they occur, in the rule set's order (a rule
    without keywords is generic, so last)."""
    rules = build_rule_set(
        "test",
        [entry("always", r"[A-Z]{2}[0-9]{8}"), entry("token", r"tok_[0-9]{4}")],
    )
    assert [(rule.id, n) for rule, n in rules.starts("nothing")] == [("always", 0)]
    counted = rules.starts("tok_ TOK_ tok_")
    assert [(rule.id, n) for rule, n in counted] == [("token", 3), ("always", 0)]


def test_a_reaching_rule_named_exactly_max_starts_times_reads_the_whole_text() -> None:
    """VX-SEC-16: only more than MAX_STARTS starts make a reaching rule read line by line; then
    a line naming it exactly MAX_STARTS times is still read. A rule that does not reach reads
    the whole text however often it is named, so its match may span lines."""
    far = build_rule_set("test", [entry("far", r"tok\b[\s\S]{0,400}=([0-9a-f]{8})")])
    assert far.rules[0].reaches
    spanning = "tok " * (MAX_STARTS - 1) + "tok\n=" + HEX[:8]
    assert [secret for _, secret in far.matches(spanning)] == [HEX[:8]]
    assert [secret for _, secret in far.matches("tok\n" + spanning)] == []
    one_line = "tok " * MAX_STARTS + "=" + HEX[:8] + "\ntok"
    assert [secret for _, secret in far.matches(one_line)] == [HEX[:8]]
    assert [secret for _, secret in far.matches("tok " + one_line)] == []
    near = build_rule_set("test", [entry("near", r"tok\b\s=([0-9a-f]{8})")])
    assert not near.rules[0].reaches
    crowded = "tok " * (MAX_STARTS + 1) + "tok\n=" + HEX[:8]
    assert [secret for _, secret in near.matches(crowded)] == [HEX[:8]]
