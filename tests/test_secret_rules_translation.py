"""VX-SEC-16: runtime.secret_rules' helpers pinned on small patterns: where a Rust bracket class
ends, what each POSIX class and Rust-only construct becomes in Python's `re`, which literals are
a pattern's keywords, which patterns may run on past `REACH`, and which groups may hold the
secret. Each expected value is exact, so a changed index, range or keyword set fails here.
"""

import re
import string
import warnings
from re import _parser as sre_parse

import pytest

from runtime import secret_rules
from runtime.secret_rules import (
    POSIX_CLASSES,
    REACH,
    _better,
    _bracket_class,
    _class_end,
    _trie,
    build_rule,
    build_rule_set,
    compile_rule,
    reaches,
    translate,
)


def entry(rule_id: str, pattern: str, **extra: object) -> dict[str, object]:
    """A rule as `kingfisher rules list -f json` prints it."""
    return {"id": rule_id, "pattern": pattern, "confidence": "high", "visible": True, **extra}


def keywords_of(pattern: str) -> frozenset[str]:
    return secret_rules.keywords(sre_parse.parse(pattern))


def reaches_far(pattern: str) -> bool:
    return reaches(sre_parse.parse(pattern))


# Bracket classes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "start", "end"),
    [
        # A plain class ends just past its `]`, whatever follows.
        ("[abc]x", 0, 5),
        ("x[abc]", 1, 6),
        # A `]` first in the class, or first after `^`, is a literal, not its end.
        ("[]a]x", 0, 4),
        ("x[]a]", 1, 5),
        ("[]]x]", 0, 3),
        ("[^]a]x", 0, 5),
        ("x[^]a]", 1, 6),
        ("[^]]x]", 0, 4),
        ("a][^b]c]", 2, 6),
        # `^` is skipped only first: the class still ends at its `]`.
        ("[^a]b", 0, 4),
        # An escaped `]` is inside the class, also right after the `[`.
        ("[a\\]b]x", 0, 6),
        ("[\\]]x]", 0, 4),
        ("[\\]a]b", 0, 5),
        ("[]\\]]x", 0, 5),
        # Rust's nested classes (POSIX ones among them) end with the outer `]`.
        ("[[:alpha:]]x", 0, 11),
        ("[a[b]c]d", 0, 7),
        ("[a[b[c]]d]e", 0, 10),
        # An unterminated class runs to the end of the pattern (Python then refuses it).
        ("[abc", 0, 4),
        ("[a\\", 0, 3),
    ],
)
def test_a_bracket_class_ends_where_rust_ends_it(pattern: str, start: int, end: int) -> None:
    """VX-SEC-16: `_class_end` returns the index just past the `]` that closes the class opened
    at `start`, as Rust reads it: a leading `]` (after an optional `^`) and an escaped one are
    literals, and each nested `[` needs its own `]`."""
    assert _class_end(pattern, start) == end


@pytest.mark.parametrize(
    ("rust", "python"),
    [
        ("[]a]|x", "[]a]|x"),
        ("[^]a](?i)b", "[^]a](?i:b)"),
        ("[a\\](]b", "[a\\](]b"),
        ("([[:digit:]|])", "([0-9|])"),
    ],
)
def test_what_is_inside_a_class_is_no_group_flag_or_alternative(rust: str, python: str) -> None:
    """VX-SEC-16: `(`, `)` and `|` inside a bracket class (a leading `]` or an escaped one
    included) are characters: translate copies the class whole and counts no group from it."""
    assert translate(rust) == python


@pytest.mark.parametrize("name", sorted(POSIX_CLASSES))
def test_each_posix_class_is_the_ascii_range_rust_gives_it(name: str) -> None:
    """VX-SEC-16: Rust's `[[:name:]]` is ASCII-only (regex crate docs, "ASCII character
    classes"); its translation is a Python range that matches exactly those characters of
    0-127, told here by Python's own character predicates, and no character past ASCII."""
    ascii_chars = [chr(code) for code in range(128)]
    members = {
        "alnum": lambda c: c.isalnum(),
        "alpha": lambda c: c.isalpha(),
        "ascii": lambda c: True,
        "blank": lambda c: c in " \t",
        "cntrl": lambda c: ord(c) < 32 or ord(c) == 127,
        "digit": lambda c: c.isdigit(),
        "graph": lambda c: 33 <= ord(c) <= 126,
        "lower": lambda c: c.islower(),
        "print": lambda c: 32 <= ord(c) <= 126,
        "punct": lambda c: c in string.punctuation,
        "space": lambda c: c in string.whitespace,
        "upper": lambda c: c.isupper(),
        "word": lambda c: c.isalnum() or c == "_",
        "xdigit": lambda c: c in string.hexdigits,
    }[name]
    assert translate(f"[[:{name}:]]") == f"[{POSIX_CLASSES[name]}]"
    regex = compile_rule(f"[[:{name}:]]")
    assert [c for c in ascii_chars if regex.fullmatch(c)] == [c for c in ascii_chars if members(c)]
    assert not regex.fullmatch("\u00e9") and not regex.fullmatch("\u0660")


def test_posix_classes_are_replaced_inside_a_larger_class_only_by_name() -> None:
    """VX-SEC-16: `_bracket_class` turns each known POSIX class of a bracket class into its
    range and leaves an unknown or negated one as written, so Python warns about it (a nested
    set) and the rule is skipped with its reason, as Rust refuses an unknown class name."""
    assert _bracket_class("[[:upper:][:digit:]_-]") == "[A-Z0-9_-]"
    assert _bracket_class("[[:foo:]a]") == "[[:foo:]a]"
    assert _bracket_class("[[:^alpha:]]") == "[[:^alpha:]]"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FutureWarning, match="Possible nested set"):
            compile_rule("x[[:foo:]]")
    rules = build_rule_set("test", [entry("unknown", "x[[:foo:]]")])
    assert rules.skipped["unknown"].startswith("does not compile in Python's re: ")


# Rust-only constructs -------------------------------------------------------------------------


def test_several_flags_opened_in_a_group_are_each_reopened_after_its_bar() -> None:
    """VX-SEC-16: two flags opened mid-group are both closed before each `|` of that group and
    both reopened after it, in order, so the later alternative reads with both as in Rust."""
    python = translate("(a(?i)b(?s)c|d)e")
    assert python == "(a(?i:b(?s:c))|(?i:(?s:d)))e"
    regex = compile_rule("(a(?i)b(?s)c|d)e")
    assert regex.fullmatch("aBce") and regex.fullmatch("De") and not regex.fullmatch("aBcE")


def test_an_unbalanced_parenthesis_is_copied_and_the_rule_skipped() -> None:
    """VX-SEC-16: a `)` that closes no group is copied as it is (no group scope is popped for
    it), so Python's `re` refuses the pattern and the rule is listed as not compiling."""
    assert translate("a)b") == "a)b"
    assert translate("(?i)a)b") == "(?i)a)b"
    rules = build_rule_set("test", [entry("stray", "a)b"), entry("kept", "keep_[0-9]{4}")])
    assert [rule.id for rule in rules.rules] == ["kept"]
    assert rules.skipped == {
        "stray": "does not compile in Python's re: unbalanced parenthesis at position 1"
    }


def test_rusts_end_of_text_matches_only_at_the_very_end() -> None:
    """VX-SEC-16: Rust's `\\z` (end of text, never before a final newline) is Python's `\\Z`;
    other escapes are copied with the character they escape."""
    assert translate(r"key\z\$\[\(") == r"key\Z\$\[\("
    regex = compile_rule(r"key\z")
    assert regex.search("a key") and not regex.search("a key\n")


# Keywords -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # A short range is spelled out, each character on its own.
        (r"ab[c-d]x", {"abcx", "abdx"}),
        # A range of 64 or more code points is not, even when case-folding leaves fewer.
        (r"key[0-z]", {"key"}),
        (r"key[0-p]", {"key"}),
        # 64 spellings are kept; a 65th is too many.
        (r"key[\x00-\x3f]", {"key" + chr(code) for code in range(64)}),
        (r"key[\x00-\x40]", {"key"}),
        # A product of spellings past 64 starts a new run: 8 x 10 spellings are too many.
        (r"[a-h][0-9]xyz", {f"{digit}xyz" for digit in "0123456789"}),
        # Exact repeats of up to MIN_KEYWORD rounds are spelled; a range of counts is not.
        (r"x(?:abc){2}", {"xabcabc"}),
        (r"x(?:ab){3}", {"xababab"}),
        (r"key(?:ab){1,3}", {"key"}),
        (r"x(?:abcd){4}", {"abcd"}),
        # Zero rounds of something unspellable spell nothing: the run is broken there.
        (r"abc[^d]{0}ef", {"abc"}),
        # A group, an atomic group or a mandatory repeat lends its own keywords ...
        (r"([a-z]+abc[0-9]+)", {"abc"}),
        (r"(?>[a-z]+abc[0-9]+)", {"abc"}),
        (r"(?:[a-z]+abc)+", {"abc"}),
        (r"(?:[a-z]+abc){2,5}", {"abc"}),
        # ... an optional one does not.
        (r"x+(?:[a-z]+abc)?", set()),
        (r"x+(?:[a-z]+abc)*", set()),
        # Alternatives lend theirs when each has one.
        (r"(?:[a-z]+abc|[0-9]+def)", {"abc", "def"}),
        (r"(?:[a-z]+abc|[0-9]+)", set()),
        # An optional tail is spelled both ways, after a group as after a broken run.
        (r"(abc)(?:de|)", {"abc", "abcde"}),
        (r"x[^a](abc)(?:de|)", {"abc", "abcde"}),
        # A class of more than 64 characters (67 once case-folded) breaks the run like that.
        (r"[!-_a-~](abc)(?:de|)", {"abc", "abcde"}),
        # A run that ends the pattern counts too.
        (r"[a-z]+abc", {"abc"}),
        # Earlier keywords that are better stay the best.
        (r"abcd[^x](?>[a-z]+ab[0-9]+)", {"abcd"}),
        (r"abcdef[^x](?:[a-z]+abc|[0-9]+def)", {"abcdef"}),
    ],
)
def test_a_patterns_keywords_are_exactly_these(pattern: str, expected: set[str]) -> None:
    """VX-SEC-16: a pattern's keywords are the most selective set of case-folded literals one
    of which every match holds, spelled out while they are at most MAX_SPELLINGS (64)."""
    assert keywords_of(pattern) == expected


def test_alternatives_spell_at_most_64_strings() -> None:
    """VX-SEC-16: alternatives whose spellings number 64 extend the run they are in; 65 do not:
    two-character alternatives are then too short to be keywords, and the next group starts
    a run of its own."""
    pairs = [letter + digit for letter in "abcdefgh" for digit in "01234567"]
    assert keywords_of(f"(?:{'|'.join(pairs)})z") == {pair + "z" for pair in pairs}
    assert keywords_of(f"(?:{'|'.join([*pairs, 'i0'])})z") == set()
    # Too many to spell, they break the run as an unspellable item does.
    assert keywords_of(f"(?:{'|'.join([*pairs, 'i0'])})(abc)(?:de|)") == {"abc", "abcde"}


@pytest.mark.parametrize(
    ("a", "b", "better"),
    [
        # The longer shortest keyword wins ...
        ({"ab"}, {"abc"}, {"abc"}),
        ({"abc"}, {"ab"}, {"abc"}),
        ({"abcd", "wxyz"}, {"abc"}, {"abcd", "wxyz"}),
        # ... then the fewer keywords.
        ({"abc", "xyz"}, {"abd"}, {"abd"}),
        ({"abd"}, {"abc", "xyz"}, {"abd"}),
        # None or an empty set is no candidate.
        (None, {"abc"}, {"abc"}),
        ({"abc"}, None, {"abc"}),
        (set(), {"abc"}, {"abc"}),
    ],
)
def test_the_more_selective_keyword_set_is_kept(
    a: set[str] | None, b: set[str] | None, better: set[str]
) -> None:
    """VX-SEC-16: of two keyword sets, `_better` keeps the one whose shortest keyword is longer,
    and of two as long the one with fewer keywords."""
    as_set = lambda s: None if s is None else frozenset(s)  # noqa: E731
    assert _better(as_set(a), as_set(b)) == better


# Reach ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "far"),
    [
        # A repeat of more than REACH rounds of something that matches a space runs on ...
        (r".{0,300}", True),
        (r".*", True),
        (r" {0,300}", True),
        (r"[ a]{0,300}", True),
        (r"[\x00-\x7f]{0,300}", True),
        (r"[ -~]{0,300}", True),
        (r"[\x00- ]{0,300}", True),
        (r"\s{0,300}", True),
        (r"[^a-c]+", True),
        (r"x(?:ab|c.*)y", True),
        (r"(?>.{0,300})", True),
        (r"(x.{0,300})", True),
        (r"(?:x.{0,300}){2}", True),
        # ... of no more than REACH rounds, or of what matches no space, it does not.
        (r".{0,256}", False),
        (r" {0,5}", False),
        (r"x{0,300}", False),
        (r"[ab]{0,300}", False),
        (r"[a-z]{0,300}", False),
        (r"[!-~]+", False),
        (r"\d{0,300}", False),
        (r"\S{0,300}", False),
        (r"[^ ]{0,300}", False),
        (r"[^ a]+", False),
        (r"[^\s]+", False),
        (r"(?:ab){0,300}", False),
        (r"abc", False),
        (r"(?>abc)", False),
    ],
)
def test_a_pattern_reaches_past_reach_only_over_what_matches_a_space(
    pattern: str, far: bool
) -> None:
    """VX-SEC-16: `reaches` holds for a pattern with a repeat of more than REACH (256) rounds of
    one item that matches a space (so it runs on across words), at any depth of groups,
    alternatives and atomic groups; not for a bounded one, nor one of a word's characters."""
    assert REACH == 256
    assert reaches_far(pattern) is far


@pytest.mark.parametrize(
    ("pattern", "far"),
    [
        (r"x[^}]+", True),
        (r"x[^/]*y", True),
        (r"x(?s:.){0,1000}", True),
        (r"x((?s:.)){0,1000}", True),
        (r"x[^ ]+", False),
        (r"x(?:[a-z]){0,1000}", False),
    ],
)
def test_the_docstrings_examples_reach(pattern: str, far: bool) -> None:
    """VX-SEC-16: `reaches`' docstring names `[^}]+` and `(?s:.){0,1000}` as patterns that run
    on. Python parses a negated one-character class as NOT_LITERAL and `(?s:.)` as a flag
    group around ANY: both are seen through (veles.secrets/codecatalystcredentials' `[^/]*`
    among the installed rules); a class that excludes the space, or a lone group of letters,
    does not run across words."""
    assert reaches_far(pattern) is far


# Secret groups --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "groups"),
    [
        # A flag group is no capturing group.
        (r"(?i:tok_)([0-9]{4})", (1,)),
        # An optional group may hold the secret; one repeated twice holds only its last round.
        (r"tok_(?:-([a-f]{4}))?", (1,)),
        (r"tok_(?:([a-f]{4})-){2}", ()),
        (r"tok_(a(b))+", ()),
        (r"tok_(?:a([0-9]{4})|c([0-9]{4})){2}", ()),
        (r"tok_(?:a([0-9]{4})|c([0-9]{4}))", (1, 2)),
        # Groups inside atomic groups and lookarounds count, and repeat as they do.
        (r"tok_(?>([0-9]{4}))", (1,)),
        (r"tok_(?:(?>([0-9]{4}))-){2}", ()),
        (r"tok_(?=([0-9]{4}))", (1,)),
        (r"tok_(?:(?=([0-9]{4}))[0-9]-){2}", ()),
        (r"tok_((?=([0-9]{4}))[0-9])", (1, 2)),
    ],
)
def test_the_groups_that_may_hold_the_secret(pattern: str, groups: tuple[int, ...]) -> None:
    """VX-SEC-16: every capturing group outside a repetition of more than one round may hold the
    secret, in number order, wherever it is nested; none means the whole match is the secret."""
    assert build_rule(entry("rule", pattern)).secret_groups == groups


def test_a_uri_rule_is_generic_only_by_its_password_group() -> None:
    """VX-SEC-16: a rule with a password group is generic when that group has no keyword of
    its own, whatever the other groups hold; the rule keeps Kingfisher's fields as they are."""
    pattern = r"(?P<user>[a-z]+):(?P<password>pwd_[a-f0-9]{8})@host"
    rule = build_rule(entry("uri", pattern, confidence="medium"))
    assert (rule.id, rule.confidence, rule.pattern) == ("uri", "medium", pattern)
    assert rule.regex.pattern == pattern
    assert (rule.secret_groups, rule.generic) == (("password",), False)
    loose = build_rule(entry("uri", r"(?P<user>user_[a-z]+):(?P<password>[a-f0-9]{8})@host"))
    assert (loose.secret_groups, loose.generic) == (("password",), True)


# The rule set ---------------------------------------------------------------------------------


def test_a_rule_set_keeps_its_version_and_its_always_run_rules() -> None:
    """VX-SEC-16: a rule without a `visible` field is run (Kingfisher's default), one marked
    invisible is skipped with its reason in these words; the rule set keeps the version it was
    built for and names the rules without keywords that run on every text."""
    rules = build_rule_set(
        "v1",
        [
            {"id": "plain", "pattern": "tok_[0-9]{4}", "confidence": "high"},
            {"id": "always", "pattern": "[A-Z]{2}[0-9]{8}", "confidence": "medium"},
            entry("hidden", "dep_[0-9]{4}", visible=False),
        ],
    )
    assert rules.version == "v1"
    assert [rule.id for rule in rules.rules] == ["plain", "always"]
    assert [rule.id for rule in rules.always] == ["always"]
    assert rules.skipped == {"hidden": "reported by Kingfisher only as another rule's dependency"}


def test_the_keyword_finder_is_a_minimal_trie() -> None:
    """VX-SEC-16: `_trie` spells the keywords as one regex, one alternative per character, a
    word that another extends as an optional tail, and no group around a single branch."""
    assert _trie(["abc"]) == "abc"
    assert _trie(["ab", "abc", "b"]) == "(?:ab(?:c)?|b)"
    assert _trie(["a.b", "a+"]) == r"a(?:\+|\.b)"
    assert re.fullmatch(_trie(["ab", "abc", "b"]), "abc")
