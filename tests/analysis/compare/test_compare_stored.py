"""`fwdasv.analysis.compare.stored`: two commits' stored asv results compared, and `fwdasv
compare` on them, with its exit status.

Tiny asv projects on an existing environment (`--set-commit-hash`, one run per
commit) whose track_ benchmark returns seeded draws as samples, so the effect in the
data is known exactly: a 5% shift at the second commit and none at the third; and a
16-commit history whose level jitters by 1% from commit to commit while each commit's
samples spread by 0.1%, with a +10% shift: the noise rule flags the shift and not the
jitter, where Mann-Whitney on one run's samples flags both (and agrees with `asv
compare`). Then the demo model's history across the injected slow commit, and a move
of telemetry alone.
"""

from __future__ import annotations

import json
import math
import random

import pytest
from click.testing import CliRunner

from fwdasv.analysis.compare.compare import DEFAULT_FACTOR
from fwdasv.analysis.compare.stored import compare_commits
from fwdasv.analysis.rules.status import CompareStatus
from fwdasv.cli import main

FAILED, FIXED, IMPROVED = CompareStatus.FAILED, CompareStatus.FIXED, CompareStatus.IMPROVED
UNCHANGED, UNKNOWN, WORSE = CompareStatus.UNCHANGED, CompareStatus.UNKNOWN, CompareStatus.WORSE
NOT_SIGNIFICANT = CompareStatus.NOT_SIGNIFICANT


# --- real asv results with a known effect -----------------------------------------------

# Per commit: 1 ms, then 5% slower, then the same again (noise only); 1% noise, 25 samples.
SCALES = (1.0, 1.05, 1.05)
SAMPLES = 25


@pytest.fixture(scope="module")
def drawn(drawn_history) -> dict:
    history = drawn_history("compare-draws", SCALES, samples=SAMPLES)
    return {"project": history.project, "hashes": list(history.hashes)}


@pytest.mark.slow
def test_a_real_five_percent_shift_is_worse_and_exits_1(drawn: dict) -> None:
    project, (first, second, _) = drawn["project"], drawn["hashes"]
    # Three commits are too few to estimate a noise: the prior's 1% (as known) judges.
    (comparison,) = compare_commits(project, first, second, factor=1.03)
    assert comparison.verdict == WORSE, comparison
    assert comparison.judgement.method == "noise"
    assert comparison.noise.source == "prior" and comparison.noise.noise_pct == 1.0
    assert comparison.judgement.p_value < 0.002
    assert 1.04 < comparison.judgement.ratio < 1.06
    # asv's rule: Mann-Whitney on the 25 samples each.
    (comparison,) = compare_commits(project, first, second, factor=1.03, method="mann-whitney")
    assert comparison.verdict == WORSE, comparison
    assert comparison.judgement.method == "mann-whitney"
    assert comparison.judgement.p_value < 1e-6
    assert 1.04 < comparison.judgement.ratio < 1.06
    assert len(comparison.before.samples) == len(comparison.after.samples) == SAMPLES
    for method in ("noise", "mann-whitney"):
        result = CliRunner().invoke(
            main,
            [
                "compare",
                first[:10],
                second,
                "--config",
                str(project.config_path),
                "--factor",
                "1.03",
                "--method",
                method,
            ],
        )
        assert result.exit_code == 1, result.output
        assert "worse" in result.stdout and "bench.Drawn.track_latency(decode_bs8)" in result.stdout


@pytest.mark.slow
def test_noise_alone_is_not_significant_and_exits_0(drawn: dict) -> None:
    project, (_, second, third) = drawn["project"], drawn["hashes"]
    for method in ("noise", "mann-whitney"):
        (comparison,) = compare_commits(project, second, third, factor=1.03, method=method)
        assert comparison.verdict == NOT_SIGNIFICANT, comparison
        assert comparison.judgement.p_value > 0.002
        assert comparison.judgement.method == method
    result = CliRunner().invoke(
        main,
        ["compare", second, third, "--config", str(project.config_path), "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["counts"]["not-significant"] == 1
    assert document["comparisons"][0]["verdict"] == "not-significant"
    assert document["comparisons"][0]["noise_pct"] == 1.0


@pytest.mark.slow
def test_compare_by_branch_name_and_unknown_commit(drawn: dict) -> None:
    project, hashes = drawn["project"], drawn["hashes"]
    (comparison,) = compare_commits(project, hashes[0], "main", factor=1.03)
    assert comparison.after.commit == hashes[2]
    result = CliRunner().invoke(
        main, ["compare", "nosuchbranch", "main", "--config", str(project.config_path)]
    )
    assert result.exit_code == 2
    assert "Error: 'nosuchbranch' is not a commit" in result.stderr
    # A hash no commit has: said so, not "no stored results".
    result = CliRunner().invoke(
        main, ["compare", "deadbeef", "main", "--config", str(project.config_path)]
    )
    assert result.exit_code == 2
    assert "Error: 'deadbeef' is not a commit of" in result.stderr, result.stderr
    assert "no stored results" not in result.stderr


# --- a history whose level jitters from run to run ----------------------------------------

# 16 commits, +10% from commit 10 on; each commit's level off by 1% (a new process, a new
# state), while its 25 samples spread by only 0.1%: what one run's samples cannot show.
JITTER_COMMITS, JITTER_SHIFT_AT = 16, 10
_levels = random.Random(2026)
JITTER_SCALES = tuple(
    (1.10 if i >= JITTER_SHIFT_AT else 1.0) * (1 + 0.01 * _levels.gauss(0, 1))
    for i in range(JITTER_COMMITS)
)
# The no-op pair: the adjacent commits at one level whose level moved up the most (1.9%).
NO_OP = max(
    (i for i in range(JITTER_COMMITS - 1) if i + 1 != JITTER_SHIFT_AT),
    key=lambda i: JITTER_SCALES[i + 1] / JITTER_SCALES[i],
)


@pytest.fixture(scope="module")
def jittered(drawn_history):
    return drawn_history("compare-jitter", JITTER_SCALES, samples=SAMPLES, noise=0.001)


def _asv_compare(project, a: str, b: str, factor: float) -> dict[str, str]:
    """`asv compare` itself: benchmark -> its change mark (+ worse, - better, ~ or blank)."""
    from fwdasv.asv.project import run_asv

    lines: list[str] = []
    run_asv(
        project, "compare", a, b, "--machine", "testbox", "--factor", str(factor), echo=lines.append
    )
    marks = {}
    for line in lines:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[4].startswith("bench."):
            marks[cells[4]] = cells[0]
    return marks


@pytest.mark.slow
def test_noise_flags_the_shift_and_not_the_jitter_mann_whitney_flags_both(jittered) -> None:
    project, hashes = jittered.project, jittered.hashes
    a, b = hashes[NO_OP], hashes[NO_OP + 1]
    assert JITTER_SCALES[NO_OP + 1] / JITTER_SCALES[NO_OP] > 1.015  # the draws: a 1.5%+ jitter
    (shift,) = compare_commits(project, hashes[JITTER_SHIFT_AT - 1], hashes[JITTER_SHIFT_AT])
    assert (shift.verdict, shift.judgement.method) == (WORSE, "noise"), shift
    # The noise comes from the 16 commits' history: about the 1% jitter, not the 0.1%
    # the samples show (with the shift in the history, it is still about 1%).
    assert 0.6 < shift.noise.noise_pct < 1.6 and shift.noise.source != "prior", shift.noise
    assert shift.judgement.p_value < 0.002
    (no_op,) = compare_commits(project, a, b)
    assert (no_op.verdict, no_op.judgement.method) == (NOT_SIGNIFICANT, "noise"), no_op
    assert no_op.judgement.ratio > 1.015 and no_op.judgement.p_value > 0.01
    # Mann-Whitney on one run's samples each: the jitter is "significant".
    (asv_rule,) = compare_commits(project, a, b, method="mann-whitney")
    assert (asv_rule.verdict, asv_rule.judgement.method) == (WORSE, "mann-whitney"), asv_rule
    assert asv_rule.judgement.p_value < 1e-6

    def run(*args: str):
        return CliRunner().invoke(
            main, ["compare", *args, "--config", str(project.config_path), "--format", "json"]
        )

    result = run(a, b)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["comparisons"][0]["method"] == "noise"
    result = run(a, b, "--method", "mann-whitney")
    assert result.exit_code == 1, result.output
    result = run(hashes[JITTER_SHIFT_AT - 1], hashes[JITTER_SHIFT_AT])
    assert result.exit_code == 1, result.output


@pytest.mark.slow
def test_mann_whitney_gives_asvs_verdicts(jittered) -> None:
    project, hashes = jittered.project, jittered.hashes
    marks = {WORSE: "+", IMPROVED: "-"}
    pairs = [
        (hashes[NO_OP], hashes[NO_OP + 1]),  # a jitter: worse for both
        (hashes[NO_OP + 1], hashes[NO_OP]),  # and back: improved
        (hashes[JITTER_SHIFT_AT - 1], hashes[JITTER_SHIFT_AT]),  # the shift
    ]
    for factor in (DEFAULT_FACTOR, 1.05):
        for a, b in pairs:
            (ours,) = compare_commits(project, a, b, factor=factor, method="mann-whitney")
            theirs = _asv_compare(project, a, b, factor)[jittered.benchmark + "('decode_bs8')"]
            assert marks.get(ours.verdict, "") == theirs.replace("~", ""), (
                a[:8],
                b[:8],
                factor,
                ours,
                theirs,
            )


@pytest.mark.slow
def test_compare_across_the_demo_slow_commit(demo_history) -> None:
    """Real engine timings across the injected commit, by the paced series (the forward
    over the fixed workload, CPU times: what a neighbour's load does not move).

    asv's rule (Mann-Whitney on the samples) calls it worse: decode takes about twice
    as long in every process after it. The default judges each series by its
    12-commit history and says worse only when the change stands out of that noise:
    the verdict must agree with the noise the series' history shows.
    """
    from fwdasv.analysis.compare.stored import series_noise

    before = demo_history.hashes[demo_history.slow_index - 1]

    def run(*args: str):
        return CliRunner().invoke(
            main,
            [
                "compare",
                before,
                demo_history.slow_commit,
                "--config",
                str(demo_history.project.config_path),
                "--bench",
                # The paced series: its processes agree beside a neighbour's load, where
                # the latency's can read 20-68% apart (a loaded process before the commit
                # once read prefill -17% across it).
                "track_relative",
                "--format",
                "json",
                *args,
            ],
        )

    result = run("--method", "mann-whitney")
    assert result.exit_code == 1, result.output
    verdicts = {c["case"]: c for c in json.loads(result.stdout)["comparisons"]}
    # Decode: the soft-capped attention after it is about twice the GQA path's time over
    # the fixed workload, in every process.
    decode = verdicts["decode_bs8_2k"]
    assert decode["verdict"] == "worse", decode
    assert decode["ratio"] > 1.15 and decode["p_value"] < 0.002

    result = run()
    document = json.loads(result.stdout)
    noises = series_noise(demo_history.project, demo_history.machine)
    for comparison in document["comparisons"]:
        key = (
            comparison["machine"],
            comparison["env_name"],
            comparison["benchmark"],
            comparison["case"],
        )
        assert comparison["method"] == "noise"
        assert comparison["noise_pct"] == pytest.approx(noises[key].noise_pct)
        t = math.log(comparison["ratio"]) / (noises[key].sigma * math.sqrt(2))
        expected = (
            "worse"
            if comparison["p_value"] < 0.002 and comparison["ratio"] > 1.003
            else "unchanged"
            if comparison["p_value"] < 0.002
            else "not-significant"
        )
        assert comparison["verdict"] == expected and t > 0, comparison
    # One verdict per pair: a gating finding of the history between A and B fails as a
    # worse pair does (where the samples alone cannot tell 2x from the series' noise).
    fails = document["counts"]["worse"] or any(
        c["decided_by"] == "finding" for c in document["comparisons"]
    )
    assert result.exit_code == (1 if fails else 0), result.output


# Latency flat over 8 commits; the power-capped share steps up by half at the last one.
TELEMETRY_LATENCY = (1.0,) * 8
TELEMETRY_POWER = (1.0,) * 7 + (1.5,)


@pytest.fixture(scope="module")
def telemetry_moved(drawn_history):
    return drawn_history(
        "compare-telemetry", TELEMETRY_LATENCY, samples=SAMPLES, telemetry=TELEMETRY_POWER
    )


@pytest.mark.slow
def test_a_telemetry_only_move_is_shown_not_counted_and_exits_0(telemetry_moved) -> None:
    project, hashes = telemetry_moved.project, telemetry_moved.hashes
    found = {c.benchmark: c for c in compare_commits(project, hashes[-2], hashes[-1])}
    power = found["bench.Telemetry.track_power_capped_pct"]
    assert power.verdict == CompareStatus.TELEMETRY, power
    assert power.judgement.ratio > 1.4 and "moved up" in power.judgement.reason
    assert found[telemetry_moved.benchmark].verdict in (NOT_SIGNIFICANT, UNCHANGED)
    for method in ("noise", "mann-whitney"):
        result = CliRunner().invoke(
            main,
            [
                "compare",
                hashes[-2],
                hashes[-1],
                "--config",
                str(project.config_path),
                "--method",
                method,
                "--format",
                "json",
            ],
        )
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout)
        assert document["counts"]["worse"] == 0 and document["counts"]["telemetry"] == 1
        rows = {c["benchmark"]: c for c in document["comparisons"]}
        assert rows["bench.Telemetry.track_power_capped_pct"]["counted"] is False
        assert rows[telemetry_moved.benchmark]["counted"] is True
    table = CliRunner().invoke(
        main, ["compare", hashes[-2], hashes[-1], "--config", str(project.config_path)]
    )
    assert table.exit_code == 0 and "telemetry (%), not counted: moved up" in table.stdout
