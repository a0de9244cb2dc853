"""The head's side of `fwdasv shard --ray`: a range measured over a Ray cluster's GPUs.

`connect` joins the cluster (`auto`: the one `ray start` runs here). `start_workers`
starts one `GpuWorker` actor per GPU of every live node that advertises one, pinned to its
node (node affinity, `num_gpus=1`), and asks each which GPU it holds; GPUs of more than
one kind (`fwdasv.hw.shard.mismatch`) are refused in one line, as on one host. `run_fleet`
ships the project (a git bundle through the object store), lets each node build its
environments, then hands out commits one at a time as GPUs come free
(`fwdasv.fleet.ledger`); each result comes back and is written atomically into the head's
results/<machine>/. A node lost mid-commit (its actor dead) has its commit re-run on
another GPU; a node whose environments cannot be built is named in one line and the
others go on. Commits a GPU of this kind recorded before (an earlier, stopped run) are
not queued again. The ledger (who measured what, what was re-run, wall and GPU time) is
rewritten after every event to .fwdasv-shards/<run>-ray/plan.json.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from fwdasv.asv.project import AsvProject
from fwdasv.asv.shard_run import SHARDS_DIR
from fwdasv.core.errors import UserError
from fwdasv.core.files import write_atomic
from fwdasv.fleet import _ray
from fwdasv.fleet.actor import GpuWorker, Hooks
from fwdasv.fleet.ledger import Ledger, Worker, already_recorded
from fwdasv.fleet.workspace import Payload, bundle_repository, default_root
from fwdasv.hw.shard import SERIES_KEYS, GpuMachine, ShardRefused, mismatch

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.actor import ActorHandle

IDENTIFY_S = 300.0  # an actor placed and its GPU read; more is a cluster that cannot place it
WAIT_S = 1.0


class FleetError(UserError):
    """The cluster cannot be reached, or no GPU of it can take the work."""


def connect(address: str) -> bool:
    """Join the Ray cluster at `address` (`auto`: this host's); whether this call joined it."""
    ray = _ray.ray
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise FleetError(
            f"cannot join the Ray cluster at {address!r} ({first}); start one with "
            "`ray start --head` (then `ray start --address HEAD:6379` on the other hosts)"
        ) from None
    return True


@dataclass
class Started:
    handle: ActorHandle[GpuWorker]
    worker: Worker


def start_workers(root: str, hooks: Hooks) -> list[Started]:
    """One pinned actor per GPU of every live node; refused when their GPUs differ. A node
    lost before its actor answered (Ray still lists a node as alive until its heartbeats
    are missed) is left out, as a node lost mid-run is; none left: `FleetError`."""
    ray = _ray.ray
    affinity = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
    nodes = [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get("GPU", 0) >= 1]
    if not nodes:
        raise FleetError("no live node of the Ray cluster advertises a GPU (ray start --num-gpus)")
    remote = ray.remote(GpuWorker)
    handles = []
    for node in nodes:
        for _ in range(int(node["Resources"]["GPU"])):
            strategy = affinity(node["NodeID"], soft=False)
            handles.append(
                remote.options(
                    num_gpus=1, num_cpus=0, max_restarts=0, scheduling_strategy=strategy
                ).remote(root, hooks)
            )
    refs = [h.identify.remote() for h in handles]
    started: list[Started] = []
    deadline = time.monotonic() + IDENTIFY_S
    try:
        for handle, ref in zip(handles, refs, strict=True):
            try:
                worker = ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
            except ray.exceptions.RayActorError:
                continue  # its node is gone
            started.append(Started(handle, worker))
    except BaseException:
        stop_workers(handles)
        raise
    if not started:
        raise FleetError("every GPU node of the Ray cluster was lost before its worker started")
    gpus = [GpuMachine(i, s.worker.gpu_uuid, s.worker.entry) for i, s in enumerate(started)]
    why = mismatch(gpus)
    if why is not None:
        stop_workers(handles)
        raise ShardRefused(why.replace("GPU ", "the cluster's GPU ", 1))
    return started


def stop_workers(handles: Sequence[ActorHandle[GpuWorker]]) -> None:
    for handle in handles:
        with contextlib.suppress(Exception):  # gone with its node already
            _ray.ray.kill(handle, no_restart=True)


def recorded_before(project: AsvProject, kind: Worker, commits: Sequence[str]) -> frozenset[str]:
    """Commits a machine of `kind`'s GPU kind has a result for in the head's results."""
    stored: list[str] = []
    for machine in project.machines():
        info = json.loads((project.results_dir / machine / "machine.json").read_text())
        if all(info.get(key) == kind.entry.get(key) for key in SERIES_KEYS):
            stored += [p.name for p in (project.results_dir / machine).glob("*-*.json")]
    return already_recorded(commits, stored)


@dataclass(frozen=True)
class FleetOutcome:
    ledger: Ledger
    seconds: float  # wall time
    record: Path  # plan.json

    def lines(self) -> list[str]:
        ledger = self.ledger
        out = []
        for machine, commits in ledger.by_machine().items():
            worker = ledger.worker(machine)
            lost = ledger.lost_workers.get(machine)
            said = f"; lost: {lost}" if lost else ""
            out.append(f"{worker.label}: {len(commits)} commit(s){said}")
        for rerun in ledger.reruns:
            by = ledger.measured.get(rerun.commit)
            where = f"re-run on machine {by.machine}" if by else "not measured"
            out.append(f"{rerun.commit[:8]}: lost with machine {rerun.lost_machine}; {where}")
        for commit, why in ledger.failed.items():
            out.append(f"{commit[:8]}: no GPU could measure it: {why}")
        out.append(
            f"{len(ledger.measured)} commit(s) measured in {self.seconds:.1f} s wall, "
            f"{ledger.gpu_seconds():.1f} GPU s over {len(ledger.workers)} GPU(s)"
            + (f", {len(ledger.before)} recorded before" if ledger.before else "")
            + f"; plan in {self.record}"
        )
        return out


def _record(folder: Path, ledger: Ledger, spec: str, seconds: float) -> Path:
    path = folder / "plan.json"
    body = {**ledger.to_json(), "range": spec, "wall_s": round(seconds, 3)}
    write_atomic(path, json.dumps(body, indent=2) + "\n", what="fleet plan")
    return path


def _write_results(project: AsvProject, machine: str, files: dict[str, str]) -> None:
    """A commit's result files into the head's results/, each atomically."""
    for name, text in files.items():
        parts = Path(name).parts
        if not (name == "benchmarks.json" or (len(parts) == 2 and parts[0] == machine)):
            raise FleetError(f"machine {machine} sent {name!r}, outside results/{machine}/")
        write_atomic(project.results_dir / name, text, what="result file")


def run_fleet(
    project: AsvProject,
    commits: Sequence[str],
    spec: str,
    *,
    bench: Sequence[str] = (),
    root: str | None = None,
    hooks: Hooks | None = None,
    echo: Callable[[str], None] | None = print,
    setup: bool = True,
) -> FleetOutcome:
    """Measure `commits` over the cluster's GPUs (see the module); the cluster joined."""
    ray = _ray.ray
    say = echo or (lambda _line: None)
    started_at = time.perf_counter()
    started = start_workers(str(root or default_root()), hooks or Hooks())
    handles = {s.worker.machine: s.handle for s in started}
    workers = tuple(s.worker for s in started)
    before = recorded_before(project, workers[0], commits)
    ledger = Ledger(tuple(commits), workers, before)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    folder = (
        project.config_path.parent / SHARDS_DIR / f"{stamp}-{commits[0][:8]}..{commits[-1][:8]}-ray"
    )
    for worker in workers:
        say(f"{worker.label}: joined")
    if before:
        say(f"{len(before)} commit(s) recorded before by a GPU of this kind: not measured again")
    pending: dict[
        ObjectRef[object], tuple[str, str | None]
    ] = {}  # ref -> (machine, commit or None: prepare)
    prepared: set[str] = set()
    try:
        with tempfile.TemporaryDirectory(prefix="fwdasv-fleet-") as scratch:
            bundle = ray.put(bundle_repository(project, Path(scratch)))
        payload = Payload.of(project)
        for machine, handle in handles.items():
            pending[handle.prepare.remote(payload, bundle, setup)] = (machine, None)
        _record(folder, ledger, spec, 0.0)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                machine, commit = pending.pop(ref)
                worker = ledger.worker(machine)
                try:
                    value = ray.get(ref)
                except ray.exceptions.RayActorError as error:
                    why = f"node lost ({type(error).__name__})"
                    requeued = ledger.lost(machine, why)
                    again = f"; {requeued[:8]} goes back to the queue" if requeued else ""
                    say(f"{worker.label}: {why}{again}")
                    stop_workers([handles[machine]])
                    continue
                except ray.exceptions.RayTaskError as error:
                    cause = error.cause if error.cause is not None else error
                    line = str(cause).strip().splitlines()[-1] if str(cause).strip() else ""
                    if commit is None:
                        ledger.lost(machine, line)
                        say(f"{worker.label}: {line}; the other GPUs go on")
                        stop_workers([handles[machine]])
                        continue
                    ledger.unmeasured(machine, commit, line)
                    say(f"{worker.label}: {commit[:8]} not measured: {line}")
                else:
                    if commit is not None:
                        if value["files"]:
                            if commit not in ledger.measured:
                                _write_results(project, machine, value["files"])
                            ledger.recorded(machine, commit, value["seconds"])
                        else:
                            why = f"no result (asv status {value['status']}): {value['tail']}"
                            ledger.unmeasured(machine, commit, why)
                            say(f"{worker.label}: {commit[:8]} {why}")
                prepared.add(machine)
            if not ready:
                continue
            # Every free GPU takes the next commit (a lost GPU's commit included).
            for free in ledger.idle():
                if free.machine not in prepared:
                    continue
                nxt = ledger.next_for(free)
                if nxt is None:
                    break
                pending[handles[free.machine].measure.remote(nxt, tuple(bench))] = (
                    free.machine,
                    nxt,
                )
            say(ledger.progress())
            _record(folder, ledger, spec, time.perf_counter() - started_at)
            if ledger.stranded():
                break
    finally:
        stop_workers(list(handles.values()))
        seconds = time.perf_counter() - started_at
        record = _record(folder, ledger, spec, seconds)
    return FleetOutcome(ledger, seconds, record)
