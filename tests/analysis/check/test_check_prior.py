"""`fwdasv check`'s noise prior: each series' stored noise on the machine, as confirm's.

`stored_noise` reads real asv results (the session's drawn histories: `asv run` of seeded
draws); the looks are check's own (`_judged`, `_held`) on the H200's vLLM process medians
(docs/measurements.md, section 33).
"""

from __future__ import annotations

from helpers import bench_script

from fwdasv.analysis.check.check import _held, _judged, stored_noise
from fwdasv.analysis.confirm.processes import SeriesRef
from fwdasv.analysis.remeasure import prior_said
from fwdasv.analysis.rules.check import check_status
from fwdasv.analysis.rules.noise import estimate_noise

DRAWN = SeriesRef("bench.Drawn", "decode_bs8")


def test_the_prior_is_the_series_stored_noise_on_that_machine_only(stepped) -> None:
    other_case = SeriesRef("bench.Drawn", "decode_bs1")
    priors = stored_noise(stepped.project, [DRAWN, other_case], stepped.machine)
    assert set(priors) == {DRAWN}  # a case with no stored series has no prior
    prior = priors[DRAWN]
    # 12 commits of 25 samples at 1% each: a commit's median varies by about 0.2-0.3%.
    assert prior.commits_used >= 10 and 0.05 < prior.noise_pct < 0.6, prior
    assert prior.noise_pct < estimate_noise(()).noise_pct
    # Another machine's GPUs, or no machine named, are not this series'; a machine with no
    # results stored is no history, not results that could not be read: nothing is said.
    said: list[str] = []
    assert stored_noise(stepped.project, [DRAWN], "another-box", said.append) == {}
    assert stored_noise(stepped.project, [DRAWN], None, said.append) == {}
    assert said == []
    said = prior_said(prior, stepped.machine, True)
    assert said.startswith("noise prior ") and f"of the series on {stepped.machine}" in said
    assert "the processes decide" in prior_said(None, "gpu-a", True)
    assert "--no-history" in prior_said(None, "gpu-a", False)


def test_a_paced_case_takes_its_forward_over_the_workload_series(drawn_history) -> None:
    jitter = (1.0, 1.03, 0.97, 1.02, 0.98, 1.04, 0.96, 1.0)
    history = drawn_history("check-prior-paced", (1.0,) * 8, samples=5, paced=jitter)
    paced = SeriesRef("bench.Paced", "decode_bs8", relative=True)
    latency = SeriesRef("bench.Paced", "decode_bs8")
    priors = stored_noise(history.project, [paced, latency], history.machine)
    assert set(priors) == {paced, latency}
    # The forward over the workload jitters by 3% from commit to commit, the latency does
    # not: each case is judged with its own series' noise.
    assert priors[paced].noise_pct > 2 * priors[latency].noise_pct, priors
    # Three commits say nothing beyond the prior of nothing: no stored prior, not a 1% one.
    short = drawn_history("check-prior-short", (1.0,) * 3, samples=5)
    assert stored_noise(short.project, [DRAWN], short.machine) == {}


def test_with_the_h200s_stored_noise_a_docs_only_pair_is_decided_at_the_first_look() -> None:
    """The H200's vLLM medians (0.02-0.05% apart): with no history the docs-only pair took
    9 a side (about 15 minutes of an H200); with a stored series of that spread it is
    `unchanged` at 3, and the ~1% pull request is still `worse` after the hold at 6."""
    with bench_script("verdicts/check_looks.py") as looks:
        stored = [[1572.9 * (1 + d / 100)] for d in (0.03, -0.02, 0.05, -0.04, 0.0, 0.02) * 5]
        prior = estimate_noise(stored)
        assert prior.source == "history" and prior.noise_pct < 0.1, prior
        same = looks.Draws([1572.78, 1573.39, 1573.09] * 4, [1573.26, 1573.26, 1573.04] * 4)
        verdict = _held(_judged(same, prior, 0.3, 12), same, prior, 0.3, 12, None)  # type: ignore[arg-type]
        assert check_status(verdict, 0.3) == "unchanged" and same.taken == 3, verdict.summary()
        slower = looks.Draws([1553.25, 1553.86, 1553.09] * 4, [1572.78, 1572.91, 1572.96] * 4)
        verdict = _held(_judged(slower, prior, 0.3, 12), slower, prior, 0.3, 12, None)  # type: ignore[arg-type]
        assert check_status(verdict, 0.3) == "worse" and slower.taken == 6, verdict.summary()


def test_the_prior_is_the_one_confirm_judges_the_series_findings_with(demo_history) -> None:
    """The demo's real history (a fwdasv suite: its commits' samples split into processes):
    each judged series' prior is its findings' noise (loaded processes left out) as one
    process's median, `Noise.per_process` of the processes a commit pooled, as
    `fwdasv confirm` takes it (`confirm.reproduce`)."""
    from fwdasv.analysis.findings import findings
    from fwdasv.analysis.findings.series import load_series
    from fwdasv.analysis.remeasure import process_layout, processes_per_commit

    project = demo_history.project
    found = findings.find(project)
    assert found, "the demo history has its findings"
    _, series = load_series(project, demo_history.machine)
    for finding in found:
        ref = SeriesRef.of(finding.key)
        layout = process_layout(project, finding.key.benchmark)
        assert layout is not None, finding.key  # a fwdasv suite
        processes = processes_per_commit(
            series[finding.key].history, layout.samples, layout.launches
        )
        priors = stored_noise(project, [ref], finding.key.machine)
        assert priors[ref] == finding.noise.per_process(processes), (finding.key, priors)
        assert priors[ref].noise_pct >= finding.noise.noise_pct
