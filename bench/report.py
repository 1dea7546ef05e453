"""The bench's output: a table for people, docs/benchmarks.md, and one `name=value` per figure."""

import math
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
) -> str:
    """The whole of docs/benchmarks.md for one run."""
    parts = [
        "# Benchmarks",
        "",
        "Written by `make bench` (bench/run.py); every number below is from the run dated here.",
        "Absolute rates drift between runs on shared machines; ratios from one interleaved run"
        " hold.",
        "",
        f"- Date: {date}",
        f"- Machine: {machine}",
        "- Versions: " + ", ".join(f"{name} {version}" for name, version in versions.items()),
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
