"""`fwdasv shard --ray` on a real Ray cluster of 3 nodes on this box, through real asv.

Ray binds the box's own address even when told loopback, so the tests run in a network
namespace of their own: run plainly, the module re-runs itself once under
`unshare -n` (loopback only; root, as in CI) and each test reports its inner result;
without `unshare` they are skipped, saying so. Inside, `ray.cluster_utils.Cluster`
starts 3 nodes of 1 CPU and 1 GPU each (Ray's own GPU resource; each node's GPU is an
H200 of the fake libnvidia-ml with a UUID of its own, read through fwdasv's NVML path),
at most two asv runs at once (`fleet_fakes.slot_gate`: the box's two torch processes).
The history is tests/toy_model.py's package (12 commits after its first, the forward 3x
slower from the 7th), one paced case, few samples. In order (CI's time: one measured
run serves the first three): the run with node 1 killed at half; confirm of a finding on
node 2, then its bisect there, then its explain there; a head stopped and run again
through the command, then a fleet's night over that range; GPUs of two models refused.
The cluster is shut down by the fixture that started it."""

from __future__ import annotations

import functools
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NETNS_ENV = "FWDASV_TEST_IN_NETNS"
IN_NETNS = os.environ.get(NETNS_ENV) == "1"
ROOT = Path(__file__).resolve().parents[2]
UUIDS = (
    "GPU-11111111-2222-4333-8444-000000000000",
    "GPU-11111111-2222-4333-8444-000000000001",
    "GPU-11111111-2222-4333-8444-000000000002",
)
JUDGED = "forward.Toy.track_relative"
SLOW_INDEX = 7

pytestmark = pytest.mark.slow


# ----------------------------------------------------------- the network namespace


@pytest.fixture(scope="module")
def netns_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:
    """This module run once under `unshare -n`: {test name: (outcome, message)}, output."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip (util-linux, iproute2) for a loopback-only network")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare -n is not permitted here (not root): Ray would use the box's network")
    folder = tmp_path_factory.mktemp("netns")
    report = folder / "inner.xml"
    inner = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
        str(Path(__file__)), "--basetemp", str(folder / "tmp"), f"--junitxml={report}",
    ]  # fmt: skip
    done = subprocess.run(
        ["unshare", "-n", "bash", "-c", 'ip link set lo up && exec "$@"', "bash", *inner],
        env={**os.environ, NETNS_ENV: "1"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    outcomes: dict[str, Any] = {}
    if report.is_file():
        for case in ElementTree.parse(report).iter("testcase"):
            found = [c for c in case if c.tag in ("failure", "error", "skipped")]
            if not found:
                outcomes[case.get("name", "")] = ("passed", "")
            else:
                outcomes[case.get("name", "")] = (found[0].tag, found[0].get("message", ""))
    return outcomes, done.stdout + done.stderr


def delegated(request: pytest.FixtureRequest) -> bool:
    """Outside the namespace: this test's inner outcome, reported; inside: False (run it)."""
    if IN_NETNS:
        return False
    outcomes, output = request.getfixturevalue("netns_session")
    status, message = outcomes.get(request.node.name, ("missing", "not run inside"))
    if status == "skipped":
        pytest.skip(message)
    if status != "passed":
        pytest.fail(f"inside its network namespace: {status}: {message}\n{output[-6000:]}")
    return True


# ----------------------------------------------------------- the cluster and history


@dataclass
class Fleet:
    cluster: Any
    nodes: list[Any]  # ray's node handles: head, node 1, node 2
    uuids: dict[str, str]  # node id -> its GPU's UUID
    hooks: Any
    root: Path  # where the nodes keep their workspaces

    def node_id(self, index: int) -> str:
        return str(self.nodes[index].node_id)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory):
    if not IN_NETNS:
        pytest.skip("inside the network namespace only")
    import ray
    from fleet_fakes import fake_identity, slot_gate
    from ray.cluster_utils import Cluster

    from fwdasv.fleet.actor import Hooks

    home = tmp_path_factory.mktemp("home")
    slots = tmp_path_factory.mktemp("slots")
    patch = pytest.MonkeyPatch()
    patch.setenv("HOME", str(home))
    patch.setenv(
        "PIP_CACHE_DIR", os.environ.get("PIP_CACHE_DIR", os.path.expanduser("~/.cache/pip"))
    )
    patch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{ROOT / 'tests'}")  # for Ray's workers
    patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    node_args = {"num_cpus": 1, "num_gpus": 1, "object_store_memory": 80 * 2**20}
    cluster = Cluster(
        initialize_head=True, head_node_args={**node_args, "include_dashboard": False}
    )
    try:
        nodes = [cluster.head_node, cluster.add_node(**node_args), cluster.add_node(**node_args)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        uuids = {str(n.node_id): u for n, u in zip(nodes, UUIDS, strict=True)}
        hooks = Hooks(
            identity=functools.partial(fake_identity, uuids),
            gate=functools.partial(slot_gate, str(slots), 2),
        )
        yield Fleet(cluster, nodes, uuids, hooks, tmp_path_factory.mktemp("nodes"))
    finally:
        ray.shutdown()
        cluster.shutdown()
        patch.undo()


def _project(root: Path, repo: Path, name: str):
    from toy_model import TARGET

    from fwdasv.asv.scaffold import init_project
    from fwdasv.asv.suitespec import SuiteSpec

    suite = SuiteSpec(
        TARGET,
        ("prefill_128=128",),
        class_name="Toy",
        iters=3,
        samples=5,
        warmup_s=0.02,
        env={"OMP_NUM_THREADS": "1"},
        launches=1,
        device="cpu",
        reference=True,
    )
    made = init_project(root / name, repo, suite, project=name, canary=False, check=False)
    return made.project


# The stopped-head test's suite: no torch (only the scheduling is under test there), the
# installed commit's version read back, a second's work a commit.
INSTALLED_SUITE = """import time
from importlib.metadata import version


class Installed:
    unit = "version"

    def track_version(self):
        time.sleep(1.0)
        major, minor, patch = (int(p) for p in version("mymodel").split("."))
        return 100 * major + 10 * minor + patch
"""


def _light_project(root: Path, repo: Path, name: str):
    from fwdasv.asv.scaffold import project_config, write_project

    project = write_project(root / name, project_config(str(repo), name), [])
    (project.benchmark_dir / "installed.py").write_text(INSTALLED_SUITE)
    return project


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, fleet: Fleet):
    """tests/toy_model.py's package over 13 commits, its forward 3x slower from commit 7
    on: a step no neighbour's load on the box hides, even on a series of 4 commits."""
    from toy_model import build_repo

    root = tmp_path_factory.mktemp("history")
    hashes = build_repo(root / "mymodel", commits=13, slow_index=SLOW_INDEX, slow_passes=3)
    return root, hashes, hashes[SLOW_INDEX]


def _stored(project) -> dict[str, list[str]]:
    """machine -> the 8-character commit prefixes it has a result file for."""
    return {
        m: sorted(p.name[:8] for p in (project.results_dir / m).glob("*-*.json"))
        for m in project.machines()
    }


# ----------------------------------------------------------------------- the tests


def test_twelve_commits_over_three_nodes_one_lost_at_half_each_once_one_site_the_step_found(
    request,
):
    """The must-shows of a run, in one run (CI's time): node 1 removed (killed) when half
    the commits are in; every commit recorded once, its unfinished commit re-run on another
    GPU and named in the plan, one site over the three machines, the step found."""
    if delegated(request):
        return
    fleet, history = request.getfixturevalue("fleet"), request.getfixturevalue("history")
    from fwdasv.analysis.findings import findings
    from fwdasv.analysis.publish.publish import publish
    from fwdasv.analysis.rules.status import Status
    from fwdasv.fleet.run import run_fleet

    root, hashes, slow = history
    project = _project(root, root / "mymodel", "mymodel")
    commits = hashes[1:]
    lost_id = fleet.node_id(1)
    lines: list[str] = []
    removed: list[str] = []

    def echo(line: str) -> None:
        lines.append(line)
        done = line.startswith("fleet: ") and int(line.split()[1].split("/")[0])
        if done and done >= len(commits) // 2 and not removed:
            removed.append(line)
            fleet.cluster.remove_node(fleet.nodes[1], allow_graceful=False)

    outcome = run_fleet(
        project, commits, "c0..c12", root=str(fleet.root), hooks=fleet.hooks, echo=echo
    )
    ledger = outcome.ledger
    assert removed and len(ledger.workers) == 3, lines
    lost_machine = next(w.machine for w in ledger.workers if w.node_id == lost_id)
    assert list(ledger.lost_workers) == [lost_machine], lines
    assert set(ledger.measured) == set(commits) and not ledger.failed, lines
    stored = _stored(project)
    assert len(stored) == 3, stored
    every = [c for prefixes in stored.values() for c in prefixes]
    assert sorted(every) == sorted(c[:8] for c in commits), "each commit recorded once"
    # The plan: who measured what, what was re-run and why, which GPU was lost.
    plan = json.loads(outcome.record.read_text())
    assert [row["commit"] for row in plan["measured_by"]] == list(commits)
    for row in plan["measured_by"]:
        assert row["commit"][:8] in stored[row["machine"]], row
    assert plan["reruns"], lines
    by = {row["commit"]: row for row in plan["measured_by"]}
    for rerun in plan["reruns"]:
        assert rerun["lost_machine"] == lost_machine and "node lost" in rerun["reason"]
        assert by[rerun["commit"]]["machine"] != lost_machine and by[rerun["commit"]]["rerun"]
    assert plan["lost"] == [{"machine": lost_machine, "why": ledger.lost_workers[lost_machine]}]
    assert any(line.startswith("fleet: 12/12 done") for line in lines), lines[-3:]
    assert any(f"lost with machine {lost_machine}; re-run on" in x for x in outcome.lines())
    # One site over the three machines.
    publish(project, echo=None)
    index = json.loads((project.html_dir / "index.json").read_text())
    assert sorted(index["params"]["machine"]) == sorted(stored), index["params"]["machine"]
    # Findings as on one machine: the slowdown at its commit (between a series' nearest
    # commits) on every GPU's series that holds 2 commits each side of it (a series with
    # one commit past it has only an edge there, as one machine's would), nothing else.
    found = [f for f in findings.find(project) if f.key.benchmark == JUDGED]
    flagged = [f for f in found if f.status in (Status.REGRESSION, Status.SUSPECTED)]
    assert flagged == found, [f.to_json() for f in found]
    position = {c[:8]: i for i, c in enumerate(hashes)}
    showing = {
        machine
        for machine, prefixes in stored.items()
        if min(
            sum(position[p] < position[slow[:8]] for p in prefixes),
            sum(position[p] >= position[slow[:8]] for p in prefixes),
        )
        >= 2
    }
    assert showing, stored
    assert {f.key.machine for f in flagged} >= showing, [f.to_json() for f in found]
    for finding in flagged:
        assert slow in {c.hash for c in finding.commits}, finding.to_json()
    request.config.cache_fleet = (project, flagged)  # for the confirm test


def test_confirm_of_a_finding_from_node_2_runs_on_node_2(request):
    if delegated(request):
        return
    fleet = request.getfixturevalue("fleet")
    from fwdasv.analysis.findings import findings
    from fwdasv.fleet.actor import CONFIRM
    from fwdasv.fleet.remote import triage_on_fleet

    project, flagged = request.config.cache_fleet
    # Node 2's finding; the head's where a commit taken from node 2's share left its
    # series one commit past the step (node 1 is gone: the first test removed it).
    of_node = {
        index: [f for f in flagged if _machine_info(project, f)["gpu_uuids"] == UUIDS[index]]
        for index in (2, 0)
    }
    # Node 2's first, and one whose range holds 2+ commits (the bisect test's): where the
    # queue gave one GPU both commits around the step, its range is that one commit.
    candidates = [(index, f) for index in (2, 0) for f in of_node[index]]
    index, finding = ([c for c in candidates if len(c[1].commits) > 1] or candidates)[0]
    uuid = fleet.uuids[fleet.node_id(index)]
    lines: list[str] = []
    (done,) = triage_on_fleet(
        project, [finding], (CONFIRM,), root=str(fleet.root), hooks=fleet.hooks,
        max_processes=3, echo=lines.append,
    )  # fmt: skip
    assert done.ran_on_node == fleet.node_id(index), lines
    assert done.worker.gpu_uuid == uuid and done.visible == uuid
    assert done.verdicts, lines
    (after,) = [f for f in findings.find(project) if f.ident == finding.ident]
    assert after.re_measured() is not None, after.to_json()
    request.config.cache_confirmed = index


def test_bisect_of_a_finding_from_node_2_runs_on_node_2_its_culprit_on_the_head(request):
    """fleet-triage's steps for the finding confirmed above: confirm has nothing left,
    bisect searches its range on its own node and GPU, the culprit (the slow commit)
    lands in the head's verdicts file once; the command then finds nothing left."""
    if delegated(request):
        return
    fleet, history = request.getfixturevalue("fleet"), request.getfixturevalue("history")
    from click.testing import CliRunner

    from fwdasv.analysis.findings import findings
    from fwdasv.analysis.findings.verdicts import verdicts_path
    from fwdasv.cli import main
    from fwdasv.fleet.actor import BISECT, CONFIRM
    from fwdasv.fleet.remote import triage_on_fleet

    project, _ = request.config.cache_fleet
    index = request.config.cache_confirmed
    _root, _hashes, slow = history
    uuid = fleet.uuids[fleet.node_id(index)]
    (finding,) = [
        f
        for f in findings.find(project)
        if f.key.benchmark == JUDGED and _machine_info(project, f)["gpu_uuids"] == uuid
    ]
    if len(finding.commits) == 1:  # both GPUs' ranges one commit: nothing to bisect
        pytest.skip(f"the queue gave {finding.key.machine} both commits around the step")
    lines_before = len(verdicts_path(project).read_text().splitlines())
    lines: list[str] = []
    (done,) = triage_on_fleet(
        project, [finding], (CONFIRM, BISECT), root=str(fleet.root), hooks=fleet.hooks,
        max_processes=3, echo=lines.append,
    )  # fmt: skip
    assert done.ran_on_node == fleet.node_id(index) and done.visible == uuid, lines
    assert len(done.verdicts) == 1, lines
    (after,) = [f for f in findings.find(project) if f.ident == finding.ident]
    assert after.verdict is not None and after.verdict.culprit is not None, after.to_json()
    culprit = after.verdict.culprit.commit
    assert culprit and slow.startswith(culprit), (after.verdict.culprit, lines)
    assert len(verdicts_path(project).read_text().splitlines()) == lines_before + 1
    # The command: nothing left to confirm or bisect on that machine, nothing recorded
    # (the finding is confirmed without a diff: the explain test takes it).
    again = CliRunner().invoke(
        main,
        ["fleet-triage", "--ray", fleet.cluster.address, "--config", str(project.config_path),
         "--machine", finding.key.machine, "--fleet-dir", str(fleet.root), "--no-explain"],
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert "nothing to triage" in again.output, again.output
    assert len(verdicts_path(project).read_text().splitlines()) == lines_before + 1


def test_explain_of_a_finding_confirmed_on_node_2_runs_there_its_diff_and_profiles_on_the_head(
    request,
):
    """fleet-triage after fleet-confirm: the finding confirmed above without a diff
    (fleet-confirm explains nothing) is sent to explain, explained on its node and GPU at
    its confirmation's A and B; the diff lands in the head's verdicts file once, its
    profiles in the head's .fwdasv-explain/ (whole JSON), `fwdasv regressions` on the head
    shows the diff those profiles give; the command then finds nothing left."""
    if delegated(request):
        return
    fleet = request.getfixturevalue("fleet")
    from click.testing import CliRunner

    from fwdasv.analysis.explain.kernel_diff import DEFAULT_ROUNDS, diff_rounds
    from fwdasv.analysis.findings import findings
    from fwdasv.analysis.findings.verdicts import verdicts_path
    from fwdasv.analysis.rules.status import Status
    from fwdasv.cli import main
    from fwdasv.core.kernels import load_summary
    from fwdasv.fleet.actor import BISECT, CONFIRM, EXPLAIN, PROFILES_DIR
    from fwdasv.fleet.remote import to_triage, triage_on_fleet

    project, _ = request.config.cache_fleet
    index = request.config.cache_confirmed
    uuid = fleet.uuids[fleet.node_id(index)]
    (finding,) = [
        f
        for f in findings.find(project)
        if f.key.benchmark == JUDGED and _machine_info(project, f)["gpu_uuids"] == uuid
    ]
    assert finding.status == Status.CONFIRMED and finding.verdict is not None
    assert finding.verdict.explain is None and finding.verdict.confirmation is not None
    pair = finding.verdict.confirmation
    # What `fwdasv fleet-triage --machine M` sends: this finding, to explain.
    on_machine = findings.find(project, machine=finding.key.machine)
    assert [f.ident for f in to_triage(on_machine, explain=True, bisect=True)] == [finding.ident]
    verdicts = verdicts_path(project)
    lines_before = len(verdicts.read_text().splitlines())
    lines: list[str] = []
    started = time.monotonic()
    (done,) = triage_on_fleet(
        project, [finding], (CONFIRM, EXPLAIN, BISECT), root=str(fleet.root), hooks=fleet.hooks,
        max_processes=3, echo=lines.append,
    )  # fmt: skip
    print(f"explain on node {index}: {time.monotonic() - started:.1f} s")
    assert done.ran_on_node == fleet.node_id(index) and done.visible == uuid, lines
    assert done.worker.gpu_uuid == uuid
    assert any("not explained yet" in line for line in lines), lines
    # Once in the head's verdicts file: one line more, the diff's.
    after_lines = verdicts.read_text().splitlines()
    assert len(after_lines) == lines_before + 1 and len(done.verdicts) == 1, lines
    parsed = [json.loads(line) for line in after_lines]
    with_diff = [v for v in parsed if v["finding"] == finding.ident.to_json() and "explain" in v]
    assert len(with_diff) == 1, with_diff
    stored = with_diff[0]["explain"]
    # Profiled at the confirmation's A and B, on the node; the profiles in the head's project.
    head_profiles = project.results_dir.parent / PROFILES_DIR
    profile_dir = Path(stored["profile_dir"])
    assert profile_dir.is_relative_to(head_profiles), (stored["profile_dir"], head_profiles)
    assert profile_dir.name.startswith(f"{pair.a_commit[:8]}-{pair.b_commit[:8]}-")
    assert json.loads(done.verdicts[0])["explain"]["profile_dir"] != stored["profile_dir"]
    sides = {side: sorted(profile_dir.glob(f"{side}-*/*.kernels.json")) for side in ("good", "bad")}
    assert [len(sides["good"]), len(sides["bad"])] == [DEFAULT_ROUNDS] * 2, sides
    assert not list(head_profiles.rglob(".*.tmp")), "a temporary file left by a write"
    for path in profile_dir.rglob("*.json"):
        json.loads(path.read_text())  # whole: written atomically
    for path in profile_dir.rglob("*.json.gz"):
        json.loads(gzip.decompress(path.read_bytes()))
    # The diff the head's profiles give is the one recorded, and the one listed.
    diff = diff_rounds(
        [load_summary(p) for p in sides["good"]], [load_summary(p) for p in sides["bad"]]
    )
    assert list(diff.top5) == stored["top5"], (diff.top5, stored["top5"])
    assert diff.total_delta_us == pytest.approx(stored["total_delta_us"])
    # As on one machine: the toy's slow commit runs the layer stack thrice (2 layers, 2
    # matmuls each: 4 -> 12 calls), its forward's line changed there.
    calls = {row["name"]: row for row in stored["rows"] if row["change"] == "calls"}
    mm = calls.get("aten::mm")
    assert mm is not None and mm["calls"] == [4, 12], stored["table"]
    assert mm["file"] == "mymodel/model.py" and mm["changed_here"], stored["table"]
    assert {"aten::gelu", "aten::add"} <= set(calls), stored["table"]
    assert "largest structural change: aten::mm <- mymodel/model.py:" in stored["headline"]
    listing = CliRunner().invoke(
        main, ["regressions", "--config", str(project.config_path), "--format", "json"]
    )
    (listed,) = [
        e for e in json.loads(listing.stdout)["regressions"]
        if e["machine"] == finding.key.machine and e["benchmark"] == JUDGED
    ]  # fmt: skip
    assert listed["status"] == "confirmed" and listed["verdict"]["explain"] == stored, listed
    if len(finding.commits) > 1:
        assert listed["culprit"] is not None, "the bisect's culprit kept"
    # The command: nothing left to confirm, explain or bisect there, nothing recorded.
    again = CliRunner().invoke(
        main,
        ["fleet-triage", "--ray", fleet.cluster.address, "--config", str(project.config_path),
         "--machine", finding.key.machine, "--fleet-dir", str(fleet.root)],
    )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert "nothing to triage" in again.output, again.output
    assert len(verdicts.read_text().splitlines()) == lines_before + 1


def _machine_info(project, finding) -> dict:
    return json.loads((project.results_dir / finding.key.machine / "machine.json").read_text())


def test_a_head_stopped_mid_run_then_run_again_measures_only_what_is_left(request):
    if delegated(request):
        return
    fleet, history = request.getfixturevalue("fleet"), request.getfixturevalue("history")
    from fwdasv.fleet.run import run_fleet

    root, hashes, _slow = history
    project = _light_project(root, root / "mymodel", "mymodel-resume")
    commits = hashes[1:5]

    def stop_at_one(line: str) -> None:
        if line.startswith("fleet: 1/"):
            raise KeyboardInterrupt  # Ctrl-C on the head

    with pytest.raises(KeyboardInterrupt):
        run_fleet(
            project, commits, "c0..c4", root=str(fleet.root), hooks=fleet.hooks, echo=stop_at_one
        )
    first = sorted(p for prefixes in _stored(project).values() for p in prefixes)
    assert len(first) == 1, first
    (record,) = (project.config_path.parent / ".fwdasv-shards").glob("*-ray/plan.json")
    assert len(json.loads(record.read_text())["measured_by"]) == 1, "the plan as it stopped"
    # Again, as a user would: the one command (the workers' fake GPUs named to it).
    import fleet_fakes
    from click.testing import CliRunner

    from fwdasv.cli import main
    from fwdasv.fleet.cli import HOOKS_ENV

    fleet_fakes.HOOKS = fleet.hooks
    address = fleet.cluster.address
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(HOOKS_ENV, "fleet_fakes:HOOKS")
        again = CliRunner().invoke(
            main,
            ["shard", "--ray", address, "--config", str(project.config_path),
             "--fleet-dir", str(fleet.root), f"{hashes[0]}..{hashes[4]}"],
        )  # fmt: skip
    assert again.exit_code == 0, again.output
    assert "1 commit(s) recorded before by a GPU of this kind" in again.output
    assert "3 commit(s) measured in" in again.output and "1 recorded before" in again.output
    assert "GPU s over 2 GPU(s)" in again.output, again.output
    every = sorted(p for prefixes in _stored(project).values() for p in prefixes)
    assert every == sorted(c[:8] for c in commits), "each commit recorded once"
    request.config.cache_light = project


def test_a_fleet_night_over_a_range_recorded_before_measures_nothing_and_gates_every_machine(
    request,
):
    """`fwdasv fleet-nightly` on the range the stopped head finished: nothing measured
    again, nothing to triage, the site published with both machines, the gate exit 0."""
    if delegated(request):
        return
    fleet, history = request.getfixturevalue("fleet"), request.getfixturevalue("history")
    import fleet_fakes
    from click.testing import CliRunner

    from fwdasv.cli import main
    from fwdasv.fleet.cli import HOOKS_ENV

    _root, hashes, _slow = history
    project = request.config.cache_light
    stored = _stored(project)
    fleet_fakes.HOOKS = fleet.hooks
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(HOOKS_ENV, "fleet_fakes:HOOKS")
        night = CliRunner().invoke(
            main,
            ["fleet-nightly", "--ray", fleet.cluster.address, "--config",
             str(project.config_path), "--fleet-dir", str(fleet.root), f"{hashes[0]}..{hashes[4]}"],
        )  # fmt: skip
    assert night.exit_code == 0, night.output
    assert "4 commit(s) recorded before by a GPU of this kind" in night.output, night.output
    assert (
        "[fleet-nightly] 2/4 nothing to triage: no finding to confirm, explain or bisect"
        in night.output
    ), night.output
    assert f"4/4 the gate over {len(stored)} machine(s): exit 0" in night.output, night.output
    assert _stored(project) == stored, "nothing measured again"
    index = json.loads((project.html_dir / "index.json").read_text())
    assert sorted(index["params"]["machine"]) == sorted(stored)


def test_gpus_of_another_model_in_the_cluster_are_refused_in_one_line(request):
    if delegated(request):
        return
    fleet = request.getfixturevalue("fleet")
    import ray
    from fleet_fakes import fake_identity

    from fwdasv.fleet.actor import Hooks
    from fwdasv.fleet.run import start_workers
    from fwdasv.hw.shard import ShardRefused

    other = {fleet.node_id(2): "NVIDIA H100 80GB HBM3"}
    hooks = Hooks(identity=functools.partial(fake_identity, fleet.uuids, other))
    with pytest.raises(ShardRefused) as refused:
        start_workers(str(fleet.root), hooks)
    said = str(refused.value)
    assert "\n" not in said and "differ in model" in said and "NVIDIA H100" in said, said
    assert said.startswith("the cluster's GPU "), said
    # Every worker started was stopped: the GPUs are free again.
    deadline = time.monotonic() + 20
    while ray.available_resources().get("GPU", 0) < ray.cluster_resources().get("GPU", 0):
        assert time.monotonic() < deadline, ray.available_resources()
        time.sleep(0.2)
