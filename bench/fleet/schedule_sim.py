"""The fleet's scheduling at scale, simulated with its own queue (`fwdasv.fleet.ledger`).

    python bench/fleet/schedule_sim.py [--commits 600] [--gpus 8 32 100] [--repeat 20]

Pure Python, no Ray: the real `Ledger` (interleaved shares, pulled, stealing from the end
of the largest share, a lost node's commit re-run) over an event loop, beside today's
static split (`fwdasv shard`: GPU k measures every Nth commit). Per-commit costs are the
H200 vLLM history's (docs/measurements.md, "Per-commit cost, after"): a GPU's first
commit 120 s, later ones 49-62 s, one in ten +19 s (model file changed); 4 GPUs a node.
Scenarios: clean; stragglers (one GPU in eight 1.3x slower); node lost (stragglers, and
the first node lost at half the clean wall time). Printed: wall time, the clean run's GPU
time idle at the end, the share lost to stragglers (against clean) and to the failure
(against stragglers alone), commits re-run, and the static split's wall time and the
commits it leaves unmeasured when the node is lost.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from fwdasv.fleet.ledger import Ledger, Worker

COLD_S = 120.0
WARM_S = 53.0
WARM_SPREAD = (49.0, 62.0)
MODEL_FILE_SHARE = 0.1
MODEL_FILE_S = 19.0
GPUS_PER_NODE = 4
STRAGGLER_EVERY = 8
STRAGGLER_FACTOR = 1.3


@dataclass(frozen=True)
class Run:
    wall_s: float
    reruns: int
    unmeasured: int


def commit_costs(commits: int, rng: random.Random) -> list[float]:
    """Each commit's warm cost on a nominal GPU."""
    return [
        rng.uniform(*WARM_SPREAD) + (MODEL_FILE_S if rng.random() < MODEL_FILE_SHARE else 0.0)
        for _ in range(commits)
    ]


def speeds(gpus: int, stragglers: bool) -> list[float]:
    return [
        STRAGGLER_FACTOR if stragglers and k % STRAGGLER_EVERY == STRAGGLER_EVERY - 1 else 1.0
        for k in range(gpus)
    ]


def pulled(costs: list[float], speed: list[float], lose_at: float | None) -> Run:
    """The fleet: the real Ledger over an event loop."""
    names = [f"c{i:05d}" for i in range(len(costs))]
    cost = dict(zip(names, costs, strict=True))
    workers = tuple(
        Worker(f"g{k}", f"n{k // GPUS_PER_NODE}", f"10.0.0.{k // GPUS_PER_NODE}", f"GPU-{k}")
        for k in range(len(speed))
    )
    ledger = Ledger(tuple(names), workers)
    warm: set[str] = set()
    events: list[tuple[float, str, str]] = []  # (end, machine, commit)

    def start(worker: Worker, now: float) -> None:
        commit = ledger.next_for(worker)
        if commit is None:
            return
        k = int(worker.machine[1:])
        seconds = (cost[commit] if worker.machine in warm else COLD_S) * speed[k]
        warm.add(worker.machine)
        heapq.heappush(events, (now + seconds, worker.machine, commit))

    for worker in workers:
        start(worker, 0.0)
    now, lost_done = 0.0, lose_at is None
    while events:
        end, machine, commit = heapq.heappop(events)
        if not lost_done and end > lose_at:
            heapq.heappush(events, (end, machine, commit))
            now = lose_at
            lost_done = True
            gone = [w for w in workers if w.node_id == "n0"]
            for worker in gone:
                ledger.lost(worker.machine, "node lost")
            events = [e for e in events if e[1] not in {w.machine for w in gone}]
            heapq.heapify(events)
            for worker in ledger.idle():
                start(worker, now)
            continue
        now = end
        ledger.recorded(machine, commit, 0.0)
        for worker in ledger.idle():
            start(worker, now)
    assert set(ledger.measured) == set(names), "every commit measured once"
    return Run(now, len(ledger.reruns), 0)


def static(costs: list[float], speed: list[float], lose_at: float | None) -> Run:
    """Today's `fwdasv shard`: GPU k measures commits k, k+N, ...; nothing moves."""
    n = len(speed)
    wall, unmeasured = 0.0, 0
    for k in range(n):
        t = 0.0
        for i, c in enumerate(costs[k::n]):
            t_next = t + (c if i else COLD_S) * speed[k]
            if lose_at is not None and k < GPUS_PER_NODE and t_next > lose_at:
                unmeasured += len(costs[k::n]) - i
                break
            t = t_next
        wall = max(wall, t)
    return Run(wall, 0, unmeasured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=600)
    parser.add_argument("--gpus", type=int, nargs="+", default=[8, 32, 100])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(
        "| GPUs | clean wall h | idle at the end | stragglers wall h | lost to stragglers "
        "| node lost wall h "
        "| lost to the failure | re-run | static split wall h (stragglers) "
        "| static, node lost: unmeasured |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for gpus in args.gpus:
        rows: dict[str, list[float]] = {}
        for seed in range(args.repeat):
            rng = random.Random(seed)
            costs = commit_costs(args.commits, rng)
            clean = pulled(costs, speeds(gpus, False), None)
            slow = pulled(costs, speeds(gpus, True), None)
            lost = pulled(costs, speeds(gpus, True), clean.wall_s / 2)
            fixed = static(costs, speeds(gpus, True), None)
            fixed_lost = static(costs, speeds(gpus, True), clean.wall_s / 2)
            work = sum(costs) + gpus * (COLD_S - statistics.mean(costs))
            for key, value in (
                ("clean", clean.wall_s),
                ("idle", (clean.wall_s - work / gpus) / clean.wall_s),
                ("slow", slow.wall_s),
                ("straggle", (slow.wall_s - clean.wall_s) / slow.wall_s),
                ("lost", lost.wall_s),
                ("failure", (lost.wall_s - slow.wall_s) / lost.wall_s),
                ("reruns", lost.reruns),
                ("static", fixed.wall_s),
                ("unmeasured", fixed_lost.unmeasured),
            ):
                rows.setdefault(key, []).append(value)
        m = {k: statistics.mean(v) for k, v in rows.items()}
        print(
            f"| {gpus} | {m['clean'] / 3600:.2f} | {100 * m['idle']:.1f}% | {m['slow'] / 3600:.2f} | "
            f"{100 * m['straggle']:.1f}% | {m['lost'] / 3600:.2f} | {100 * m['failure']:.1f}% | "
            f"{m['reruns']:.0f} | {m['static'] / 3600:.2f} | {m['unmeasured']:.0f} |"
        )


if __name__ == "__main__":
    main()
