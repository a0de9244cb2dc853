"""`fwdasv compare` right after bisect: commits `asv run --steps` never stored are read from
the bench processes bisect kept (`fwdasv.analysis.compare.kept`), marked as re-measures."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers import STEP_INDEX, copy_project, invoke_cli, result_file

from fwdasv.analysis.confirm.processes import BISECT_DIR, ProcessPool, SeriesRef, kept_dir

DRAWN = SeriesRef("bench.Drawn", "decode_bs8")


class KeptPool(ProcessPool):
    """bisect's pool with its bench processes drawn at the boundary (`_launch`): each
    process is written to processes.jsonl by the pool's own code."""

    levels: dict[str, float]
    rng: random.Random

    def _set_up(self) -> None:
        pass

    def _launch(self, commit: str) -> dict[SeriesRef, float]:
        self.bench_processes += 1
        return {DRAWN: self.levels[commit] * (1 + self.rng.gauss(0, 0.001))}


@pytest.mark.slow
def test_compare_reads_the_processes_bisect_kept_of_commits_without_results(
    stepped, tmp_path: Path
) -> None:
    project = copy_project(stepped, tmp_path)
    good, parent, culprit, bad = (stepped.hashes[i] for i in (3, 5, 6, 8))
    for commit in (parent, culprit):  # between the measured commits (`asv run --steps`)
        result_file(project, commit).unlink()
    refused = invoke_cli(project, parent, culprit, command="compare")
    assert refused.exit_code == 2 and "no stored results" in refused.stderr, refused.output

    pool = KeptPool(project, (DRAWN,), kept_dir(project, BISECT_DIR, good, bad), resume=True)
    pool.machine = stepped.machine
    pool.levels = {parent: 1e-3, culprit: 1.05e-3}  # beyond the series noise (0.45%)
    pool.rng = random.Random(5)
    pool.measure([parent, culprit], 4)
    pool.mark_judged()  # a line that is no process (a confirm's): compare passes over it

    compared = invoke_cli(project, parent, culprit, "--format", "json", command="compare")
    assert compared.exit_code == 1, compared.output  # the step, from the kept processes
    rows = json.loads(compared.stdout)["comparisons"]
    (row,) = [r for r in rows if r["benchmark"] == "bench.Drawn.track_latency"]
    assert row["verdict"] == "worse" and 1.04 < row["ratio"] < 1.06, row
    assert row["before"]["source"] == row["after"]["source"] == "re-measure"
    assert row["before"]["sample_count"] == row["after"]["sample_count"] == 4
    table = invoke_cli(project, parent, culprit, command="compare")
    assert "4*/4*" in table.stdout and "bench processes bisect or confirm kept" in table.stdout
    # One side stored, the other kept: paired by the stored record's machine and environment.
    mixed = invoke_cli(project, stepped.hashes[STEP_INDEX - 2], culprit, "--format", "json",
                       command="compare")  # fmt: skip
    (row,) = [
        r for r in json.loads(mixed.stdout)["comparisons"]
        if r["benchmark"] == "bench.Drawn.track_latency"
    ]  # fmt: skip
    assert (row["before"]["source"], row["after"]["source"]) == ("asv", "re-measure"), row
