"""The bench's output: a table for people, docs/benchmarks.md, and one `name=value` per figure."""

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from bench.wrk import WrkResult

# Every figure issue 7 asks for, in the order the run prints them.
FIGURES = (
    "card_get_vs_a2a_sdk",
    "card_304_vs_a2a_sdk",
    "card_get_vs_nginx",
    "card_signed_get_vs_a2a_sdk",
    "cards_signed_per_s",
    "directory_100k_vs_1k",
    "directory_queries_per_page",
    "fanout_personas_per_s_1w",
    "fanout_scaling_2w_vs_1w",
    "stamps_per_s",
    "virgo_check_1k_s",
    "virgo_check_10k_s",
    "admin_queries_per_page",
    "admin_queries_per_page_100",
    "admin_queries_per_page_10k",
    "worker_rss_growth",
    "ard_search_100k_vs_1k",
    "ard_search_queries_per_page",
    "status_list_100k_bytes",
    "status_list_get_100k_ms",
)


@dataclass
class LoadSeries:
    """The interleaved rounds of one server under one kind of request."""

    server: str
    kind: str  # "200" or "304"
    rounds: list[WrkResult] = field(default_factory=list)

    @property
    def requests_per_s(self) -> float:
        return statistics.median(r.requests_per_s for r in self.rounds)

    @property
    def p50_ms(self) -> float:
        return statistics.median(r.p50_ms for r in self.rounds)

    @property
    def p99_ms(self) -> float:
        return statistics.median(r.p99_ms for r in self.rounds)

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.rounds)


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


def format_value(value: float | int) -> str:
    """Integers as they are; other numbers with three significant decimals at most."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "nan"
    if abs(value) >= 100:
        return str(round(value))
    return f"{value:.3f}".rstrip("0").rstrip(".")


def figure_lines(figures: Mapping[str, float | int]) -> list[str]:
    """One machine-readable `name=value` line per figure, in FIGURES order, then any others."""
    names = [name for name in FIGURES if name in figures]
    names += sorted(name for name in figures if name not in FIGURES)
    return [f"{name}={format_value(figures[name])}" for name in names]


def parse_figure_lines(lines: Iterable[str]) -> dict[str, float]:
    """Read back what figure_lines wrote (for whoever consumes a run's output)."""
    figures: dict[str, float] = {}
    for line in lines:
        name, sep, value = line.strip().partition("=")
        if sep and name.replace("_", "").isalnum() and " " not in name:
            try:
                figures[name] = float(value)
            except ValueError:
                continue
    return figures


# Sections every run writes itself, never carried over from an earlier one.
_OWN_SECTIONS = ("Setup", "Figures", "Notes")
_RUN_OF = re.compile(r" \(run of [^)]*\)$")


@dataclass(frozen=True)
class Carried:
    """What a run over some sections keeps of the last docs/benchmarks.md: the sections it did
    not measure, in the earlier document's order, each titled with the run that measured it."""

    sections: list[tuple[str, str]]
    figures: dict[str, float]


def carried_over(previous: str, sections: Sequence[tuple[str, str]]) -> Carried:
    """Merge `sections` (this run's) into `previous`: a section this run measured replaces the
    earlier one where it stood, a new one goes last, the others stay titled with their date.
    The figures of the earlier run whose names this run did not measure are kept too."""
    date = re.search(r"^- Date: (.+)$", previous, re.M)
    dated = f" (run of {date.group(1)})" if date else " (an earlier run)"
    mine = {title: body for title, body in sections}
    merged: list[tuple[str, str]] = []
    for chunk in re.split(r"^## ", previous, flags=re.M)[1:]:
        title, _, body = chunk.partition("\n")
        base = _RUN_OF.sub("", title)
        if base in _OWN_SECTIONS:
            continue
        if base in mine:
            merged.append((base, mine.pop(base)))
        else:
            kept = title if _RUN_OF.search(title) else base + dated
            merged.append((kept, body.strip("\n")))
    merged += list(mine.items())
    fenced = re.findall(r"^```\n(.*?)^```", previous, re.M | re.S)
    figures = parse_figure_lines(fenced[-1].splitlines()) if fenced else {}
    return Carried(merged, figures)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table that reads as plain text too."""
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    return "\n".join(
        [line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        + [line(r) for r in cells[1:]]
    )


def load_table(series: Sequence[LoadSeries]) -> str:
    return table(
        ["server", "response", "req/s (median)", "p50 ms", "p99 ms", "errors", "rounds"],
        [
            [
                s.server,
                s.kind,
                f"{s.requests_per_s:,.0f}",
                f"{s.p50_ms:.2f}",
                f"{s.p99_ms:.2f}",
                s.errors,
                " ".join(f"{r.requests_per_s:,.0f}" for r in s.rounds),
            ]
            for s in series
        ],
    )


def markdown(
    *,
    date: str,
    machine: str,
    versions: Mapping[str, str],
    setup: Sequence[str],
    sections: Sequence[tuple[str, str]],
    figures: Mapping[str, float | int],
    targets: Mapping[str, str],
    notes: Sequence[str] = (),
    measured: Sequence[str] = (),
) -> str:
    """The whole of docs/benchmarks.md for one run; `measured` names the sections of a run over
    some of them (the others carried over from the last run, each titled with its date)."""
    parts = [
        "# Benchmarks",
        "",
        "Written by `make bench` (bench/run.py); every number below is from the run dated here"
        + (", or from the earlier run a section's title names." if measured else "."),
        "Absolute rates drift between runs on shared machines; ratios from one interleaved run"
        " hold.",
        "",
        f"- Date: {date}",
        f"- Machine: {machine}",
        "- Versions: " + ", ".join(f"{name} {version}" for name, version in versions.items()),
        *(
            [
                f"- This run measured {', '.join(measured)} only: a section titled with another "
                "run's date, and its figures, are from that run."
            ]
            if measured
            else []
        ),
        "",
        "## Setup",
        "",
        *[f"- {line}" for line in setup],
    ]
    for title, body in sections:
        parts += ["", f"## {title}", "", body]
    parts += [
        "",
        "## Figures",
        "",
        table(
            ["figure", "value", "target"],
            [
                [name, format_value(value), targets.get(name, "")]
                for name, value in zip(
                    [line.split("=")[0] for line in figure_lines(figures)],
                    [figures[line.split("=")[0]] for line in figure_lines(figures)],
                    strict=True,
                )
            ],
        ),
    ]
    if notes:
        parts += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    parts += ["", "```", *figure_lines(figures), "```", ""]
    return "\n".join(parts)
