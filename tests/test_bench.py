"""The benchmark driver's pieces on tiny inputs (bench/): parsing, figures, report, configs.

Nothing here runs wrk or a server, and nothing is timed: these prove that a run's numbers are
read, combined and written down correctly.
"""

import math
from pathlib import Path

import pytest

from bench import nginx, report, wrk
from bench.procs import Processes, free_port
from bench.run import last_task_end

WRK_OUTPUT = """\
Running 10s test @ http://127.0.0.1:8000/a/x/.well-known/agent-card.json
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.21ms    1.10ms  31.02ms   81.00%
    Req/Sec     7.71k   512.33     8.90k    70.50%
  Latency Distribution
     50%    3.98ms
     75%    4.60ms
     90%    5.31ms
     99%    1.20s
  153402 requests in 10.00s, 301.54MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 7
Requests/sec:  15338.44
Transfer/sec:     30.15MB
"""


def test_wrk_output_is_read_with_units_and_failures() -> None:
    result = wrk.parse(WRK_OUTPUT)
    assert result.requests_per_s == pytest.approx(15338.44)
    assert result.p50_ms == pytest.approx(3.98)
    assert result.p99_ms == pytest.approx(1200.0)
    assert result.requests == 153402
    assert result.errors == 7 + 2 + 1


def test_wrk_latency_in_microseconds() -> None:
    text = WRK_OUTPUT.replace("3.98ms", "912.00us")
    assert wrk.parse(text).p50_ms == pytest.approx(0.912)


def test_output_that_is_not_wrk_latency_output_is_refused() -> None:
    with pytest.raises(ValueError, match="not wrk --latency output"):
        wrk.parse("Requests/sec: 10\n")


def test_load_is_only_ever_sent_to_loopback() -> None:
    with pytest.raises(ValueError, match="loopback"):
        wrk.run("http://example.org/", seconds=1)


def _result(rate: float, p50: float = 1.0, p99: float = 2.0, errors: int = 0) -> wrk.WrkResult:
    return wrk.WrkResult(rate, p50, p99, int(rate * 10), errors)


def test_series_take_the_median_round_and_add_up_errors() -> None:
    series = report.LoadSeries("virgo", "200", [_result(100), _result(300, errors=2), _result(200)])
    assert series.requests_per_s == 200
    assert series.errors == 2
    table = report.load_table([series])
    assert "| virgo" in table
    assert "100 300 200" in table


def test_figure_lines_are_one_name_value_per_figure_in_issue_order() -> None:
    figures = {
        "stamps_per_s": 2450.4,
        "card_get_vs_a2a_sdk": 1.6666,
        "directory_queries_per_page": 3,
        "zz_extra": 0.5,
    }
    lines = report.figure_lines(figures)
    assert lines == [
        "card_get_vs_a2a_sdk=1.667",
        "directory_queries_per_page=3",
        "stamps_per_s=2450",
        "zz_extra=0.5",
    ]
    assert report.parse_figure_lines(["noise", *lines]) == pytest.approx(
        {name: float(value) for name, value in (line.split("=") for line in lines)}
    )


def test_values_print_as_plain_numbers() -> None:
    assert report.format_value(3) == "3"
    assert report.format_value(1.0) == "1"
    assert report.format_value(0.1234) == "0.123"
    assert report.format_value(math.nan) == "nan"
    assert report.ratio(1.0, 0.0) != report.ratio(1.0, 0.0)


def test_the_report_names_date_machine_versions_and_every_figure() -> None:
    text = report.markdown(
        date="2026-11-30 08:00 UTC",
        machine="2 cores",
        versions={"Django": "6.1.3", "nginx": "nginx/1.22.1"},
        setup=["Virgo: virgo-web"],
        sections=[("Card GET", "a table")],
        figures={"card_get_vs_a2a_sdk": 1.5, "worker_rss_growth": 1.01},
        targets={"card_get_vs_a2a_sdk": ">= 1.5"},
        notes=["a note"],
    )
    assert text.startswith("# Benchmarks\n")
    for expected in ("2026-11-30 08:00 UTC", "2 cores", "Django 6.1.3", "## Card GET", "a note"):
        assert expected in text
    assert "| card_get_vs_a2a_sdk | 1.5   | >= 1.5" in text
    assert text.rstrip().endswith("card_get_vs_a2a_sdk=1.5\nworker_rss_growth=1.01\n```")


def test_a_run_over_some_sections_keeps_the_others_dated_as_the_earlier_runs() -> None:
    """`make bench BENCH_ARGS=--only cli`: the sections it measured replace theirs where they
    stood, a new one goes last, the others and their figures stay titled with their run."""
    earlier = report.markdown(
        date="2026-12-03 18:05 UTC",
        machine="2 cores",
        versions={"Django": "6.1.3"},
        setup=["Virgo: virgo-web"],
        sections=[("Card GET", "card table"), ("Start-up", "old start-up"), ("Memory", "rss")],
        figures={"card_get_vs_a2a_sdk": 4.7, "worker_rss_growth": 1.01},
        targets={},
        notes=["old note"],
    )
    carried = report.carried_over(
        earlier, [("Start-up", "new start-up"), ("Command start-up", "cli table")]
    )
    assert carried.sections == [
        ("Card GET (run of 2026-12-03 18:05 UTC)", "card table"),
        ("Start-up", "new start-up"),
        ("Memory (run of 2026-12-03 18:05 UTC)", "rss"),
        ("Command start-up", "cli table"),
    ]
    assert carried.figures == {"card_get_vs_a2a_sdk": 4.7, "worker_rss_growth": 1.01}
    later = report.markdown(
        date="2026-12-06 23:40 UTC",
        machine="2 cores",
        versions={"Django": "6.1.3"},
        setup=["Virgo: virgo-web"],
        sections=carried.sections,
        figures={**carried.figures, "cli_start_vs_stock_django": 3.5},
        targets={},
        measured=["cli"],
    )
    assert "- This run measured cli only: a section titled with another run's date" in later
    assert "old note" not in later and later.count("## Setup") == 1
    # Carried again by a third run, a section keeps the date of the run that measured it.
    again = report.carried_over(later, [("Memory", "new rss")])
    assert again.sections[0] == ("Card GET (run of 2026-12-03 18:05 UTC)", "card table")
    assert ("Command start-up (run of 2026-12-06 23:40 UTC)", "cli table") in again.sections
    assert ("Memory", "new rss") in again.sections
    assert again.figures["cli_start_vs_stock_django"] == 3.5


def test_nginx_serves_the_card_at_its_own_path_with_the_security_headers(tmp_path: Path) -> None:
    path = "/a/0b5e/.well-known/agent-card.json"
    placed = nginx.write_site(root=tmp_path / "www", card_path=path, body=b"{}")
    assert placed == tmp_path / "www" / "a" / "0b5e" / ".well-known" / "agent-card.json"
    assert placed.read_bytes() == b"{}"
    conf = nginx.config(root=tmp_path / "www", port=8123, workers=2, run_dir=tmp_path)
    assert "listen 127.0.0.1:8123;" in conf
    assert "worker_processes 2;" in conf
    assert "access_log off;" in conf
    for name in nginx.SECURITY_HEADERS:
        assert f"add_header {name} " in conf


def test_every_process_started_is_stopped(tmp_path: Path) -> None:
    """The bench's promise: whatever it started, stop_all ends, children and clean-ups too."""
    processes = Processes(tmp_path)
    cleaned: list[str] = []
    processes.on_stop(lambda: cleaned.append("services"))
    started = processes.start("sleeper", ["sleep", "60"], env={"PATH": "/usr/bin:/bin"})
    assert started.poll() is None
    processes.stop_all()
    assert started.poll() is not None
    assert cleaned == ["services"]
    assert 0 < free_port() < 65536


def test_a_fan_out_ends_when_its_last_range_task_succeeded(tmp_path: Path) -> None:
    """The fan-out figure's end is the last settle_persona_range success in the worker's log,
    to the millisecond; a failed run, another task or a lookalike name is not it."""
    log = tmp_path / "celery.log"
    log.write_text(
        "[2026-12-03 13:58:11,058: INFO/ForkPoolWorker-1] Task personas.tasks.fan_out_skill_map"
        "[1] succeeded in 0.04s: 20\n"
        "[2026-12-03 13:58:11,968: INFO/ForkPoolWorker-1] Task personas.tasks.settle_persona_range"
        "[2] succeeded in 0.90s: 500\n"
        "[2026-12-03 13:58:12,500: INFO/ForkPoolWorker-2] Task personas.tasks.settle_persona_range"
        "[3] succeeded in 0.91s: 500\n"
        "[2026-12-03 13:58:13,000: ERROR/ForkPoolWorker-1] Task personas.tasks.settle_persona_range"
        "[4] raised unexpected: OperationalError()\n"
        "[2026-12-03 13:58:14,000: INFO/ForkPoolWorker-1] Task personas.tasks.settle_persona_ranges"
        "[5] succeeded in 0.01s: 0\n"
    )
    first = last_task_end(log, "fan_out_skill_map")
    assert round(last_task_end(log, "settle_persona_range") - first, 3) == 1.442
    with pytest.raises(RuntimeError, match="no reconcile_owed succeeded"):
        last_task_end(log, "reconcile_owed")
