"""The fleet's queue and record (`fwdasv.fleet.ledger`): pure, no Ray."""

from __future__ import annotations

import hashlib
import json

from fwdasv.fleet.ledger import Ledger, Worker, already_recorded

COMMITS = tuple(hashlib.sha1(str(i).encode()).hexdigest() for i in range(1, 10))


def _workers(n: int) -> tuple[Worker, ...]:
    return tuple(Worker(f"m{k}", f"node{k}", f"10.0.0.{k}", f"GPU-{k}") for k in range(n))


def _drain(ledger: Ledger, order: list[int]) -> None:
    """Workers (by index) finish their commit and pull the next, in `order`."""
    for k in order:
        worker = ledger.workers[k]
        if worker.machine in ledger.in_flight:
            ledger.recorded(worker.machine, ledger.in_flight[worker.machine], 1.0)
        if worker.machine not in ledger.lost_workers:
            ledger.next_for(worker)


def test_equal_gpus_measure_interleaved_shares_each_commit_once():
    ledger = Ledger(COMMITS, _workers(3))
    _drain(ledger, [0, 1, 2] * 4)
    assert ledger.finished and set(ledger.measured) == set(COMMITS)
    assert ledger.by_machine() == {f"m{k}": list(COMMITS[k::3]) for k in range(3)}
    assert ledger.progress().startswith("fleet: 9/9 done, 0 queued, 0 measuring, 0 re-run")


def test_a_slow_gpu_measures_fewer_the_others_take_its_share_from_the_end():
    ledger = Ledger(COMMITS, _workers(3))
    # m2 takes its first commit and never finishes; m0 and m1 pull all the rest.
    _drain(ledger, [2, *([0, 1] * 6)])
    assert ledger.queue == [] and ledger.in_flight == {"m2": COMMITS[2]}
    assert len(ledger.by_machine()["m0"]) + len(ledger.by_machine()["m1"]) == 8
    assert ledger.by_machine()["m2"] == []


def test_a_lost_gpus_commit_is_re_run_elsewhere_and_named_its_share_taken():
    ledger = Ledger(COMMITS, _workers(3))
    _drain(ledger, [0, 1, 2])
    lost = ledger.lost("m1", "node lost (ActorDiedError)")
    assert lost == COMMITS[1] and ledger.queue[0] == COMMITS[1]
    _drain(ledger, [0, 2] * 6)
    assert ledger.finished and set(ledger.measured) == set(COMMITS) and not ledger.failed
    assert ledger.measured[COMMITS[1]].rerun and ledger.measured[COMMITS[1]].machine != "m1"
    plan = ledger.to_json()
    assert plan["reruns"] == [
        {"commit": COMMITS[1], "lost_machine": "m1", "reason": "node lost (ActorDiedError)"}
    ]
    assert plan["lost"] == [{"machine": "m1", "why": "node lost (ActorDiedError)"}]
    assert "m1" not in {row["machine"] for row in plan["measured_by"]}
    assert "lost" in ledger.progress()
    json.dumps(plan)


def test_a_result_that_comes_twice_is_kept_once_and_earlier_runs_are_not_queued():
    assert already_recorded(COMMITS, ["0123abcd-env.json", "machine.json"]) == frozenset()
    before = already_recorded(COMMITS, [f"{COMMITS[0][:8]}-fwdasv-py3.11.json"])
    ledger = Ledger(COMMITS, _workers(2), before=before)
    assert COMMITS[0] not in ledger.queue and len(ledger.queue) == len(COMMITS) - 1
    first = ledger.next_for(ledger.workers[0])
    assert first is not None
    assert ledger.recorded("m0", first, 1.0) is True
    assert ledger.recorded("m1", first, 1.0) is False, "recorded once"
    assert ledger.measured[first].machine == "m0"


def test_a_commit_no_gpu_can_measure_is_given_up_after_two_and_everything_lost_strands():
    ledger = Ledger(COMMITS[:2], _workers(2))
    a = ledger.next_for(ledger.workers[0])
    assert a is not None
    ledger.unmeasured("m0", a, "no result")
    assert ledger.next_for(ledger.workers[1]) == a, "another GPU tries it first"
    ledger.unmeasured("m1", a, "no result")
    assert ledger.failed == {a: "no result"}
    ledger.lost("m0", "gone")
    ledger.lost("m1", "gone")
    assert ledger.stranded()
