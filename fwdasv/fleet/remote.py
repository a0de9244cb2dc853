"""Confirm, explain and bisect a finding on the GPU that measured it, from the head
(`fwdasv fleet-confirm`, `fwdasv fleet-triage`).

A finding's series belongs to one machine, one GPU of the fleet. `triage_on_fleet` starts
the fleet's workers (`fwdasv.fleet.run.start_workers`), keeps the one whose GPU is that
machine (pinned to its node, the GPU Ray gave it and CUDA_VISIBLE_DEVICES its UUID) and
stops the others. That worker's workspace is brought up to date (the bundle again, its
environments reused, the head's results/<machine>/ and verdicts copied over its own), and
`fwdasv.fleet.actor.triage_here` runs triage's steps there on exactly the findings named.
The verdict lines it appended come back and are appended to the head's verdicts file
(each once), explain's profiles are written atomically under the head's .fwdasv-explain/
(the verdict's profile_dir pointing there), so `regressions` and `publish` on the head
show them; the node that ran it is in the answer. A machine no live node holds is one
line naming it (steps: actor's CONFIRM alone for `fleet-confirm`); `to_triage` picks the
findings a fleet's triage takes.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fwdasv.analysis.bisect.from_findings import range_groups
from fwdasv.analysis.confirm.reproduce import unexplained
from fwdasv.analysis.findings.finding import Finding, to_re_measure
from fwdasv.analysis.findings.verdict_file import FindingVerdict, append_verdict
from fwdasv.analysis.findings.verdicts import verdicts_path
from fwdasv.asv.project import AsvProject
from fwdasv.core.files import atomic_output
from fwdasv.fleet import _ray
from fwdasv.fleet.actor import Hooks, TriageOrder
from fwdasv.fleet.ledger import Worker
from fwdasv.fleet.run import FleetError, start_workers, stop_workers
from fwdasv.fleet.workspace import Payload, bundle_repository, default_root


def stored_results(project: AsvProject, machine: str) -> dict[str, str]:
    """The head's results/<machine>/ files and benchmarks.json, relative to results/."""
    out = {}
    for path in sorted((project.results_dir / machine).glob("*.json")):
        out[f"{machine}/{path.name}"] = path.read_text()
    index = project.results_dir / "benchmarks.json"
    if index.is_file():
        out["benchmarks.json"] = index.read_text()
    return out


def to_triage(every: Sequence[Finding], *, explain: bool, bisect: bool) -> list[Finding]:
    """What `fleet-triage` and `fleet-nightly` send to the GPUs: the findings to re-measure
    (`to_re_measure`: speed-ups not yet re-measured too), with `explain` those confirmed
    before without a kernel diff (`unexplained`), with `bisect` those of a range of several
    commits not bisected yet."""
    ranged = {f.ident for group in range_groups(every) for f in group.findings} if bisect else set()
    to_explain = {f.ident for f in unexplained(every)} if explain else set()
    return [f for f in every if to_re_measure(f) or f.ident in ranged | to_explain]


@dataclass(frozen=True)
class RemoteTriage:
    worker: Worker  # the GPU it ran on
    ran_on_node: str  # the node id the worker reported
    visible: str  # CUDA_VISIBLE_DEVICES there
    verdicts: tuple[str, ...]  # the verdict lines appended to the head's file
    log: tuple[str, ...]


def head_verdict(line: str, node_root: str, head_root: Path) -> FindingVerdict:
    """A node's verdict line as the head keeps it: explain's profile_dir, a folder of the
    node's project, the same folder of the head's."""
    verdict = FindingVerdict.from_line(json.loads(line))
    explained = verdict.explain
    if explained is not None and Path(explained.profile_dir).is_relative_to(node_root):
        moved = str(head_root / Path(explained.profile_dir).relative_to(node_root))
        verdict = replace(verdict, explain=replace(explained, profile_dir=moved))
    return verdict


def triage_on_fleet(
    project: AsvProject,
    found: Sequence[Finding],
    steps: Sequence[str],
    *,
    root: str | None = None,
    hooks: Hooks | None = None,
    max_processes: int = 6,
    echo: Callable[[str], None] | None = print,
) -> list[RemoteTriage]:
    """Each machine's findings through `steps` (actor's CONFIRM, EXPLAIN, BISECT) on that
    machine's GPU; verdicts and profiles into the head."""
    ray = _ray.ray
    say = echo or (lambda _line: None)
    by_machine: dict[str, list[Finding]] = {}
    for finding in found:
        by_machine.setdefault(finding.key.machine, []).append(finding)
    started = start_workers(str(root or default_root()), hooks or Hooks())
    where = {s.worker.machine: s for s in started}
    missing = sorted(set(by_machine) - set(where))
    if missing:
        stop_workers([s.handle for s in started])
        raise FleetError(
            f"no live node holds the GPU of machine {missing[0]} (the cluster has "
            f"{', '.join(sorted(where)) or 'none'}): start Ray on its host, or confirm there"
        )
    stop_workers([s.handle for s in started if s.worker.machine not in by_machine])
    out = []
    try:
        with tempfile.TemporaryDirectory(prefix="fwdasv-fleet-") as scratch:
            bundle = ray.put(bundle_repository(project, Path(scratch)))
        payload = Payload.of(project)
        for machine, mine in by_machine.items():
            chosen = where[machine]
            say(
                f"{', '.join(steps)}: {len(mine)} finding(s) of machine {machine} on "
                f"{chosen.worker.label}"
            )
            ray.get(chosen.handle.prepare.remote(payload, bundle))
            idents = [f.ident.to_json() for f in mine]
            verdicts = verdicts_path(project)
            known = verdicts.read_text().splitlines() if verdicts.is_file() else []
            order = TriageOrder(
                stored_results(project, machine), idents, max_processes, tuple(steps), known
            )
            done = ray.get(chosen.handle.triage.remote(order))
            head_root = project.results_dir.parent
            for name, data in done["profiles"].items():
                with atomic_output(head_root / name, binary=True, what="profile") as stream:
                    stream.write(data)
            for line in done["verdicts"]:
                append_verdict(verdicts, head_verdict(line, done["root"], head_root))
            for line in done["log"]:
                say(f"  [{chosen.worker.node_ip}] {line}")
            out.append(
                RemoteTriage(
                    chosen.worker,
                    done["node_id"],
                    done["visible"],
                    tuple(done["verdicts"]),
                    tuple(done["log"]),
                )
            )
    finally:
        stop_workers([where[m].handle for m in by_machine])
    return out
