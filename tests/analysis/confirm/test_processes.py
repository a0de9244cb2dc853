"""`fwdasv.analysis.confirm.processes`: one pair's bench processes shared by all its findings.

The pool's one boundary, a bench process (`ProcessPool._launch`), is drawn here; the rest is
real: three findings of one pair, each judged by `confirm.run_confirmation` on its own
case's values through a `Cursor`, cost the processes the most demanding one needs, not
the sum (a decode decided at 3 a side, a prefill that needs 6).
"""

from __future__ import annotations

import json
import math
import random

from fwdasv.analysis.confirm.processes import (
    FORMAT_LINE,
    PROCESSES_FILE,
    Cursor,
    ProcessPool,
    SeriesRef,
    set_aside,
)
from fwdasv.analysis.rules import confirm
from fwdasv.analysis.rules.status import Status

DECODE, PREFILL, MIX = (SeriesRef("forward.M", c) for c in ("decode", "prefill", "mix"))
PACED = SeriesRef("forward.M", "decode", relative=True)


class DrawnPool(ProcessPool):
    def _set_up(self) -> None:
        self.rng = random.Random(3)
        self.launched: list[str] = []

    def _launch(self, commit: str) -> dict[SeriesRef, float]:
        self.bench_processes += 1
        self.launched.append(commit)
        step = 1.02 if commit == "b" else 1.0
        sds = {DECODE: 0.0005, PREFILL: 0.01, MIX: 0.001}
        return {ref: step * math.exp(self.rng.gauss(0, sds[ref])) for ref in self.series}


def test_findings_of_one_pair_share_their_processes() -> None:
    pool = DrawnPool(None, (DECODE, PREFILL, MIX), None)  # type: ignore[arg-type]
    verdicts = {}
    for ref, noise in ((DECODE, 0.05), (PREFILL, 1.0), (MIX, 0.1)):
        cursor = Cursor(pool, "a", "b", ref)
        verdicts[ref] = confirm.run_confirmation(cursor.measure, noise, claimed_pct=2.0)
    assert all(v.status == Status.CONFIRMED for v in verdicts.values()), verdicts
    assert verdicts[DECODE].processes_a == 3 and verdicts[PREFILL].processes_a >= 6
    # A B A B ...: as many processes as the prefill needed, once, for all three findings.
    taken = verdicts[PREFILL].processes_a
    assert pool.bench_processes == 2 * taken and pool.launched[:4] == ["a", "b", "a", "b"]
    assert pool.count("a") == pool.count("b") == taken
    # The MIX finding, judged after the prefill had taken 6, measured nothing more.
    assert verdicts[MIX].processes_a == 3


def test_a_pool_runs_a_plan_as_one_bench_run() -> None:
    pool = DrawnPool(None, (DECODE,), None)  # type: ignore[arg-type]
    pool.run(["g", "m", "b"])
    pool.measure(["g", "b"], rounds=2)
    assert pool.launched == ["g", "m", "b", "g", "b", "g", "b"]
    assert pool.rounds == 2 and pool.count("g") == 3 and len(pool.values("m", DECODE)) == 1
    pool.measure(["g"], rounds=0)
    assert pool.rounds == 2
    assert PACED.name == "forward.M.track_relative(decode)"
    assert DECODE.shown(1.5e-3) == "1500.00 us" and "forward / workload" in PACED.shown(0.6)


def test_a_resumed_pool_takes_the_kept_processes_first(tmp_path) -> None:
    """A bisect cut short (a time limit) goes on where it stopped: its processes were kept."""
    first = DrawnPool(None, (DECODE, PREFILL), tmp_path, resume=True)  # type: ignore[arg-type]
    first.measure(["a", "b"], rounds=2)
    kept = {c: [first.values(c, DECODE), first.values(c, PREFILL)] for c in "ab"}
    (tmp_path / "processes.jsonl").write_text(
        (tmp_path / "processes.jsonl").read_text() + '{"commit": "a", "val'  # cut short
    )
    again = DrawnPool(None, (DECODE, PREFILL), tmp_path, resume=True)  # type: ignore[arg-type]
    again.measure(["a", "b"], rounds=3)
    assert again.resumed == 4 and again.launched == ["a", "b"]  # only the third round runs
    assert again.values("a", DECODE)[:2] == kept["a"][0]
    assert again.values("b", PREFILL)[:2] == kept["b"][1]
    # Another set of series (a line without one of them) is not taken.
    other = DrawnPool(None, (DECODE, MIX), tmp_path, resume=True)  # type: ignore[arg-type]
    other.measure(["a"])
    assert other.resumed == 0 and other.launched == ["a"]


def test_a_confirm_cut_short_goes_on_from_its_processes_a_judged_one_does_not(tmp_path) -> None:
    """A confirm stopped by a time limit after 5 of its pairs (an H200 run, measurements
    section 48) measured all of them again on the next call. A pool `since_judged` takes
    the processes after the last JUDGED line: a cut run's, never those a recorded verdict
    was judged from."""
    series = (DECODE, PREFILL)
    cut = DrawnPool(None, series, tmp_path, resume=True, since_judged=True)  # type: ignore[arg-type]
    cut.measure(["a", "b"], rounds=2)  # then stopped: no verdict, no JUDGED line
    on = DrawnPool(None, series, tmp_path, resume=True, since_judged=True)  # type: ignore[arg-type]
    assert on.kept == 4
    verdict = confirm.run_confirmation(Cursor(on, "a", "b", DECODE).measure, 0.05, claimed_pct=2.0)
    assert verdict.status == Status.CONFIRMED and verdict.processes_a == 3
    assert on.resumed == 4 and on.launched == ["a", "b"]  # only the third pair ran
    assert on.values("a", DECODE)[:2] == cut.values("a", DECODE)
    on.mark_judged()
    anew = DrawnPool(None, series, tmp_path, resume=True, since_judged=True)  # type: ignore[arg-type]
    assert anew.kept == 0, "a pair confirmed before is measured anew"
    anew.measure(["a", "b"])
    assert anew.launched == ["a", "b"]
    # A bisect's pool (every line) still takes all six pairs; JUDGED lines are no process.
    assert DrawnPool(None, series, tmp_path, resume=True).kept == 8  # type: ignore[arg-type]
    lines = (tmp_path / PROCESSES_FILE).read_text().splitlines()
    assert json.loads(lines[0]) == FORMAT_LINE
    assert sum('"judged"' in line for line in lines) == 1 and len(lines) == 10


def test_processes_kept_before_judged_lines_are_judged_ones(tmp_path) -> None:
    """Before judged lines, confirm kept its processes and took none back: a file of then
    holds only processes a verdict was judged from. A `since_judged` pool took them as a
    cut run's; it takes none, marks them judged, and goes on from its own if cut."""
    series = (DECODE, PREFILL)
    # As written then: process lines only (a pool that keeps and takes nothing back).
    DrawnPool(None, series, tmp_path, resume=True).measure(["a", "b"], rounds=3)  # type: ignore[arg-type]
    assert '"commit"' in (tmp_path / PROCESSES_FILE).read_text().splitlines()[0]
    first = DrawnPool(None, series, tmp_path, resume=True, since_judged=True)  # type: ignore[arg-type]
    assert first.kept == 0, "a verdict was judged from them"
    first.measure(["a", "b"])  # then cut: no verdict
    assert first.launched == ["a", "b"]
    on = DrawnPool(None, series, tmp_path, resume=True, since_judged=True)  # type: ignore[arg-type]
    assert on.kept == 2 and on.values("a", DECODE) == []
    on.measure(["a", "b"])
    assert on.resumed == 2 and on.values("a", DECODE) == first.values("a", DECODE)
    # Nothing kept is lost: bisect's pool (every line) still takes all eight pairs' worth.
    assert DrawnPool(None, series, tmp_path, resume=True).kept == 8  # type: ignore[arg-type]
    # Only a confirm's file starts with the format line; bisect's and check's are as before.
    bisect_dir = tmp_path / "bisect"
    DrawnPool(None, series, bisect_dir, resume=True).measure(["a"])  # type: ignore[arg-type]
    assert '"commit"' in (bisect_dir / PROCESSES_FILE).read_text().splitlines()[0]


def test_a_cursor_says_each_pair_as_soon_as_it_is_measured() -> None:
    """A vLLM process takes most of a minute: a look of 3 pairs is not said at its end."""
    pool = DrawnPool(None, (DECODE,), None)  # type: ignore[arg-type]
    said: list[tuple[int, int]] = []  # (pair, processes launched when it was said)
    cursor = Cursor(
        pool, "a", "b", DECODE, on_round=lambda n, a, b: said.append((n, len(pool.launched)))
    )
    cursor.measure(3)
    assert said == [(1, 2), (2, 4), (3, 6)]
    # Pairs the pool already holds (another finding's) are said at once, then the new ones.
    pool.measure(["a", "b"], rounds=2)
    said.clear()
    cursor.measure(3)
    assert said == [(4, 10), (5, 10), (6, 12)]


def test_a_kept_process_of_another_machine_is_not_taken(tmp_path) -> None:
    first = DrawnPool(None, (DECODE,), tmp_path, resume=True, machine="gpu-a")  # type: ignore[arg-type]
    first.measure(["a", "b"], rounds=2)
    other = DrawnPool(None, (DECODE,), tmp_path, resume=True, machine="gpu-b")  # type: ignore[arg-type]
    unnamed = DrawnPool(None, (DECODE,), tmp_path, resume=True)  # type: ignore[arg-type]
    same = DrawnPool(None, (DECODE,), tmp_path, resume=True, machine="gpu-a")  # type: ignore[arg-type]
    assert (other.kept, unnamed.kept, same.kept) == (0, 0, 4)
    same.measure(["a", "b"], rounds=2)
    assert same.resumed == 4 and same.launched == []
    assert same.values("a", DECODE) == first.values("a", DECODE)


def test_set_aside_keeps_the_processes_and_a_new_pool_measures_anew(tmp_path) -> None:
    assert set_aside(tmp_path) is None  # nothing kept: nothing to move
    first = DrawnPool(None, (DECODE,), tmp_path, resume=True)  # type: ignore[arg-type]
    first.measure(["a", "b"])
    text = (tmp_path / PROCESSES_FILE).read_text()
    aside = set_aside(tmp_path)
    assert aside is not None and aside.read_text() == text
    assert not (tmp_path / PROCESSES_FILE).exists()
    first.measure(["a", "b"])  # the same second: a second set-aside file, not an overwrite
    again = set_aside(tmp_path)
    assert again is not None and again != aside and aside.read_text() == text
    fresh = DrawnPool(None, (DECODE,), tmp_path, resume=True)  # type: ignore[arg-type]
    assert fresh.kept == 0
