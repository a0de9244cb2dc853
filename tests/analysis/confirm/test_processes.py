"""`fwdasv.analysis.confirm.processes`: one pair's bench processes shared by all its findings.

The pool's one boundary, a bench process (`ProcessPool._launch`), is drawn here; the rest is
real: three findings of one pair, each judged by `confirm.run_confirmation` on its own
case's values through a `Cursor`, cost the processes the most demanding one needs, not
the sum (a decode decided at 3 a side, a prefill that needs 6).
"""

from __future__ import annotations

import math
import random

from fwdasv.analysis.confirm.processes import Cursor, ProcessPool, SeriesRef
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
