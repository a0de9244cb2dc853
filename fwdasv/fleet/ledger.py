"""The fleet's queue and record: which GPU measures which commit, what was re-run.

Pure (no Ray, no files). `Ledger` holds the range's commits (oldest first), the GPUs
(`Worker`: machine, node, GPU UUID) and, as the run goes, who measured each commit. Each
GPU starts with an interleaved share, as on one host (GPU k of N: commits k, k+N, ...,
so every GPU's series spans the range and a step shows on each); work is pulled:
`next_for(worker)` hands an idle GPU the next commit of its share, or, its share done,
takes one from the end of the largest share left, so a slow node measures fewer. A GPU
lost mid-commit (`lost`) has its unfinished commit, marked a re-run, and its share taken
first by the others; a GPU is lost for the rest of the run. A commit is recorded once (`recorded` refuses a second time and says so); one
that no GPU could measure twice is given up (`failed`). `to_json` is the run's plan,
written beside the results; `progress` the one line the head prints.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

LEDGER_VERSION = 1
TRIES = 2  # a commit is measured on at most this many GPUs before it is given up


@dataclass(frozen=True)
class Worker:
    """One GPU of the cluster: its asv machine and where it is."""

    machine: str
    node_id: str
    node_ip: str
    gpu_uuid: str
    entry: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        return f"node {self.node_ip} GPU {self.gpu_uuid} (machine {self.machine})"

    def to_json(self) -> dict[str, str]:
        return {
            "machine": self.machine,
            "node_id": self.node_id,
            "node_ip": self.node_ip,
            "gpu_uuid": self.gpu_uuid,
        }


@dataclass(frozen=True)
class Measured:
    commit: str
    machine: str
    seconds: float
    rerun: bool  # measured after a lost GPU's try

    def to_json(self) -> dict[str, object]:
        return {
            "commit": self.commit,
            "machine": self.machine,
            "seconds": round(self.seconds, 3),
            "rerun": self.rerun,
        }


@dataclass(frozen=True)
class Rerun:
    commit: str
    lost_machine: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"commit": self.commit, "lost_machine": self.lost_machine, "reason": self.reason}


@dataclass
class Ledger:
    commits: tuple[str, ...]
    workers: tuple[Worker, ...]
    before: frozenset[str] = frozenset()  # recorded by an earlier run: not queued
    measured: dict[str, Measured] = field(default_factory=dict)
    reruns: list[Rerun] = field(default_factory=list)
    lost_workers: dict[str, str] = field(default_factory=dict)  # machine -> why, one line
    failed: dict[str, str] = field(default_factory=dict)  # commit -> why no GPU measured it
    in_flight: dict[str, str] = field(default_factory=dict)  # machine -> commit
    tries: dict[str, int] = field(default_factory=dict)
    shares: dict[str, deque[str]] = field(default_factory=dict)  # machine -> its commits left
    orphans: deque[str] = field(default_factory=deque)  # taken first: re-runs, lost shares

    def __post_init__(self) -> None:
        machines = [w.machine for w in self.workers]
        assert len(set(machines)) == len(machines), f"one machine per GPU: {machines}"
        if not self.shares:
            todo = [c for c in self.commits if c not in self.before]
            n = len(machines)
            self.shares = {m: deque(todo[k::n]) for k, m in enumerate(machines)}

    @property
    def queue(self) -> list[str]:
        """Every commit not yet handed out: re-runs first, then the shares."""
        return [*self.orphans, *(c for share in self.shares.values() for c in share)]

    # ----------------------------------------------------------------- the queue

    def worker(self, machine: str) -> Worker:
        return next(w for w in self.workers if w.machine == machine)

    def idle(self) -> list[Worker]:
        """GPUs neither lost nor measuring, in plan order."""
        return [
            w
            for w in self.workers
            if w.machine not in self.lost_workers and w.machine not in self.in_flight
        ]

    def next_for(self, worker: Worker) -> str | None:
        """The next queued commit for `worker` (now in flight on it), or None."""
        assert worker.machine not in self.in_flight and worker.machine not in self.lost_workers
        own = self.shares[worker.machine]
        if self.orphans:
            commit = self.orphans.popleft()
        elif own:
            commit = own.popleft()
        else:
            largest = max(self.shares.values(), key=len)
            if not largest:
                return None
            commit = largest.pop()
        self.in_flight[worker.machine] = commit
        self.tries[commit] = self.tries.get(commit, 0) + 1
        return commit

    def recorded(self, machine: str, commit: str, seconds: float) -> bool:
        """`machine` measured `commit`; False (nothing kept) when it was recorded already."""
        if self.in_flight.get(machine) == commit:
            del self.in_flight[machine]
        if commit in self.measured or commit in self.before:
            return False
        rerun = any(r.commit == commit for r in self.reruns)
        self.measured[commit] = Measured(commit, machine, seconds, rerun)
        return True

    def unmeasured(self, machine: str, commit: str, why: str) -> None:
        """`machine` ran `commit` to no result: another GPU tries it, up to TRIES in all."""
        if self.in_flight.get(machine) == commit:
            del self.in_flight[machine]
        if self.tries.get(commit, 0) >= TRIES:
            self.failed[commit] = why
        else:
            self.orphans.appendleft(commit)

    def lost(self, machine: str, why: str) -> str | None:
        """`machine`'s GPU is gone for this run; its unfinished commit (requeued), if any."""
        self.lost_workers.setdefault(machine, why)
        commit = self.in_flight.pop(machine, None)
        if commit is not None and commit not in self.measured:
            self.reruns.append(Rerun(commit, machine, why))
            self.tries[commit] = max(0, self.tries.get(commit, 1) - 1)  # not the commit's fault
            self.orphans.appendleft(commit)
        self.orphans.extend(self.shares[machine])
        self.shares[machine].clear()
        return commit

    @property
    def finished(self) -> bool:
        return not self.queue and not self.in_flight

    def stranded(self) -> bool:
        """Work queued and no GPU left to take it."""
        return bool(self.queue) and len(self.lost_workers) == len(self.workers)

    # ----------------------------------------------------------------- what it says

    def progress(self) -> str:
        """One line: done / queued / re-run in all, and per node."""
        per_node: dict[str, list[int]] = {}
        for w in self.workers:
            per_node.setdefault(w.node_ip, [0, 0])
        for m in self.measured.values():
            per_node[self.worker(m.machine).node_ip][0] += 1
        for machine in self.in_flight:
            per_node[self.worker(machine).node_ip][1] += 1
        lost_nodes = {self.worker(m).node_ip for m in self.lost_workers}
        nodes = " ".join(
            f"{ip}:{done}{'+' + str(busy) if busy else ''}{' lost' if ip in lost_nodes else ''}"
            for ip, (done, busy) in per_node.items()
        )
        total = len(self.commits) - len(self.before)
        return (
            f"fleet: {len(self.measured)}/{total} done, {len(self.queue)} queued, "
            f"{len(self.in_flight)} measuring, {len(self.reruns)} re-run, "
            f"{len(self.failed)} failed | per node (done+measuring): {nodes}"
        )

    def by_machine(self) -> dict[str, list[str]]:
        """machine -> the commits it measured, in range order."""
        out: dict[str, list[str]] = {w.machine: [] for w in self.workers}
        for commit in self.commits:
            if commit in self.measured:
                out[self.measured[commit].machine].append(commit)
        return out

    def gpu_seconds(self) -> float:
        return sum(m.seconds for m in self.measured.values())

    def to_json(self) -> dict[str, object]:
        return {
            "version": LEDGER_VERSION,
            "commits": list(self.commits),
            "workers": [w.to_json() for w in self.workers],
            "recorded_before": sorted(self.before),
            # Which GPU measured which commit, in the range's order.
            "measured_by": [self.measured[c].to_json() for c in self.commits if c in self.measured],
            "reruns": [r.to_json() for r in self.reruns],
            "lost": [{"machine": m, "why": why} for m, why in self.lost_workers.items()],
            "failed": [{"commit": c, "why": why} for c, why in self.failed.items()],
            "queued": list(self.queue),
            "gpu_s": round(self.gpu_seconds(), 3),
        }


def already_recorded(commits: Sequence[str], stored: Iterable[str]) -> frozenset[str]:
    """Which of `commits` a stored result names (`stored`: full hashes or asv's 8-char
    file prefixes)."""
    prefixes = {s[:8] for s in stored}
    return frozenset(c for c in commits if c[:8] in prefixes)
