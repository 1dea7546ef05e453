"""The secrets boundary's scan (VX-SEC-16), for bench.run: Kingfisher's rules behind their keyword
prefilter (runtime.secret_rules) beside the same rules each run over the whole text, in-process.

Texts: the secret corpus's ordinary files (tests/secret_corpus.py, what a persona reads every
day) and the first 100 KiB of a large source file of the pinned Django (the same bytes on every
run). Each figure is the best of ROUNDS timings, as timeit advises: slower rounds measure the
machine's other work, not the scan. The figures are ratios of two timings taken side by side;
`find_secret`'s own time (the rules, detect-secrets' plugins and its keyword detector) is shown
beside them.
"""

import timeit
from collections.abc import Callable
from pathlib import Path

import django

from bench import report

ROUNDS = 5
SOURCE = Path(django.__file__).parent / "db" / "models" / "query.py"
SOURCE_BYTES = 100 * 1024


def source_text() -> str:
    """The first SOURCE_BYTES of SOURCE, cut at a line's end."""
    text = SOURCE.read_text()[:SOURCE_BYTES]
    return text[: text.rfind("\n") + 1]


def best_ms(work: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(work, number=number, repeat=ROUNDS)) / number * 1000


def measure() -> tuple[dict[str, float], str]:
    """The figures and the section's text."""
    from runtime.credentials import find_secret
    from runtime.secret_rules import rule_set
    from tests.secret_corpus import NEGATIVES

    rules = rule_set()

    def every_rule(text: str) -> list[str]:
        return [rule.secret(m) for rule in rules.rules for m in rule.regex.finditer(text)]

    def prefiltered(text: str) -> list[str]:
        return [secret for _, secret in rules.matches(text)]

    texts = {
        f"{len(NEGATIVES)} ordinary files": ([n.text for n in NEGATIVES], 20),
        f"{SOURCE_BYTES // 1024} KiB of Django's query.py": ([source_text()], 3),
    }
    rows: list[list[object]] = []
    ratios: list[float] = []
    for name, (batch, number) in texts.items():
        every = best_ms(lambda batch=batch: [every_rule(t) for t in batch], number)
        kept = best_ms(lambda batch=batch: [prefiltered(t) for t in batch], number)
        scan = best_ms(lambda batch=batch: [find_secret(t) for t in batch], number)
        ratios.append(report.ratio(every, kept))
        rows.append([name, f"{every:.2f}", f"{kept:.2f}", f"{ratios[-1]:.1f}", f"{scan:.2f}"])
    figures = {
        "secret_rules_prefilter_speedup_ordinary": ratios[0],
        "secret_rules_prefilter_speedup_100kb": ratios[1],
    }
    table = report.table(
        ["text", "every rule ms", "prefiltered ms", "speed-up", "find_secret ms"], rows
    )
    body = (
        f"Kingfisher {rules.version}: {len(rules.rules)} rules run, {len(rules.always)} of them "
        "on every text (no keyword); the others only on a text holding one of their keywords. "
        f"Best of {ROUNDS} rounds.\n\n{table}"
    )
    return figures, body
