"""`fwdasv.analysis.bisect.driver`: real bisects with asv.

A gradual slowdown (+3% a commit, three commits) measured with asv: GOOD and
BAD differ, but no single commit does, so bisect names none ("not
reproducible"). Then the demo: in its own asv project (fresh results dir, the
demo model's repository, the session's shared virtualenv) where only GOOD and
BAD are stored, taken from the demo history's run: every other commit it
needs it must measure with asv, one run per probe.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import measuring_priority

from fwdasv.analysis.bisect.driver import bisect
from fwdasv.analysis.bisect.rules import expected_probes
from fwdasv.analysis.status import Status
from fwdasv.asv.history import remeasure_results_dir
from fwdasv.asv.scaffold import write_torch_project
from fwdasv.cli import main

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
