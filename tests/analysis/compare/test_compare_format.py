"""`fwdasv.analysis.compare.format`: on a CPU, the telemetry a GPU would measure (no value
at either commit) is left out of the table and the Markdown, counted in one line; the JSON
keeps every row."""

from __future__ import annotations

import json

from fwdasv.analysis.compare.compare import Comparison, Judgement, Measurement
from fwdasv.analysis.compare.format import format_comparisons
from fwdasv.analysis.rules.status import CompareStatus, Status


def _side(commit: str, median: float | None) -> Measurement:
    status = "ok" if median is not None else "skipped"
    return Measurement(commit * 40, status, median, samples=(median,) if median else ())


def _row(benchmark: str, unit: str, before: float | None, after: float | None, verdict: Status):
    judged = Judgement(verdict, ratio=after / before if before and after else None)
    return Comparison(
        benchmark, "prefill_512", {"case": "prefill_512"}, "box", None, unit,
        _side("a", before), _side("b", after), judged,
    )  # fmt: skip


def test_telemetry_measured_at_neither_commit_is_counted_in_one_line() -> None:
    rows = [
        _row("forward.TinyLM.track_latency", "seconds", 0.042, 0.067, CompareStatus.WORSE),
        _row("forward.TinyLM.track_spread_pct", "%", 36.8, 65.6, CompareStatus.TELEMETRY),
        *(
            _row(f"forward.TinyLM.{name}", "MHz", None, None, CompareStatus.TELEMETRY)
            for name in ("track_sm_clock_mhz", "track_sm_clock_min_mhz", "track_power_capped_pct")
        ),
    ]
    table = format_comparisons(rows, "table")
    assert "track_latency" in table and "track_spread_pct" in table  # measured: shown
    assert "track_sm_clock" not in table and "track_power_capped_pct" not in table
    assert table.splitlines()[-1] == (
        "3 telemetry series with no value at either commit (not measured on this machine, "
        "e.g. GPU clocks on a CPU) not shown; --format json lists them"
    )
    assert "1 worse, 4 telemetry" in table  # the counts still hold every row
    markdown = format_comparisons(rows, "markdown")
    assert "track_sm_clock" not in markdown and "3 telemetry series with no value" in markdown
    document = json.loads(format_comparisons(rows, "json"))
    assert len(document["comparisons"]) == 5
    # Nothing left out, nothing said.
    assert "no value at either commit" not in format_comparisons(rows[:2], "table")
