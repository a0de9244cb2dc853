"""fwdasv bisect: the decision rule on numbers, refusals, and real bisects with asv.

A gradual slowdown (+3% a commit, three commits) measured with asv: GOOD and
BAD differ, but no single commit does, so bisect names none ("not
reproducible"). Then the demo: in its own asv project (fresh results dir, the
demo model's repository, the session's shared virtualenv) where only GOOD and
BAD are stored, taken from the demo history's run: every other commit it
needs it must measure with asv, one run per probe.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import measuring_priority

from fwdasv.analysis.bisect.driver import bisect, resolve_benchmark
from fwdasv.analysis.bisect.environment import BisectError, check_environment, verify_measured
from fwdasv.analysis.bisect.rules import (
    Processes,
    bounds,
    classify,
    closer,
    compare_step,
    expected_probes,
    next_probe,
    recheck_order,
)
from fwdasv.analysis.judgment import (
    pooled_spread,
    process_medians,
    process_rank_test,
    process_test,
)
from fwdasv.analysis.status import Status
from fwdasv.asv.history import remeasure_results_dir
from fwdasv.asv.project import AsvProject
from fwdasv.asv.scaffold import write_torch_project
from fwdasv.cli import main

# --- the rule ---------------------------------------------------------------------------


def _draws(level: float, seed: int, n: int = 12, noise: float = 0.02) -> list[float]:
    rng = random.Random(seed)
    return [level * (1 + noise * rng.gauss(0, 1)) for _ in range(n)]


LOW, HIGH = _draws(1.0, 1), _draws(1.5, 2)


def test_compare_step_is_directional() -> None:
    up = compare_step(LOW, HIGH, direction=1)
    assert up.outcome == Status.DIFFERENT and up.ratio > 1.4 and up.p_value < 0.002
    # Significantly faster is "same" when looking for a slowdown, "different" for a speedup.
    assert compare_step(HIGH, LOW, direction=1).outcome == Status.SAME
    assert compare_step(HIGH, LOW, direction=-1).outcome == Status.DIFFERENT
    assert compare_step(LOW, _draws(1.0, 3), direction=1).outcome == Status.SAME
    # Within the factor: same even though significant.
    assert compare_step(LOW, _draws(1.03, 4, noise=0.001), direction=1).outcome == Status.SAME
    assert compare_step(LOW[:3], HIGH[:3], direction=1).outcome == Status.UNKNOWN
    assert compare_step([], HIGH, direction=1).outcome == Status.UNKNOWN


def test_classify_table() -> None:
    assert classify(LOW, _draws(1.0, 5), HIGH, 1).verdict == Status.GOOD
    assert classify(LOW, _draws(1.5, 6), HIGH, 1).verdict == Status.BAD
    # Part way (differs from both ends): neither end, whichever is nearer. The driver
    # measures GOOD, the probe and BAD again (the ends may have been measured in
    # another machine state) and decides by the closer median only after that.
    for level, seed in ((1.15, 7), (1.35, 14)):
        decision = classify(LOW, _draws(level, seed), HIGH, 1)
        assert decision.verdict == Status.PART_WAY, decision
        assert decision.from_good.outcome == decision.to_bad.outcome == Status.DIFFERENT
    # Too few samples, or a mixture neither end explains: measure again.
    assert classify(LOW, _draws(1.5, 8, n=3), HIGH, 1).verdict == Status.UNKNOWN
    noisy = _draws(1.0, 9, n=6, noise=0.3) + _draws(1.5, 10, n=6, noise=0.3)
    decision = classify(LOW, noisy, HIGH, 1)
    assert decision.verdict == Status.UNKNOWN, decision
    # Beyond BAD (regressions often add variance between processes): still BAD's side.
    assert classify(LOW, _draws(2.5, 13), HIGH, 1).verdict == Status.BAD
    assert closer(LOW, _draws(1.4, 11), HIGH) == Status.BAD
    assert closer(LOW, _draws(1.1, 12), HIGH) == Status.GOOD


def _runs(levels: list[float], seed: int, size: int = 10) -> list[float]:
    """One process per level, `size` samples each (0.2% apart), stored one after another."""
    rng = random.Random(seed)
    return [level * (1 + 0.002 * rng.gauss(0, 1)) for level in levels for _ in range(size)]


def test_compare_step_by_processes_is_not_fooled_by_one_process() -> None:
    """Issue 19: a bad commit whose one run read fast, judged on its samples as if they were
    independent runs, named a wrong commit at p=1e-7."""
    good = _runs([20.8, 21.0, 20.6, 21.1], 1)
    bad = _runs([24.0, 24.3, 23.8, 24.1], 2)
    mixed = _runs([21.0, 24.1], 3)  # one process fast, one at BAD's level
    spread = pooled_spread(
        [process_medians(x, 10) for x in (good, bad, mixed, _runs([24.0, 21.2], 4))]
    )
    by_process = Processes(10, spread)
    # On samples: the mixed commit is "different" from GOOD, far beyond alpha.
    assert compare_step(good, mixed, 1, 1.05).outcome == Status.DIFFERENT
    # On process medians, against the spread between one commit's processes: unknown.
    assert compare_step(good, mixed, 1, 1.05, processes=by_process).outcome == Status.UNKNOWN
    # Processes that agree: the step is there, and within the factor is the same level.
    steady = Processes(10, pooled_spread([process_medians(x, 10) for x in (good, bad)]))
    step = compare_step(good, bad, 1, 1.05, processes=steady)
    assert step.outcome == Status.DIFFERENT and 1.14 < step.ratio < 1.17, step
    level = compare_step(bad, _runs([24.2, 23.9], 5), 1, 1.05, processes=steady)
    assert level.outcome == Status.SAME
    # No spread measured yet (one process a commit): a move beyond the factor is unknown.
    alone = Processes(10, None)
    assert compare_step(good[:10], bad[:10], 1, 1.05, processes=alone).outcome == Status.UNKNOWN
    assert classify(good, _runs([20.9, 21.0], 6), bad, 1, processes=steady).verdict == Status.GOOD
    assert classify(good, _runs([24.1, 24.0], 7), bad, 1, processes=steady).verdict == Status.BAD


def test_processes_that_now_and_then_run_fast_do_not_hide_a_clear_step() -> None:
    """A bisect trial on the quiet 2-core VM (2026-12-03): GOOD and BAD, 8 processes each,
    +14% apart, but two of GOOD's processes ran 15-25% fast and one of BAD's 60% slow.
    The t rule's pooled spread took those in and read p=0.12 ("nothing to bisect"); every
    GOOD process but one is below every BAD one, and the ranks say so."""
    good = _runs([3.199, 3.142, 2.726, 3.268, 2.444, 3.309, 3.361, 3.513], 11)
    bad = _runs([3.508, 3.711, 3.585, 3.552, 3.658, 3.739, 5.988, 4.459], 12)
    groups = [process_medians(x, 10) for x in (good, bad)]
    spread = pooled_spread(groups)
    t_only = process_test(groups[0], groups[1], spread)
    assert t_only is not None and not t_only.different(0.002), t_only
    step = compare_step(good, bad, 1, 1.05, processes=Processes(10, spread))
    assert step.outcome == Status.DIFFERENT and step.p_value < 0.002, step
    assert 1.10 < step.ratio < 1.18, step
    # Below RANK_MIN_PROCESSES a side the ranks do not decide: two processes that
    # disagree stay unknown (the test above), and four a side cannot reach alpha.
    assert process_rank_test(groups[0][:4], groups[1][:4], 0.002) is None
    assert process_rank_test(groups[0], groups[1], 0.002) < 0.002
    # Within the factor it is the same level, whatever the ranks say.
    shifted = _runs([v * 1.02 for v in (3.199, 3.142, 3.268, 3.309, 3.361, 3.213)], 13)
    same = compare_step(good, shifted, 1, 1.05, processes=Processes(10, spread))
    assert same.outcome == Status.SAME, same


def test_bounds_and_recheck_order() -> None:
    assert bounds({}, 16) == (0, 16)
    assert bounds({8: Status.BAD, 4: Status.GOOD, 6: Status.BAD, 5: Status.GOOD}, 16) == (5, 6)
    # A decision changed on re-check (5 now bad): the range reopens below it.
    assert bounds({8: Status.BAD, 4: Status.GOOD, 6: Status.BAD, 5: Status.BAD}, 16) == (4, 5)
    # Nearest the final pair (5, 6) first: its own members, then outwards.
    assert recheck_order([8, 4, 6, 5], 5, 6) == [5, 6, 4, 8]


def test_probe_order() -> None:
    assert next_probe(0, 6) == 3
    assert next_probe(0, 1) is None
    assert next_probe(0, 6, {3}) == 2
    assert next_probe(0, 3, {1, 2}) is None
    assert [expected_probes(n) for n in (1, 2, 6, 11, 16)] == [0, 1, 3, 4, 4]


def test_resolve_benchmark() -> None:
    from fwdasv.asv.history import BenchmarkInfo

    benchmarks = {
        name: BenchmarkInfo.from_json(raw)
        for name, raw in {
            "forward.A.track_latency": {"params": [["'decode'", "'prefill'"]], "unit": "seconds"},
            "forward.A.track_spread_pct": {"params": [["'decode'", "'prefill'"]]},
            "other.time_x": {"params": []},
            "forward.CanaryDecoder.track_latency": {"params": [["'decode_bs4'"]]},
        }.items()
    }
    # The canary beside the suite is set aside: track_latency names the model's.
    found = resolve_benchmark(benchmarks, "track_latency", "prefill")
    assert found.name == "forward.A.track_latency" and found.case == "prefill"
    # Named alone (exactly, or by a regex only it matches), the canary is bisected.
    for name in ("forward.CanaryDecoder.track_latency", "Canary"):
        assert resolve_benchmark(benchmarks, name, None).case == "decode_bs4"
    assert found.pattern == r"^forward\.A\.track_latency\('prefill'\)$"
    assert resolve_benchmark(benchmarks, "other.time_x", None).case is None
    with pytest.raises(BisectError, match="exactly one benchmark"):
        resolve_benchmark(benchmarks, "forward", None)
    with pytest.raises(BisectError, match="pick one with --case"):
        resolve_benchmark(benchmarks, "track_latency", None)
    with pytest.raises(BisectError, match="no case 'x'"):
        resolve_benchmark(benchmarks, "track_latency", "x")


def _config(tmp_path: Path, **overrides) -> AsvProject:
    config = {"version": 1, "repo": ".", "environment_type": "virtualenv", **overrides}
    (tmp_path / "asv.conf.json").write_text(json.dumps(config))
    return AsvProject.load(tmp_path / "asv.conf.json")


def test_bisect_measures_into_a_results_dir_of_its_own(tmp_path: Path) -> None:
    """Issue 19: bisect's re-measures appended to the history moved a commit's median from
    39.5 to 19.3 ms and made a finding; they go to a results dir beside it instead."""
    from fwdasv.analysis.bisect.driver import remeasure_project

    project = _config(tmp_path, pythons=["3.11"], results_dir="results", env_dir="env")
    side = remeasure_project(project)
    assert side.results_dir == remeasure_results_dir(project.results_dir) / "results"
    # Beside the history's results dir, not in it: neither fwdasv nor asv publish reads it.
    assert not side.results_dir.is_relative_to(project.results_dir)
    # The same repository, environments (installs are shared) and benchmarks.
    assert (side.repo, side.env_dir, side.benchmark_dir) == (
        project.repo,
        project.env_dir,
        project.benchmark_dir,
    )
    assert side.environment_type == project.environment_type
    assert remeasure_project(project) == side  # written once, the same on every bisect


def test_existing_environments_are_refused(tmp_path: Path) -> None:
    check_environment(_config(tmp_path, pythons=["3.11"]))
    with pytest.raises(BisectError, match="--python=same selects an existing environment"):
        check_environment(_config(tmp_path), python="same")
    with pytest.raises(BisectError, match="pythons holds '/usr/bin/python3'"):
        check_environment(_config(tmp_path, pythons=["/usr/bin/python3"]))
    project = _config(tmp_path, environment_type="existing")
    result = CliRunner().invoke(
        main,
        ["bisect", "a..b", "track_latency", "--config", str(project.config_path), "-m", "x"],
    )
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "environment_type is 'existing'" in line
    assert "every commit would look the same" in line
    assert '"environment_type": "fwdasv"' in line
    result = CliRunner().invoke(main, ["bisect", "a", "track_latency"])
    assert result.exit_code == 2 and "GOOD..BAD" in result.stderr


def test_verify_measured_refuses_results_not_from_per_commit_installs(tmp_path: Path) -> None:
    project = _config(tmp_path, env_dir="env")
    commit, other = "ab" * 20, "ab" * 4 + "cd" * 16
    folder = project.results_dir / "box"
    folder.mkdir(parents=True)

    def store(commit_hash: str, env_name: str) -> None:
        data = {"commit_hash": commit_hash, "env_name": env_name}
        (folder / f"{commit_hash[:8]}-{env_name}.json").write_text(json.dumps(data))

    assert verify_measured(project, "box", [commit]) == [commit]  # nothing saved
    store(commit, "existing-py_usr_bin_python3")
    with pytest.raises(BisectError, match="not one asv builds per commit"):
        verify_measured(project, "box", [commit])
    for path in folder.iterdir():
        path.unlink()
    store(other, "virtualenv-py3.11")  # same 8-character prefix, another commit
    with pytest.raises(BisectError, match="share the 8-character prefix"):
        verify_measured(project, "box", [commit])
    for path in folder.iterdir():
        path.unlink()
    store(commit, "virtualenv-py3.11")
    with pytest.raises(BisectError, match="records installing"):
        verify_measured(project, "box", [commit])
    status = project.env_dir / "0123abcd" / "asv-install-status.json"
    status.parent.mkdir(parents=True)
    status.write_text(json.dumps({"commit_hash": commit, "version": 1}))
    assert verify_measured(project, "box", [commit]) == []


# --- a gradual slowdown: no commit to name --------------------------------------------------

CREEP_SCALES = (1.00, 1.03, 1.06)  # each commit +3%: within bisect's 5% factor, the range beyond

CREEP_BENCH = """
\"\"\"The installed package's SCALE, as seeded draws (a fresh seed each run: new samples).\"\"\"

import random
from pathlib import Path

import creep

RUNS = Path(__file__).resolve().parent.parent / "runs.txt"


class Creep:
    unit = "seconds"

    def track_latency(self):
        runs = int(RUNS.read_text()) if RUNS.exists() else 0
        RUNS.write_text(str(runs + 1))
        rng = random.Random(runs)
        samples = [1e-3 * creep.SCALE * (1 + 0.002 * rng.gauss(0, 1)) for _ in range(25)]
        return {"samples": samples, "number": 1}
"""


def _creep_repo(repo: Path) -> list[str]:
    import os
    import subprocess

    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    (repo / "creep").mkdir()
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '\n[project]\nname = "creep"\nversion = "0.1"\n\n[tool.setuptools]\npackages = ["creep"]\n'
    )
    hashes = []
    for i, scale in enumerate(CREEP_SCALES):
        (repo / "creep" / "__init__.py").write_text(f"SCALE = {scale}\n")
        stamp = f"2026-02-01T00:{i:02d}:00+00:00"
        git("add", "-A")
        env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        git("commit", "-q", "--no-gpg-sign", "-m", f"Slower by 3% ({i})")
        hashes.append(git("rev-parse", "HEAD"))
    return hashes


@pytest.mark.slow
@pytest.mark.long  # a second bisect of real asv runs (scripts/test.sh --long)
def test_bisect_names_no_commit_when_the_final_pair_does_not_differ(
    tmp_path: Path, shared_asv_env: Path, asv_machine_home: Path
) -> None:
    good, middle, bad = _creep_repo(tmp_path / "creep")
    project = write_torch_project(
        tmp_path / "asv", tmp_path / "creep", "creep", [], env_dir=shared_asv_env
    )
    (project.benchmark_dir / "forward.py").write_text(CREEP_BENCH)
    result_json = tmp_path / "bisect.json"
    result = CliRunner().invoke(
        main,
        [
            "bisect",
            f"{good}..{bad}",
            "Creep.track_latency",
            "--config",
            str(project.config_path),
            "--machine",
            "testbox",
            "--max-remeasure",
            "1",
            "--json",
            str(result_json),
        ],
    )
    # GOOD -> BAD is +6%: beyond the factor, so there is something to bisect ...
    (ends,) = [line for line in result.stderr.splitlines() if line.startswith("GOOD ")]
    assert ends.startswith(f"GOOD {good[:8]}") and ends.endswith(": different"), result.output
    # ... but the middle commit is 3% from each end: it cannot be placed (measured again,
    # then the closer median), and the final pair, measured again too, does not differ.
    assert "final pair" in result.stderr and "re-checking the decisions" in result.stderr
    assert result.exit_code == 1, result.output
    summary = result.stdout.strip()
    assert summary.startswith("not reproducible: forward.Creep.track_latency"), summary
    assert "no commit is named" in summary
    assert "first bad commit:" not in result.output  # how a named commit is given
    assert "Slower by 3%" not in result.stdout  # no subject either
    document = json.loads(result_json.read_text())
    assert document["reproducible"] is False and document["first_bad"] is None, document
    (probe,) = document["probes"]
    assert probe["commit"] == middle and probe["decided_by"] == "closer-median", probe
    # Runs: GOOD and BAD, the middle, the middle again, the middle re-checked.
    assert (document["asv_runs"], document["remeasures"]) == (4, 2), document


# --- a real bisect -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def bisect_project(demo_history, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A fresh asv project over the demo repo with only GOOD and BAD stored."""
    root = tmp_path_factory.mktemp("bisect")
    project = write_torch_project(
        root / "asv",
        demo_history.repo,
        "tinylm",
        [demo_history.suite_source],
        env_dir=demo_history.env_dir,
    )
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


@pytest.fixture(scope="module")
def first_bisect(demo_history, bisect_project: dict) -> dict:
    """The first bisect over the bisect project (its probes stored), and its progress lines."""
    project, good, bad = bisect_project["project"], bisect_project["good"], bisect_project["bad"]
    lines: list[str] = []
    with measuring_priority():
        result = bisect(
            project,
            good,
            bad,
            "track_latency",
            demo_history.machine,
            case="decode_bs8_2k",
            echo=lines.append,
        )
    return {"result": result, "lines": lines}


@pytest.mark.slow
def test_bisect_finds_the_injected_commit_in_about_log2_runs(
    demo_history, bisect_project: dict, first_bisect: dict
) -> None:
    project, good, bad = bisect_project["project"], bisect_project["good"], bisect_project["bad"]
    result, lines = first_bisect["result"], first_bisect["lines"]
    log = "\n".join(lines)
    # The final pair (last good, first bad) differs: only then is a commit named.
    assert result.reproducible and result.final_step.outcome == Status.DIFFERENT, log
    assert result.first_bad == demo_history.slow_commit, log
    assert result.last_good == demo_history.hashes[demo_history.slow_index - 1], log
    assert result.subject == "Support attention logit soft-capping"
    assert result.range_size == len(demo_history.hashes) - 1 - demo_history.fast_index
    # GOOD and BAD were stored: one asv run per probe, plus re-measures of unclear ones.
    measured = [p for p in result.probes if p.verdict != "failed"]
    assert result.asv_runs == len(result.probes) + result.remeasures, log
    assert len(result.probes) <= expected_probes(result.range_size), log
    assert result.asv_runs <= expected_probes(result.range_size) + result.remeasures
    # The rules' own bound: the ends' second run and max_remeasure more (3), each probe's
    # max_remeasure (2), the final pair's run, and one re-check (plus its pair run) per
    # decision: 4 + 4 a probe (a busy box's odd processes use some of it).
    assert result.remeasures <= 4 + 4 * len(result.probes), log
    assert measured and all(p.sample_count >= 10 for p in measured)
    assert result.after_median > 1.2 * result.before_median, log
    assert result.p_value is not None and result.p_value < 0.002
    assert result.summary().startswith("first bad commit: " + demo_history.slow_commit[:8])
    # A progress line per probe: which commit, what the samples said, the verdict.
    for probe in result.probes:
        assert any(
            f"{probe.commit[:8]}" in line and f"-> {probe.verdict}" in line for line in lines
        ), log
    # Every probe really was installed and measured per commit, into bisect's own results
    # dir: the history keeps GOOD and BAD only, as they were.
    side = remeasure_results_dir(project.results_dir) / "results" / demo_history.machine
    stored = {
        json.loads(p.read_text())["commit_hash"]: json.loads(p.read_text())["env_name"]
        for p in side.glob("*-*.json")
    }
    assert (
        {p.commit for p in result.probes}
        <= set(stored)
        <= {
            good,
            bad,
            *(p.commit for p in result.probes),
        }
    )
    assert all(env.startswith("fwdasv-") for env in stored.values())
    history = {p.name for p in (project.results_dir / demo_history.machine).glob("*-*.json")}
    assert len(history) == 2, history


@pytest.mark.slow
@pytest.mark.long  # another bisect of real asv runs (scripts/test.sh --long)
def test_bisect_again_reuses_stored_results(
    demo_history, bisect_project: dict, first_bisect: dict, tmp_path: Path
) -> None:
    """A second bisect of the same range, after the first stored its probes (whatever the
    first one named: this one is judged on its own output)."""
    project, first = bisect_project["project"], first_bisect["result"]
    result = CliRunner().invoke(
        main,
        [
            "bisect",
            f"{bisect_project['good'][:10]}..main",
            "forward.TinyLM.track_latency",
            "--case",
            "decode_bs8_2k",
            "--config",
            str(project.config_path),
            "--json",
            str(tmp_path / "again.json"),
        ],
    )
    again = json.loads((tmp_path / "again.json").read_text())
    # Its own certainty: the stored samples are not the first run's at its start (a
    # probe part way between the ends had GOOD and BAD measured again), so a probe the
    # first run placed by the closer median may be placed on samples now, or the other way.
    assert result.exit_code == (0 if again["certain"] else 1), result.output
    assert f"first bad commit: {demo_history.slow_commit[:8]}" in result.stdout
    assert again["reproducible"] and again["first_bad"] == demo_history.slow_commit
    if first.certain and first.remeasures == 0:
        # Every probe was decided on the samples it found, and those are still all there:
        # the same decisions, nothing to measure again.
        assert "0 asv runs" in result.stdout, result.output
        assert "asv run 1" not in result.stderr
    assert "stored samples, reused" in result.stderr


def test_a_bisect_of_an_improvement_names_the_first_faster_commit() -> None:
    from fwdasv.analysis.bisect.outcome import BisectResult

    result = BisectResult(
        benchmark="forward.S.track_latency",
        case="decode",
        machine="box",
        env_name="env",
        unit="seconds",
        good="a" * 40,
        bad="d" * 40,
        range_size=3,
        direction=-1,
        last_good="b" * 40,
        first_bad="c" * 40,
        subject="Fuse the MLP",
        before_median=2e-3,
        after_median=1e-3,
        p_value=0.001,
        asv_runs=2,
        remeasures=0,
    )
    assert result.summary().startswith("first faster commit: cccccccc Fuse the MLP:")
    assert "-50.0%" in result.summary() and result.to_json()["direction"] == "faster"
    slower = dataclasses.replace(result, direction=1, before_median=1e-3, after_median=2e-3)
    assert slower.summary().startswith("first bad commit: cccccccc")
