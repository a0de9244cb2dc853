"""`fwdasv.analysis.bisect.driver`: the ends, the probes, the answers.

First the real `Bisector` with its bench processes drawn at the boundary (`ProcessPool._launch`,
the one place a process is launched; values shaped as a paced CPU suite's): a doubled
forward is placed from one process a probe; ends that do not differ are "not reproducible";
an untestable commit next to the step leaves it "undecided" with the reason, never a guess;
a case too noisy to place a probe takes the verdict of the cases that do; a 5x step over
26 commits takes at most log2(26) + 3 bench runs. Then the demo model's real history: a
fresh asv project where only GOOD and BAD are stored, bisected with real bench processes.
"""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import pytest
from helpers import measuring_priority

from fwdasv.analysis.bisect import final_pair
from fwdasv.analysis.bisect.driver import Bisector, Track, bisect
from fwdasv.analysis.bisect.outcome import Answer
from fwdasv.analysis.bisect.rules import LOADED_PCT
from fwdasv.analysis.bisect.search import Search
from fwdasv.analysis.bisect.series import Followed
from fwdasv.analysis.confirm.processes import ProcessPool, SeriesRef
from fwdasv.analysis.rules.noise import Noise
from fwdasv.analysis.rules.status import BisectStatus

QUIET, NOISY = SeriesRef("forward.M", "decode"), SeriesRef("forward.M", "prefill")


class DrawnPool(ProcessPool):
    """Processes drawn around each commit's level (`levels[ref][index]`), sd per series."""

    levels: dict[SeriesRef, list[float]]
    sds: dict[SeriesRef, float]
    line: tuple[str, ...]
    rng: random.Random

    def _set_up(self) -> None:
        pass

    def _launch(self, commit: str) -> dict[SeriesRef, float]:
        self.bench_processes += 1
        index = self.line.index(commit)
        return {
            ref: self.levels[ref][index] * math.exp(self.rng.gauss(0, self.sds[ref]))
            for ref in self.series
        }


def _bisector(
    levels: dict[SeriesRef, list[float]],
    sds: dict[SeriesRef, float],
    claimed: dict[SeriesRef, float | None],
    *,
    prior: bool = True,
    refusal=None,
    seed: int = 1,
    echo=None,
) -> Bisector:
    count = len(next(iter(levels.values())))
    line = tuple(f"{i:040x}" for i in range(count))
    pool = DrawnPool(None, tuple(levels), None)  # type: ignore[arg-type]
    pool.levels, pool.sds, pool.line, pool.rng = levels, sds, line, random.Random(seed)
    tracks = []
    for ref in levels:
        noise = Noise(100 * sds[ref], 100 * sds[ref], None, 40, "history", 24.0)
        followed = Followed(ref, "ratio", noise if prior else None, claimed[ref])
        tracks.append(Track(followed, Search(line)))
    return Bisector(
        None,  # type: ignore[arg-type]
        "box",
        line,
        tracks,
        pool,
        refusal,
        echo=echo,
        subjects=dict.fromkeys(line, "subject"),
    )


def _step(count: int, at: int, ratio: float, base: float = 0.6) -> list[float]:
    return [base * (ratio if i >= at else 1.0) for i in range(count)]


def test_a_doubled_forward_is_placed_from_one_process_a_probe() -> None:
    bisector = _bisector({QUIET: _step(16, 9, 2.0)}, {QUIET: 0.02}, {QUIET: 95.0})
    (result,) = bisector.run()
    assert result.answer == Answer.FOUND and result.first_bad == bisector.line[9], result
    assert result.last_good == bisector.line[8]
    # GOOD and BAD two processes each, then one a probe: log2(15) probes.
    assert result.bench_processes == 4 + len(result.probes) <= 4 + 4, result
    assert result.bench_runs == 1 + len(result.probes)
    assert all(p.processes == 1 for p in result.probes)
    assert "last good" in result.evidence()


def test_each_series_prior_is_said_before_the_ends() -> None:
    """In check's words (`remeasure.prior_said`): the noise each series is judged with,
    and where it came from."""
    said: list[str] = []
    levels, sds = {QUIET: _step(8, 4, 2.0), NOISY: _step(8, 4, 2.0)}, {QUIET: 0.02, NOISY: 0.05}
    _bisector(levels, sds, {QUIET: 95.0, NOISY: 95.0}, echo=said.append).run()
    ends = next(i for i, line in enumerate(said) if line.startswith("GOOD "))
    assert "no stored history" not in said[ends], said
    assert said[ends + 1 : ends + 3] == [
        f"  {QUIET.name}: noise prior 2% from 40 stored commit(s) of the series on box",
        f"  {NOISY.name}: noise prior 5% from 40 stored commit(s) of the series on box",
    ], said
    # Without a stored history: the first line says so, and no prior is named.
    said.clear()
    _bisector(levels, sds, {QUIET: 95.0, NOISY: 95.0}, prior=False, echo=said.append).run()
    ends = next(i for i, line in enumerate(said) if line.startswith("GOOD "))
    assert said[ends].endswith("(no stored history: the run's own spread decides)"), said
    assert not [line for line in said if "noise prior" in line], said
    # One series with a stored history and one without: each says its own.
    said.clear()
    bisector = _bisector(levels, sds, {QUIET: 95.0, NOISY: 95.0}, echo=said.append)
    (_, noisy) = bisector.tracks
    noisy.followed = dataclasses.replace(noisy.followed, prior=None)
    bisector.run()
    ends = next(i for i, line in enumerate(said) if line.startswith("GOOD "))
    assert "no stored history" not in said[ends], said
    assert said[ends + 1].startswith(f"  {QUIET.name}: noise prior 2% from 40 stored"), said
    assert said[ends + 2] == (
        f"  {NOISY.name}: no stored history of the series on box: the processes decide"
    ), said


def test_a_5x_step_over_26_commits_takes_at_most_log2_plus_3_bench_runs() -> None:
    for seed in range(5):
        # From no stored samples (the run's own spread: 2+2 at the ends), an -80% step.
        bisector = _bisector(
            {QUIET: _step(26, 11, 0.2)}, {QUIET: 0.03}, {QUIET: None}, prior=False, seed=seed
        )
        (result,) = bisector.run()
        assert result.first_bad == bisector.line[11] and result.direction == -1, result
        assert result.bench_runs <= math.log2(26) + 3, result
        assert result.summary().startswith("first faster commit")


def test_ends_that_do_not_differ_are_not_reproducible() -> None:
    bisector = _bisector({QUIET: [0.6] * 9}, {QUIET: 0.002}, {QUIET: 2.0})
    (result,) = bisector.run()
    assert result.answer == Answer.NOT_REPRODUCIBLE and result.culprit is None, result
    assert "do not differ by the step" in result.reason and not result.probes


def test_an_untestable_commit_next_to_the_step_leaves_it_undecided() -> None:
    levels = {QUIET: _step(9, 5, 2.0)}
    line = tuple(f"{i:040x}" for i in range(9))
    refusal = {line[4]: "compiled code differs from the base's: csrc/x.cu"}.get
    bisector = _bisector(levels, {QUIET: 0.02}, {QUIET: 100.0}, refusal=refusal)
    (result,) = bisector.run()
    assert result.answer == Answer.UNDECIDED and result.culprit is None, result
    assert result.skipped == (line[4],)
    assert f"{line[4][:8]} (untestable)" in result.reason and line[5][:8] in result.reason
    untestable = [p for p in result.probes if p.decided_by == "untestable"]
    assert len(untestable) == 1 and untestable[0].processes == 0  # never measured


def test_a_noisy_case_takes_the_verdict_of_the_cases_that_place_a_probe() -> None:
    """One search for all the series that stepped: the prefill (2% a process) cannot place
    a probe of a 1% step in 12 processes; the decode (0.05%) can, and both name commit 6."""
    levels = {QUIET: _step(12, 6, 1.01), NOISY: _step(12, 6, 1.01)}
    bisector = _bisector(levels, {QUIET: 0.0005, NOISY: 0.02}, {QUIET: 1.0, NOISY: 1.0})
    quiet, noisy = bisector.run()
    assert quiet.first_bad == noisy.first_bad == bisector.line[6], (quiet, noisy)
    assert {p.decided_by for p in noisy.probes} == {"group"}
    assert all(p.verdict in (BisectStatus.GOOD, BisectStatus.BAD) for p in quiet.probes)


def _burst_over(bisector: Bisector, index: int, launches: int) -> None:
    """A neighbour's load over the first `launches` processes of commit `index`: every
    fourth of them reads 1.6 times slower, at BAD's level (3 of 12: the demo's bisect in a
    loaded CI run read 3 of a good probe's 12 processes past the midpoint)."""
    pool, commit, launch = bisector.pool, bisector.line[index], bisector.pool._launch
    seen = [0]

    def loaded(name: str) -> dict[SeriesRef, float]:
        values = launch(name)
        if name == commit:
            seen[0] += 1
            if seen[0] <= launches and seen[0] % 4 == 1:
                return {ref: 1.6 * value for ref, value in values.items()}
        return values

    pool._launch = loaded  # type: ignore[method-assign]


def test_a_probe_a_burst_left_unplaced_inside_the_final_pair_is_measured_again() -> None:
    """The last good commit, first probed, is left unplaced at 12 processes by a burst (3
    of 12 at BAD's level); the search places the others around it. Once the final pair
    holds it, it is measured again on fresh processes, placed good, and the step named;
    its first processes are set aside. A burst that lasts leaves it undecided, measured
    again once only, the answer naming both commits as before."""
    said: list[str] = []
    bisector = _bisector({QUIET: _step(9, 5, 1.6)}, {QUIET: 0.03}, {QUIET: 60.0}, echo=said.append)
    _burst_over(bisector, 4, launches=12)
    (result,) = bisector.run()
    log = "\n".join(said)
    assert result.answer == Answer.FOUND and result.first_bad == bisector.line[5], log
    assert result.last_good == bisector.line[4] and result.skipped == (), log
    first, *_, again = [p for p in result.probes if p.commit == bisector.line[4]]
    assert first.verdict == BisectStatus.UNKNOWN and first.processes == 12, log
    assert again.verdict == BisectStatus.GOOD and again.processes < 12, log
    assert f"{bisector.line[4][:8]}: not placed by 12 process(es) and left inside" in log
    # A burst that lasts: measured again once, then the answer is undecided, as before.
    said.clear()
    bisector = _bisector({QUIET: _step(9, 5, 1.6)}, {QUIET: 0.03}, {QUIET: 60.0}, echo=said.append)
    _burst_over(bisector, 4, launches=10**6)
    (result,) = bisector.run()
    assert result.answer == Answer.UNDECIDED and result.skipped == (bisector.line[4],), result
    assert f"{bisector.line[4][:8]} (undecided)" in result.reason, result.reason
    assert sum("measured again on fresh processes" in line for line in said) == 1, said


def test_a_bisect_of_a_confirmed_pair_starts_its_ends_from_confirms_processes(
    tmp_path: Path,
) -> None:
    """confirm keeps its processes (taking none back once its verdicts are recorded); a
    bisect of the same pair takes them for its ends and launches none for them; --again
    (fresh) ignores them."""
    from types import SimpleNamespace

    from fwdasv.analysis.bisect.driver import start_from_confirm
    from fwdasv.analysis.confirm.processes import BISECT_DIR, CONFIRM_DIR, kept_dir

    project = SimpleNamespace(config_path=tmp_path / "asv.conf.json")
    line = (f"{0:040x}", f"{1:040x}")
    levels, sds = {QUIET: [0.6, 0.606]}, {QUIET: 0.001}

    def pool(workdir: Path, **options: bool) -> DrawnPool:
        made = DrawnPool(None, (QUIET,), workdir, **options)  # type: ignore[arg-type]
        made.levels, made.sds, made.line, made.rng = levels, sds, line, random.Random(3)
        return made

    as_confirm = {"resume": True, "since_judged": True}
    confirmed = pool(kept_dir(project, CONFIRM_DIR, *line), **as_confirm)  # type: ignore[arg-type]
    confirmed.measure(line, 3)
    confirmed.mark_judged()
    again = pool(kept_dir(project, CONFIRM_DIR, *line), **as_confirm)  # type: ignore[arg-type]
    again.measure(line, 1)
    assert again.resumed == 0 and again.bench_processes == 2, "judged: none taken"
    again.mark_judged()
    workdir = kept_dir(project, BISECT_DIR, *line)  # type: ignore[arg-type]
    start_from_confirm(project, *line, workdir)  # type: ignore[arg-type]
    ends = pool(workdir, resume=True)
    ends.measure(line, 4)
    assert (ends.resumed, ends.bench_processes) == (8, 0)  # the JUDGED lines are no process
    assert ends.values(line[0], QUIET)[:3] == confirmed.values(line[0], QUIET)


# --- the demo's real history ----------------------------------------------------------------


@pytest.fixture(scope="module")
def bisect_project(demo_history, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A fresh asv project over the demo repo with only GOOD and BAD stored."""
    import shutil

    root = tmp_path_factory.mktemp("bisect")
    project = demo_history.new_project(root / "asv", results=False)
    # GOOD: just after the commit that made decoding faster; BAD: the last commit.
    good = demo_history.hashes[demo_history.fast_index]
    bad = demo_history.hashes[-1]
    source = demo_history.project.results_dir
    target = project.results_dir / demo_history.machine
    target.mkdir(parents=True)
    shutil.copy(source / "benchmarks.json", project.results_dir / "benchmarks.json")
    shutil.copy(source / demo_history.machine / "machine.json", target / "machine.json")
    for commit in (good, bad):
        (stored,) = (source / demo_history.machine).glob(f"{commit[:8]}-*.json")
        shutil.copy(stored, target / stored.name)
    return {"project": project, "good": good, "bad": bad}


@pytest.mark.slow
def test_bisect_finds_the_injected_commit_by_bench_processes(
    demo_history, bisect_project: dict
) -> None:
    project, good, bad = bisect_project["project"], bisect_project["good"], bisect_project["bad"]
    lines: list[str] = []
    history = {p.name: p.read_bytes() for p in (project.results_dir).rglob("*.json")}
    with measuring_priority():
        result = bisect(
            project,
            good,
            bad,
            # The paced series: a neighbour's load cancels in it (the latency's processes
            # read 20-68% apart beside 3 memory streamers, the ratio's 0.7-4.5%).
            demo_history.benchmark,
            demo_history.machine,
            "decode_bs8_2k",
            echo=lines.append,
        )
    log = "\n".join(lines)
    assert result.found and result.first_bad == demo_history.slow_commit, log
    assert result.last_good == demo_history.hashes[demo_history.slow_index - 1], log
    assert result.subject == "Support attention logit soft-capping"
    assert result.range_size == len(demo_history.hashes) - 1 - demo_history.fast_index
    assert result.summary().startswith("first bad commit: " + demo_history.slow_commit[:8])
    # GOOD and BAD interleaved first, then one line per probe placed.
    assert any(line.startswith(f"GOOD {good[:8]} and BAD {bad[:8]}, interleaved") for line in lines)
    for probe in result.probes:
        assert any(probe.commit[:8] in line and "->" in line for line in lines), log
    # Each commit measured in an environment of its own; nothing reaches the history.
    envs = Path(project.config_path).parent / ".fwdasv-envs"
    assert {p.commit[:12] for p in result.probes} <= {d.name for d in envs.iterdir()}
    assert {p.name: p.read_bytes() for p in project.results_dir.rglob("*.json")} == history


def test_a_search_whose_every_process_failed_records_nothing() -> None:
    """The ends kept from confirm, every probe's bench process failing (a bench that cannot
    import fwdasv): no answer (it would be the failures' "undecided"), one error instead."""
    from fwdasv.analysis.bisect.environment import BisectError
    from fwdasv.analysis.remeasure import RemeasureError

    bisector = _bisector({QUIET: _step(9, 5, 2.0)}, {QUIET: 0.02}, {QUIET: 100.0})
    line, pool = bisector.line, bisector.pool
    pool._kept = {
        c: [{QUIET: level} for _ in range(6)] for c, level in ((line[0], 0.6), (line[-1], 1.2))
    }

    def failing(commit: str) -> dict[SeriesRef, float]:
        raise RemeasureError(f"{commit[:8]}: the bench failed: exited with status 1")

    pool._launch = failing  # type: ignore[method-assign]
    with pytest.raises(BisectError, match="every bench process of this search failed"):
        bisector.run()
    assert pool.failed > 0 and pool.measured == 0 and pool.resumed > 0


def _recheck(c1_level: float, good: list[float], burst: float) -> tuple[Track, list[str], str]:
    """The final pair GOOD..c1 (c1 placed bad from 3 processes at 1.3, BAD's level) checked
    once more; every process of the re-check reads its commit's level times `burst`. What
    the track says after, the commits launched, and what was said."""
    said: list[str] = []
    bisector = _bisector(
        {QUIET: [1.0, c1_level, 1.3]}, {QUIET: 0.002}, {QUIET: 30.0}, echo=said.append
    )
    line, pool, (track,) = bisector.line, bisector.pool, bisector.tracks
    pool.processes = {
        line[0]: [{QUIET: v} for v in good],
        line[1]: [{QUIET: v} for v in (1.3, 1.301, 1.299)],
        line[2]: [{QUIET: v} for v in (1.3, 1.302, 1.298)],
    }
    track.change_pct = 30.0
    track.search = Search(line, decisions={1: BisectStatus.BAD})
    launched: list[str] = []

    def launch(commit: str) -> dict[SeriesRef, float]:
        launched.append(commit)
        return {QUIET: burst * pool.levels[QUIET][line.index(commit)]}

    pool._launch = launch  # type: ignore[method-assign]
    final_pair.recheck(bisector)
    return track, launched, "\n".join(said)


def test_after_a_loaded_process_the_final_pair_is_rechecked_beside_fresh_ends() -> None:
    """A good commit placed bad by a burst, re-checked inside a burst that lasts: against
    the ends' earlier processes its fresh ones still read bad; beside GOOD and BAD measured
    in the same burst they do not, and the answer is undecided. Only where a process of the
    run read LOADED_PCT off its commit's others: a quiet run re-checks the probe alone."""
    quiet, loaded = [1.0, 1.001, 0.999, 1.0], [1.0, 1.001, 1.0 + 1.3 * LOADED_PCT / 100, 1.0]
    g, c1, b = _bisector({QUIET: [1.0, 1.0, 1.3]}, {QUIET: 0.002}, {QUIET: 30.0}).line
    track, launched, log = _recheck(1.0, loaded, burst=1.3)
    assert launched == [g, c1, b] * 3, log
    assert track.answer == Answer.UNDECIDED, log
    assert f"{c1[:8]} measured again beside GOOD and BAD leans against" in track.reason, log
    # Against the ends' earlier processes it read at BAD's level, as before: no objection.
    (earlier,) = [line for line in log.splitlines() if line.endswith("(was bad)")]
    assert "confirmed; M->BAD" in earlier and "not-reproduced" in earlier, log
    # A bad commit, re-checked after the same load without a burst: its verdict stands.
    track, launched, log = _recheck(1.3, loaded, burst=1.0)
    assert launched == [g, c1, b] * 3 and track.answer is None, log
    # A quiet run: the probe alone, its verdict standing.
    track, launched, log = _recheck(1.3, quiet, burst=1.0)
    assert launched == [c1] * 3 and track.answer is None, log
    assert "beside" not in log, log


class _Cut(Exception):
    """A time limit, at the boundary: the bench process that would have run next."""


def test_a_bisect_cut_during_its_final_check_goes_on_from_that_checks_processes(
    tmp_path: Path,
) -> None:
    """Twice on an H100 (measurements section 50) a bisect was stopped by the device budget
    during the final pair's check on fresh processes. Its pool keeps every process: the
    next run takes back the ends', the probes' and the check's own, and launches only the
    check's rest, to the same answer."""
    levels, sds = {QUIET: _step(9, 5, 1.02)}, {QUIET: 0.002}

    def bisector(workdir: Path) -> Bisector:
        made = _bisector(levels, sds, {QUIET: 2.0}, seed=5)
        pool = DrawnPool(None, (QUIET,), workdir, resume=True)  # type: ignore[arg-type]
        pool.levels, pool.sds, pool.line, pool.rng = levels, sds, made.line, random.Random(5)
        return dataclasses.replace(made, pool=pool)

    whole = bisector(tmp_path / "whole")
    said: list[str] = []
    whole.echo = said.append
    (done,) = whole.run()
    assert done.first_bad == whole.line[5], said
    total = whole.pool.bench_processes
    assert any("the final pair once more" in line for line in said), said
    cut_at = total - 2  # two of the check's processes left to run
    cut = bisector(tmp_path / "cut")
    launch = cut.pool._launch

    def limited(commit: str) -> dict[SeriesRef, float]:
        if cut.pool.bench_processes >= cut_at:
            raise _Cut(commit)
        return launch(commit)

    cut.pool._launch = limited  # type: ignore[method-assign]
    with pytest.raises(_Cut):
        cut.run()
    on = bisector(tmp_path / "cut")
    (again,) = on.run()
    assert again.first_bad == done.first_bad
    assert (on.pool.resumed, on.pool.bench_processes) == (cut_at, 2)
