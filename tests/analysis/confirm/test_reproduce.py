"""fwdasv confirm end to end on the CPU: a finding re-measured A/B, recorded, explained, gated.

The demo model's history (`demo_history`: 12 commits measured by real asv)
holds a finding at the injected slow commit (prefill_512, or decode_bs8_2k). Its results are
copied into an asv project of their own (same repository, the session's
shared virtualenv), so the verdicts written here reach no other test. There
`fwdasv confirm` installs A (the commit before the step, one more back) and
B (one after it) in turn into asv's environment and runs one bench process
each, A B A B A B (3 a side at most), judges the process medians, appends
the verdict to fwdasv-verdicts.jsonl, profiles A and B and stores the op
diff; `fwdasv regressions` then says `confirmed` and exits 1, and nightly
gates on it. An undecided confirmation (a neighbour on this shared VM slowed a
whole process) is run once more, as on any noisy machine.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import measuring_priority, scale_stored_case

from fwdasv.analysis.explain.kernel_diff import DEFAULT_ROUNDS
from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.finding import to_re_measure
from fwdasv.analysis.findings.series import load_series
from fwdasv.analysis.findings.verdict_file import VERDICTS_FILE
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.remeasure import processes_per_commit
from fwdasv.analysis.rules.status import TO_CONFIRM, Status
from fwdasv.cli import main

CASES = ("prefill_512", "decode_bs8_2k")  # the one confirmed: the first with a finding


def test_processes_per_commit_counts_what_was_stored() -> None:
    # 10 samples a process: 2 launches, then a second round appended (asv --append-samples).
    assert processes_per_commit([[1.0] * 20] * 5, 10, launches=2) == 2
    assert processes_per_commit([[1.0] * 40] * 4 + [[1.0] * 20], 10, launches=2) == 4
    assert processes_per_commit([[], []], 10, launches=2) == 2  # nothing stored: the suite's
    assert processes_per_commit([[1.0] * 3], 10, launches=1) == 1  # never below one


def test_one_process_noise_is_the_commits_noise_times_the_root_of_its_processes() -> None:
    """The one rule confirm, bisect and check scale a stored history's noise by: a commit
    that pooled P processes varies sqrt(P) times less than one process's median."""
    from fwdasv.analysis.remeasure import ProcessLayout, one_process_noise
    from fwdasv.analysis.rules.noise import estimate_noise

    history = [[1.0 + d / 1000] * 40 for d in (1, -1, 2, 0, -2, 1, 0, -1)]
    noise = estimate_noise(history)
    assert noise.source != "prior"
    scaled = one_process_noise(noise, history, ProcessLayout(samples=10, launches=2))
    assert scaled.noise_pct == pytest.approx(noise.noise_pct * 2)  # 4 processes a commit
    assert one_process_noise(noise, history, None) is noise  # not a fwdasv suite: as stored


def _finding_block(log: str, name: str, a: str, b: str) -> list[str]:
    """The log's lines of one finding's re-measure: from its `[n/N] NAME ... re-measuring A
    .. and B .., interleaved` line to the next finding's or pair's line."""
    lines = log.splitlines()
    starts = [
        i
        for i, line in enumerate(lines)
        if name in line and f"re-measuring A {a[:8]} and B {b[:8]}, interleaved" in line
    ]
    assert len(starts) == 1, f"{len(starts)} re-measures of {name}, {a[:8]}..{b[:8]}:\n{log}"
    block = []
    for line in lines[starts[0] + 1 :]:
        if line.lstrip().startswith(("[", "pair ")):
            break
        block.append(line)
    return block


@pytest.fixture(scope="module")
def confirmed(demo_history, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The demo's results in a project of their own, after `fwdasv confirm` on prefill_512."""
    root = tmp_path_factory.mktemp("confirm")
    project = demo_history.new_project(root / "asv")
    everything = findings.find(project)
    slow = demo_history.slow_commit
    # Both cases step at the injected commit; a noisy history may show one of them.
    found = []
    for case in CASES:
        found = [f for f in everything if f.key.case == case and f.after_commit == slow]
        if found:
            break
    assert found, (
        f"no finding at the injected commit after {demo_history.passes} pass(es) of the demo "
        f"history: {[(f.key.name, f.after_commit[:8], f.percent) for f in everything]}"
    )
    attempts = []
    with measuring_priority():
        # A neighbour on this shared VM can slow one whole bench process by 50%; with
        # 3 processes a side the run's own variance then leaves the verdict undecided
        # (seen in one of two full test runs), and the finding stays a regression. As one would:
        # confirm once more (a fresh 3 + 3), not more.
        for _ in range(2):
            attempts.append(
                CliRunner().invoke(
                    main,
                    [
                        "confirm",
                        "--config",
                        str(project.config_path),
                        "--bench",
                        case,
                        "--max-processes",
                        "3",
                        "--no-improvements",  # the speed-up's re-measure: a test of its own
                        "--format",
                        "json",
                    ],
                )
            )
            # Decided when this finding is (a neighbour's load can list another one in the
            # case, re-measured beside it: its verdict is not what this test is about).
            statuses = [f.status for f in findings.find(project) if f.ident == found[0].ident]
            if not set(statuses) & {Status.REGRESSION, Status.SUSPECTED}:
                break
    return {
        "project": project,
        "result": attempts[-1],
        "attempts": attempts,
        "finding": found[0],
        "case": case,
    }


@pytest.mark.slow
def test_confirm_remeasures_interleaved_records_and_explains(demo_history, confirmed) -> None:
    project, result, case = confirmed["project"], confirmed["result"], confirmed["case"]
    hashes, slow = demo_history.hashes, demo_history.slow_index
    # A and B: one commit outside the finding's pair each side, inside its two levels.
    a, b = hashes[slow - 2], hashes[slow + 1]
    log = result.stderr
    # One bench process at a time, A then B, three times (in this finding's block of the log:
    # a neighbour's load can list another finding in the case, re-measured beside it).
    block = _finding_block(log, confirmed["finding"].key.name, a, b)
    processes = [line.strip() for line in block if line.strip().startswith("process ")]
    assert [p.split(":")[0] for p in processes] == ["process 1", "process 2", "process 3"], log
    # Each commit installed once, into an environment of its own (issue 19: not again at
    # every switch): the explain that follows, a second confirm attempt or another finding of
    # the pair finds it already there.
    installs = [
        line.split()[0].rstrip(":")
        for line in log.splitlines()
        if "installing it unless it is there" in line
    ]
    assert {a[:8], b[:8]} <= set(installs), log
    assert installs.index(a[:8]) < installs.index(b[:8]), log  # A first, then B
    for commit in set(installs):
        reused = log.count(f"{commit}: already installed there")
        assert reused >= installs.count(commit) - 1, (commit, log)
    assert result.exit_code == 1, result.output

    # This finding's entry (a neighbour's load can list another one in the case).
    (entry,) = [
        e
        for e in json.loads(result.stdout)["regressions"]
        if e["case"] == case and e["after_commit"] == demo_history.slow_commit
    ]
    assert entry["status"] == "confirmed", (entry["verdict"], log)

    every = [
        json.loads(line) for line in (project.results_dir / VERDICTS_FILE).read_text().splitlines()
    ]
    ident = confirmed["finding"].ident.to_json()
    lines = [line for line in every if line["finding"] == ident]
    # The confirmation, then its explanation: appended, both about this finding (after an
    # undecided first attempt's line, if there was one).
    undecided = len(confirmed["attempts"]) - 1
    statuses = [line["status"] for line in lines]
    assert statuses == ["undecided"] * undecided + ["confirmed", "confirmed"], every
    # Any other line is about another finding of the case, re-measured beside it.
    others = [line for line in every if line["finding"] != ident]
    assert all(line["finding"]["case"] == case for line in others), others
    confirmation = lines[undecided]["confirmation"]
    assert (confirmation["a_commit"], confirmation["b_commit"]) == (a, b)
    assert confirmation["processes_a"] == confirmation["processes_b"] == 3
    assert confirmation["status"] == "confirmed"
    assert confirmation["lower_pct"] > 0 and confirmation["percent"] > 10, confirmation
    assert confirmation["t"] >= confirmation["t_threshold"]
    # The floor is the history's noise per process (a commit pools one process a pass).
    history = load_series(project)[1][confirmed["finding"].key].history
    history_processes = processes_per_commit(history, 10, 1)
    assert history_processes == demo_history.passes
    expected_floor = confirmed["finding"].noise.per_process(history_processes).noise_pct
    assert confirmation["floor_pct"] == pytest.approx(expected_floor)
    assert confirmation["summary"].startswith("confirmed: B +")

    explain = lines[-1]["explain"]
    # The injected commit computes attention explicitly: matmuls, a mask, a softmax.
    assert {"aten::bmm", "aten::_softmax"} & set(explain["top5"]), explain["top5"]
    total_us = explain["total_delta_us"]
    if total_us <= 0:
        # explain times the ops by wall clock under the profiler, so one disturbed round (the
        # other tests run beside these at nice 19) can turn the sum's sign; profile once more,
        # as a user would, with the reason printed.
        print(f"explain's op time read {total_us:+.1f} us at the injected commit: profiling again")
        with measuring_priority():
            again = CliRunner().invoke(
                main,
                [
                    "explain",
                    "--config",
                    str(project.config_path),
                    a,
                    b,
                    confirmed["finding"].key.benchmark,
                    "--case",
                    case,
                    "--format",
                    "json",
                ],
            )
        assert again.exit_code in (0, 1), again.output
        total_us = json.loads(again.stdout)["total_delta_us"]
    assert total_us > 0
    assert a[:8] in explain["headline"] and b[:8] in explain["headline"]
    # Each side profiled DEFAULT_ROUNDS times, interleaved (its spread: the noise band).
    profiles = list(Path(explain["profile_dir"]).glob(f"*/{case}.rank0.kernels.json"))
    assert len(profiles) == 2 * DEFAULT_ROUNDS, explain["profile_dir"]

    # fwdasv regressions: confirmed, and it gates.
    listing = CliRunner().invoke(
        main, ["regressions", "--config", str(project.config_path), "--format", "json"]
    )
    assert listing.exit_code == 1, listing.output
    (listed,) = [
        e
        for e in json.loads(listing.stdout)["regressions"]
        if e["case"] == case and e["after_commit"] == demo_history.slow_commit
    ]
    assert listed["status"] == "confirmed"
    assert listed["verdict"]["confirmation"] == confirmation
    assert listed["verdict"]["explain"] == explain


@pytest.mark.slow
def test_nightly_gates_on_confirmed_findings(demo_history, tmp_path: Path) -> None:
    """Nightly over the demo's results (nothing new to measure): exit 1 while a finding is
    confirmed, 0 once a later re-measure ruled it out. The confirmation is recorded here,
    as `fwdasv confirm` records one, so this stands apart from the confirm test."""
    project = demo_history.new_project(tmp_path / "asv")
    found = findings.find(project)
    latency = [f for f in found if f.key.benchmark == demo_history.benchmark]
    assert latency, f"no paced finding in the demo history: {[f.key.name for f in found]}"
    ours = next((f for f in latency if f.after_commit == demo_history.slow_commit), latency[0])
    record_verdict(project, ours, status=Status.CONFIRMED)
    # Other findings of the demo's noisy history (if any; the decode speed-up, which nightly
    # re-measures too) are taken as ruled out, so nightly has nothing left to re-measure here.
    for other in findings.find(project, improvements=True):
        if to_re_measure(other) and other.ident != ours.ident:
            record_verdict(project, other, status=Status.NOT_REPRODUCED)

    def nightly():
        return CliRunner().invoke(
            main,
            [
                "nightly",
                "--config",
                str(project.config_path),
                "--machine",
                "testbox",
                "--machine-file",
                str(tmp_path / "machine.json"),
            ],
        )

    first = nightly()
    # Every commit already has results: asv has nothing to run, which is no failure.
    assert "no new commit to measure" in first.output, first.output
    assert "[nightly] 5/7 nothing to confirm" in first.output, first.output
    assert first.exit_code == 1, first.output
    assert "confirmed" in first.output
    record_verdict(project, ours, status=Status.NOT_REPRODUCED)
    second = nightly()
    assert second.exit_code == 0, second.output
    assert (project.html_dir / "fwdasv" / "findings.html").is_file()
    # Nothing was measured: every commit had results.
    stored = subprocess.run(
        ["git", "-C", str(project.repo), "rev-list", "main"], capture_output=True, text=True
    ).stdout.split()
    assert len(list(project.results_dir.glob("testbox/*-*.json"))) == len(stored)


def _confirm_speed_ups(project, every, case: str):
    """`fwdasv confirm` of `case`'s speed-ups alone (JSON listing, no explain, up to 6
    processes a side): the slowdowns of `every` recorded as re-measured first, as they are
    not what these tests re-measure. (The result, the confirm's arguments.)"""
    for other in every:
        if other.status in TO_CONFIRM:
            record_verdict(project, other, status=Status.NOT_REPRODUCED)
    args = ["confirm", "--config", str(project.config_path), "--bench", case]
    args += ["--max-processes", "6", "--no-explain", "--format", "json"]
    with measuring_priority():
        return CliRunner().invoke(main, args), args


@pytest.mark.slow
def test_confirm_re_measures_a_speed_up_and_keeps_it_an_improvement(
    demo_history, tmp_path: Path
) -> None:
    """The decode case's speed-up (about a third of the time from the demo's GQA commit):
    `fwdasv confirm` re-measures it as it would a slowdown, B faster than A; confirmed, it
    stays `improvement` (never gating, never bisected) and is not re-measured again."""
    project = demo_history.new_project(tmp_path / "asv")
    case = "decode_bs8_2k"
    every = findings.find(project, improvements=True)
    # The GQA step: the speed-up whose range holds the GQA commit (a neighbour's load can
    # list a small one of its own, re-measured beside it). Its size is the load's too: about
    # -66% on a quiet box, -39% seen beside the suite's other tests.
    gqa = demo_history.hashes[demo_history.fast_index]
    (speed_up,) = [
        f
        for f in every
        if f.key.case == case
        and f.status == Status.IMPROVEMENT
        and gqa in {c.hash for c in f.commits}
    ]
    assert speed_up.percent < -20, speed_up.percent
    result, args = _confirm_speed_ups(project, every, case)
    assert result.exit_code == 0, result.output  # a speed-up never gates
    assert "one interleaved A/B" in result.stderr, result.stderr
    (entry,) = [
        e
        for e in json.loads(result.stdout)["regressions"]
        if e["case"] == case and e["after_commit"] == speed_up.after_commit
    ]
    assert entry["status"] == "improvement", entry["verdict"]
    confirmation = entry["verdict"]["confirmation"]
    assert confirmation["status"] == "confirmed", confirmation
    # Told B over A: B faster, the whole interval below zero, the speed-up's size tested.
    assert confirmation["upper_pct"] < 0 and confirmation["percent"] < -20, confirmation
    assert confirmation["tested_pct"] < 0, confirmation
    assert confirmation["summary"].startswith("confirmed: B -"), confirmation["summary"]
    assert entry["re_measured"]["outcome"] == "confirmed"
    assert entry["culprit"] is None
    again = CliRunner().invoke(main, args)
    assert "nothing to confirm" in again.stderr + again.stdout, again.output
    # `fwdasv regressions` lists it as it was listed.
    listing = CliRunner().invoke(
        main,
        ["regressions", "--config", str(project.config_path), "--improvements", "--format", "json"],
    )
    listed = [e for e in json.loads(listing.stdout)["regressions"] if e["status"] == "improvement"]
    assert speed_up.after_commit in {e["after_commit"] for e in listed}, listing.stdout


@pytest.mark.slow
def test_confirm_sets_aside_a_speed_up_made_by_one_slow_first_process(
    demo_history, tmp_path: Path
) -> None:
    """The demo history's prefill case with its first commit's stored result read 40% slow
    or more (one odd process): the series lists an `improvement` after it, which nothing but
    a re-measure can tell from a real one; `fwdasv confirm` measures that commit beside the
    next but one, finds them alike, and the speed-up is set aside as `not-reproduced`; or,
    on a quiet run, finds the GQA commit's real prefill speed-up in that pair, a fraction
    of the claimed size, and the finding stays an improvement at that size."""
    project = demo_history.new_project(tmp_path / "asv")
    case, first = "prefill_512", demo_history.hashes[0]
    (stored,) = (project.results_dir / demo_history.machine).glob(f"{first[:8]}-*.json")
    original = stored.read_text()
    # As slow as it takes to stand out of this history's noise (a busy run's is wider).
    for factor in (1.4, 2.0, 3.0):
        stored.write_text(original)
        scale_stored_case(
            stored, case, factor, (demo_history.benchmark, "forward.TinyLM.track_latency")
        )
        every = findings.find(project, improvements=True)
        # The speed-up after the first commit (a neighbour's load can list another one).
        listed = [
            f
            for f in every
            if f.key.case == case and f.status == Status.IMPROVEMENT and f.before_commit == first
        ]
        if listed:
            break
    assert listed, [(f.key.name, f.status, f.range_label) for f in every]
    (odd,) = listed
    assert odd.percent < -20, odd.percent
    result, _ = _confirm_speed_ups(project, every, case)
    assert result.exit_code == 0, result.output
    assert f"re-measuring A {first[:8]}" in result.stderr, result.stderr
    (entry,) = [
        e
        for e in json.loads(result.stdout)["regressions"]
        if e["case"] == case and e["after_commit"] == odd.after_commit
    ]
    confirmation = entry["verdict"]["confirmation"]
    # The claimed speed-up lies below the re-measure's interval: ruled out, told B over A.
    assert confirmation["lower_pct"] > odd.percent, confirmation
    if entry["status"] == "not-reproduced":
        assert confirmation["summary"].startswith("not-reproduced: B "), confirmation["summary"]
    else:
        # B, the next commit but one, is the GQA commit: a real few-percent prefill
        # speed-up, which a quiet run confirms (-6.00% [-10.93%, -0.80%] at 3+3 in a new
        # clone's CI run; docs/measurements.md, section 42). The finding then stays an
        # improvement, at the re-measure's size, not the odd process's. (Whether the
        # widened pair should cross a forward change the finding's own pair lacks is open.)
        gqa = demo_history.hashes[demo_history.fast_index]
        assert entry["status"] == "improvement", entry["verdict"]
        assert confirmation["status"] == "confirmed", confirmation
        assert confirmation["b_commit"] == gqa, confirmation
        assert -20 < confirmation["percent"] < 0, confirmation
