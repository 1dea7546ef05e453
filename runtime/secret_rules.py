"""Kingfisher's rule set, run by Python's `re` (VX-SEC-16): what a credential of a known token
family looks like. runtime.credentials asks; nothing else should.

MongoDB's Kingfisher (the `kingfisher-bin` wheel, pinned in requirements/base.txt) bundles the
Betterleaks rules (the gitleaks author's successor to gitleaks' default rules, a superset of
them) and the Veles rules of Google's OSV-SCALIBR. Its binary prints them once
(`kingfisher rules list -f json`); running it per scan would cost a process and a network
update check each time, so the list is kept in VIRGO_HOME's `cache/`, one file per Kingfisher
build (its version and the binary's sha256 from the wheel's RECORD), and compiled once per
process. The sandboxed agent never scans: the MCP server and the launcher, outside the sandbox,
read VIRGO_HOME as the web and CLI processes do.

Three things make the rules fit here, and a fourth keeps Python's backtracking engine within
bounds where Kingfisher's runs in linear time (`reaches`, `MAX_STARTS`):

- **Translation.** The patterns are Rust regex syntax: a `(?i)` in mid-pattern holds to the end
  of its group (Python allows flags there only scoped, `(?i:...)`), `\\z` is Python's `\\Z`, and
  `[[:alnum:]]` is a POSIX class Python would read as a nested set. A pattern that still does
  not compile, or compiles only with a warning that Python reads it otherwise, is not run; it is
  listed with the reason (`RuleSet.skipped`), never lost silently.
- **Selection.** Kingfisher's own judgement is kept: a rule it reports only as another rule's
  dependency (not `visible`) or with low confidence is not run, as Kingfisher does not report
  one alone either.
- **A prefilter.** Each pattern's mandatory literals (from `re._parser`, the parser `re` itself
  uses) are its keywords: every match holds one of them, so a rule runs only on a text whose
  case-folded form holds one. A pattern with no keyword of at least `MIN_KEYWORD` characters
  runs on every text.

What a rule's match holds (`Rule.secret`) and whether only the words around it told it apart
(`Rule.generic`) are said here; whether it is a credential, runtime.credentials decides.
"""

import contextlib
import json
import os
import re
import subprocess
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from itertools import product
from pathlib import Path
from re import _constants as sre
from re import _parser as sre_parse
from typing import Any

import kingfisher
from django.conf import settings

from virgo.home import FILE_MODE, private_directory

DISTRIBUTION = "kingfisher-bin"
KINGFISHER_BINARY = "kingfisher/bin/kingfisher"
# The levels Kingfisher 2.14 gives its rules are high and medium; a later one's low is its own
# word that a rule fires on ordinary text.
RUN_CONFIDENCE = frozenset({"high", "medium"})
# Shorter literals (`sk`, `:`, `-`) are in most texts: testing for them would cost as much as
# running the pattern.
MIN_KEYWORD = 3
# How many strings a run of exact pieces may spell before it stops growing: `EAA[MC]` is two
# keywords, `[A-Z]{4}` would be half a million.
MAX_SPELLINGS = 64
# A pattern that may run on past this many characters from a start (`reaches`) is run on a
# text only while its keyword is named there at most `MAX_STARTS` times: Python's `re`
# backtracks where Kingfisher's engine does not, so such a pattern costs the number of starts
# times what lies after each.
REACH = 256
MAX_STARTS = 64
# The groups that name a URI's password.
PASSWORD_GROUPS = ("password", "GIT_PASSWORD")

# Rust's POSIX classes, valid only inside a bracket class, as Python ranges.
POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7F",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]*(?:-[a-zA-Z]+)?)\)")
_POSIX_CLASS = re.compile(r"\[:([a-z]+):\]")


class RuleSetUnavailable(Exception):
    """Kingfisher's rules could not be read: the wheel's RECORD names no binary, or it fails. A
    scan then raises rather than pass what it could not judge."""


# Translation ----------------------------------------------------------------------------------


def _class_end(pattern: str, start: int) -> int:
    """The index just past the bracket class opening at `start`: escapes, a leading `]` and
    Rust's nested classes (POSIX ones among them) are inside it."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    depth = 1
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(pattern)


def _bracket_class(text: str) -> str:
    return _POSIX_CLASS.sub(lambda m: POSIX_CLASSES.get(m.group(1), m.group(0)), text)


def translate(pattern: str) -> str:
    """A Rust regex as Python's `re` reads it the same way.

    A flag group past the pattern's start (`p8e-(?i)[a-z0-9]{32}`) becomes a scoped one that
    ends where its enclosing group does, closed and opened again around each `|` of that group,
    since Rust's flag holds for the later alternatives too; `\\z` becomes `\\Z`; POSIX classes
    become ranges.
    """
    out: list[str] = []
    # One list per open group: the flags opened in it so far, each still to be closed.
    scopes: list[list[str]] = [[]]
    leading = True
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            escape = pattern[i : i + 2]
            out.append("\\Z" if escape == "\\z" else escape)
            i += 2
        elif char == "[":
            end = _class_end(pattern, i)
            out.append(_bracket_class(pattern[i:end]))
            i = end
        elif flag := _FLAG_GROUP.match(pattern, i):
            if leading:
                out.append(flag.group(0))
            else:
                out.append(f"(?{flag.group(1)}:")
                scopes[-1].append(flag.group(1))
            i = flag.end()
            continue
        elif char == "(":
            out.append(char)
            scopes.append([])
            i += 1
        elif char == ")" and len(scopes) > 1:
            out.append(")" * len(scopes.pop()) + ")")
            i += 1
        elif char == "|":
            opened = scopes[-1]
            out.append(")" * len(opened) + "|" + "".join(f"(?{f}:" for f in opened))
            i += 1
        else:
            out.append(char)
            i += 1
        leading = False
    out.append(")" * len(scopes[0]))
    return "".join(out)


def compile_rule(pattern: str) -> re.Pattern[str]:
    """`pattern` translated and compiled; a warning (Python reading `[[` as a nested set, say)
    is an error too, since the pattern would then match something else than in Kingfisher."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return re.compile(translate(pattern))


# Keywords -------------------------------------------------------------------------------------

_REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
Parsed = Sequence[tuple[Any, Any]]


def _spellings(op: Any, av: Any) -> frozenset[str] | None:
    """Every string one item matches, case-folded, when they are few; None otherwise."""
    if op is sre.LITERAL:
        return frozenset({chr(av).casefold()})
    if op is sre.IN:
        chars: set[str] = set()
        for kind, value in av:
            if kind is sre.LITERAL:
                chars.add(chr(value).casefold())
            elif kind is sre.RANGE and value[1] - value[0] < MAX_SPELLINGS:
                chars.update(chr(c).casefold() for c in range(value[0], value[1] + 1))
            else:
                return None
        return frozenset(chars) if len(chars) <= MAX_SPELLINGS else None
    if op is sre.SUBPATTERN:
        return _sequence_spellings(av[-1])
    if op is sre.BRANCH:
        branches = [_sequence_spellings(items) for items in av[1]]
        if any(branch is None for branch in branches):
            return None
        union = frozenset().union(*branches)  # type: ignore[arg-type]
        return union if len(union) <= MAX_SPELLINGS else None
    if op in _REPEATS and av[0] == av[1] and av[0] <= MIN_KEYWORD:
        body = _sequence_spellings(av[2])
        return None if body is None else _joined(*[body] * av[0])
    return None


def _joined(*parts: frozenset[str] | None) -> frozenset[str] | None:
    if any(part is None for part in parts):
        return None
    total = 1
    for part in parts:
        total *= len(part)  # type: ignore[arg-type]
    if total > MAX_SPELLINGS:
        return None
    return frozenset("".join(p) for p in product(*parts))  # type: ignore[arg-type]


def _sequence_spellings(items: Parsed) -> frozenset[str] | None:
    spelled: frozenset[str] | None = frozenset({""})
    for op, av in items:
        spelled = _joined(spelled, _spellings(op, av))
        if spelled is None:
            return None
    return spelled


def _better(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """The more selective of two keyword sets: the longer shortest keyword, then fewer."""
    if not a or not b:
        return a or b
    return max(a, b, key=lambda s: (min(map(len, s)), -len(s)))


def _required(items: Parsed) -> frozenset[str] | None:
    """Strings (case-folded) one of which every match of `items` contains, or None."""
    best: frozenset[str] | None = None
    run: frozenset[str] | None = frozenset({""})
    for op, av in items:
        spelled = _spellings(op, av)
        grown = _joined(run, spelled) if spelled is not None else None
        if grown is not None:
            run = grown
            continue
        best = _better(best, run if run != {""} else None)
        run = spelled if spelled is not None else frozenset({""})
        if op is sre.SUBPATTERN:
            best = _better(best, _required(av[-1]))
        elif op is sre.ATOMIC_GROUP:
            best = _better(best, _required(av))
        elif op in _REPEATS and av[0] >= 1:
            best = _better(best, _required(av[2]))
        elif op is sre.BRANCH:
            branches = [_required(branch) for branch in av[1]]
            if all(branches):
                best = _better(best, frozenset().union(*branches))  # type: ignore[arg-type]
    return _better(best, run if run != {""} else None)


def keywords(parsed: Parsed) -> frozenset[str]:
    """The keywords of a parsed pattern: empty when it has none long enough to be worth it."""
    found = _required(parsed)
    return found if found and min(map(len, found)) >= MIN_KEYWORD else frozenset()


def _holds_space(op: Any, av: Any) -> bool:
    """Whether one item matches a space: it can run on across words."""
    if op is sre.ANY:
        return True
    if op is sre.NOT_LITERAL:
        # A class excluding one character (`[^}]`): Python parses it as this.
        return av != ord(" ")
    if op is not sre.IN:
        return op is sre.LITERAL and av == ord(" ")
    negated = any(kind is sre.NEGATE for kind, _ in av)
    named = any(
        (kind is sre.LITERAL and value == ord(" "))
        or (kind is sre.RANGE and value[0] <= ord(" ") <= value[1])
        or (kind is sre.CATEGORY and value in (sre.CATEGORY_SPACE, sre.CATEGORY_UNI_SPACE))
        for kind, value in av
    )
    return named != negated


def _unwrapped(items: Parsed) -> Parsed:
    """A lone group's content (`(?s:.)`, `(.)`), however deep: what a repetition repeats."""
    while len(items) == 1 and items[0][0] is sre.SUBPATTERN:
        items = items[0][1][-1]
    return items


def reaches(parsed: Parsed) -> bool:
    """Whether a pattern may run on for more than `REACH` characters of text (`.*`, `[^}]+`,
    `(?s:.){0,1000}`): from each of many starts it then reads most of the text again."""
    for op, av in parsed:
        if op in _REPEATS:
            body = av[2]
            if av[1] > REACH and len(item := _unwrapped(body)) == 1 and _holds_space(*item[0]):
                return True
            inner: list[Parsed] = [body]
        elif op is sre.SUBPATTERN:
            inner = [av[-1]]
        elif op is sre.BRANCH:
            inner = list(av[1])
        elif op is sre.ATOMIC_GROUP:
            inner = [av]
        else:
            inner = []
        if any(reaches(items) for items in inner):
            return True
    return False


def _groups(parsed: Parsed, repeated: bool = False) -> Iterator[tuple[int, Parsed, bool]]:
    """Each capturing group of a parsed pattern: its number, its items, and whether it lies in
    a repetition (it then holds only its last round: a piece of the format, not the secret)."""
    for op, av in parsed:
        if op is sre.SUBPATTERN:
            if av[0] is not None:
                yield av[0], av[-1], repeated
            yield from _groups(av[-1], repeated)
        elif op in _REPEATS:
            yield from _groups(av[2], repeated or av[1] > 1)
        elif op is sre.BRANCH:
            for items in av[1]:
                yield from _groups(items, repeated)
        elif op is sre.ATOMIC_GROUP:
            yield from _groups(av, repeated)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            yield from _groups(av[1], repeated)


# Rules ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """One of Kingfisher's rules as run here.

    `pattern` is Kingfisher's, `regex` its translation. `secret_groups` are the groups that may
    hold the credential, in the order they are asked (none: the whole match is the credential).
    A rule is `generic` when such a group has no keyword of its own: what it captures is told
    from ordinary text only by the words around it (`password: ...`), so runtime.credentials
    judges it as it judges a keyword assignment. `reaches`: the pattern may run on far past
    each start (the module function of that name).
    """

    id: str
    confidence: str
    pattern: str
    regex: re.Pattern[str]
    keywords: frozenset[str]
    secret_groups: tuple[int | str, ...]
    generic: bool
    reaches: bool

    def secret(self, match: re.Match[str]) -> str:
        """The credential a match holds: the first secret group that took part (gitleaks' choice
        for a rule that names none), or else the whole match."""
        return next(
            (value for group in self.secret_groups if (value := match.group(group))),
            match.group(0),
        )


def build_rule(entry: dict[str, Any]) -> Rule:
    """A rule of Kingfisher's list, compiled; raises re.error or a warning if it cannot be.

    A URI's secret is its password, not the whole URI its first group holds; otherwise every
    group outside a repetition may hold it, since a pattern of alternatives captures each
    alternative's secret in a group of its own.
    """
    regex = compile_rule(entry["pattern"])
    parsed = sre_parse.parse(regex.pattern)
    groups = {number: items for number, items, repeated in _groups(parsed) if not repeated}
    named = [name for name in PASSWORD_GROUPS if name in regex.groupindex]
    secret_groups: tuple[int | str, ...] = (named[0],) if named else tuple(sorted(groups))
    numbers = [regex.groupindex[named[0]]] if named else sorted(groups)
    return Rule(
        id=entry["id"],
        confidence=entry["confidence"],
        pattern=entry["pattern"],
        regex=regex,
        keywords=keywords(parsed),
        secret_groups=secret_groups,
        generic=any(not keywords(groups[n]) for n in numbers) if numbers else not keywords(parsed),
        reaches=reaches(parsed),
    )


def _trie(words: Iterable[str]) -> str:
    """One regex matching the longest of `words` that starts at a position: at most one
    alternative per character is tried there, not every word."""
    root: dict[str, dict] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def spell(node: dict[str, dict]) -> str:
        branches = [re.escape(char) + spell(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
        return f"(?:{body})?" if "" in node else body

    return spell(root)


class RuleSet:
    """The rules run, in Kingfisher's order with the generic ones last, and those not run."""

    def __init__(
        self, version: str, rules: Sequence[Rule], skipped: dict[str, str], exported: int
    ) -> None:
        self.version = version
        self.rules = tuple(sorted(rules, key=lambda rule: rule.generic))
        self.skipped = skipped
        self.exported = exported
        self._always = tuple(index for index, rule in enumerate(self.rules) if not rule.keywords)
        self.always = tuple(self.rules[index] for index in self._always)
        words = {word for rule in self.rules for word in rule.keywords}
        # A zero-width search finds a keyword at every position, overlapping ones included;
        # the longest found there stands for the shorter ones it begins with.
        self._finder = re.compile(f"(?=({_trie(words)}))")
        self._runs: dict[str, frozenset[int]] = {
            found: frozenset(
                index
                for index, rule in enumerate(self.rules)
                if any(found.startswith(word) for word in rule.keywords)
            )
            for found in words
        }

    def starts(self, text: str) -> list[tuple[Rule, int]]:
        """The rules to run on `text`, in order, each with how often its keywords occur there:
        the rules with a keyword the text holds, and those with none (0). The text is
        case-folded as `(?i)` matches: the Kelvin sign and the long s are a `k` and an `s`."""
        found = Counter(match.group(1) for match in self._finder.finditer(text.casefold()))
        counts = dict.fromkeys(self._always, 0)
        for word, count in found.items():
            for index in self._runs[word]:
                counts[index] = counts.get(index, 0) + count
        return [(self.rules[index], counts[index]) for index in sorted(counts)]

    def matches(self, text: str) -> Iterator[tuple[Rule, str]]:
        """Each match of a rule to run in `text`, and the secret it holds.

        A rule that reaches, named more than `MAX_STARTS` times, reads one line at a time, and
        not a line that names it more often than that: no person writes one (`curl` 800 times
        on a line would cost the two curl rules a minute a quarter megabyte).
        """
        for rule, starts in self.starts(text):
            parts: Iterable[str] = (text,)
            if rule.reaches and starts > MAX_STARTS:
                parts = (line for line in text.splitlines() if _named(rule, line) <= MAX_STARTS)
            for part in parts:
                for match in rule.regex.finditer(part):
                    yield rule, rule.secret(match)


def _named(rule: Rule, line: str) -> int:
    folded = line.casefold()
    return sum(folded.count(word) for word in rule.keywords)


def build_rule_set(version: str, entries: list[dict[str, Any]]) -> RuleSet:
    rules: list[Rule] = []
    skipped: dict[str, str] = {}
    for entry in entries:
        if not entry.get("visible", True):
            skipped[entry["id"]] = "reported by Kingfisher only as another rule's dependency"
        elif entry["confidence"] not in RUN_CONFIDENCE:
            skipped[entry["id"]] = f"{entry['confidence']} confidence"
        else:
            try:
                rules.append(build_rule(entry))
            except (re.error, Warning) as exc:
                skipped[entry["id"]] = f"does not compile in Python's re: {exc}"
    return RuleSet(version, rules, skipped, len(entries))


# Loading --------------------------------------------------------------------------------------


def installed_build() -> tuple[str, str]:
    """The installed Kingfisher's version and its binary's sha256 as the wheel's RECORD has it."""
    version = metadata.version(DISTRIBUTION)
    files = metadata.files(DISTRIBUTION) or []
    digest = next((f.hash.value for f in files if str(f) == KINGFISHER_BINARY and f.hash), None)
    if digest is None:
        raise RuleSetUnavailable(f"{DISTRIBUTION} {version}'s RECORD names no {KINGFISHER_BINARY}")
    return version, digest


def cache_path(version: str, digest: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9]", "", digest)[:16]
    return Path(settings.VIRGO_HOME) / "cache" / f"kingfisher-{version}-{safe}.json"


def export_rules() -> list[dict[str, Any]]:
    """The rules as the installed binary lists them."""
    command = [kingfisher.get_binary_path(), "rules", "list", "--format", "json"]
    try:
        # Nothing of this process's environment (its settings, SECRET_KEY among them) is
        # the binary's business: listing rules needs none of it.
        result = subprocess.run(
            [*command, "--no-update-check", "--quiet"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
            env={},
        )
        return json.loads(result.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise RuleSetUnavailable(f"`{' '.join(command)}` failed: {exc}") from exc


def _write_cache(path: Path, entries: list[dict[str, Any]]) -> None:
    """Owner-private and atomic: another process reads the whole file or none."""
    private_directory(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    with os.fdopen(fd, "w") as handle:
        json.dump(entries, handle)
    os.replace(temporary, path)


def load_entries(version: str, digest: str) -> list[dict[str, Any]]:
    """Kingfisher's list from the cache, or from the binary (then cached for the next process).
    An installation whose VIRGO_HOME cannot be written pays for the binary in each process."""
    path = cache_path(version, digest)
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text())
    entries = export_rules()
    with contextlib.suppress(OSError):
        _write_cache(path, entries)
    return entries


@cache
def rule_set() -> RuleSet:
    """The installed Kingfisher's rules, compiled once per process."""
    version, digest = installed_build()
    return build_rule_set(version, load_entries(version, digest))
