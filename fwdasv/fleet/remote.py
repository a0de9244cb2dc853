"""Confirm a finding on the GPU that measured it, from the head (`fwdasv fleet-confirm`).

A finding's series belongs to one machine, one GPU of the fleet. `confirm_on_fleet`
starts the fleet's workers (`fwdasv.fleet.run.start_workers`), keeps the one whose GPU is
that machine (pinned to its node, the GPU Ray gave it and CUDA_VISIBLE_DEVICES its UUID)
and stops the others. That worker's workspace is brought up to date (the bundle again,
its environments reused, the head's results/<machine>/ copied over its own), and
`confirm_here` runs fwdasv's interleaved A/B there (`confirm_findings`, explain off: no
profile travels back yet) on exactly the findings named. The verdict lines it appended
come back and are appended to the head's verdicts file, so `fwdasv regressions` and
`publish` on the head show them; the node that ran it is in the answer. A machine no live
node holds is one line naming it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fwdasv.asv.project import AsvProject
from fwdasv.core.files import write_atomic
from fwdasv.fleet.actor import Hooks
from fwdasv.fleet.ledger import Worker
from fwdasv.fleet.run import FleetError, start_workers, stop_workers
from fwdasv.fleet.workspace import Payload, bundle_repository, default_root

if TYPE_CHECKING:  # analysis is imported when a confirm runs
    from fwdasv.analysis.findings.finding import Finding


def stored_results(project: AsvProject, machine: str) -> dict[str, str]:
    """The head's results/<machine>/ files and benchmarks.json, relative to results/."""
    out = {}
    for path in sorted((project.results_dir / machine).glob("*.json")):
        out[f"{machine}/{path.name}"] = path.read_text()
    index = project.results_dir / "benchmarks.json"
    if index.is_file():
        out["benchmarks.json"] = index.read_text()
    return out


def confirm_here(
    project: AsvProject,
    machine: str,
    stored: Mapping[str, str],
    idents: Sequence[Mapping[str, Any]],
    max_processes: int,
) -> dict[str, Any]:
    """On the node: the head's results in place, the named findings confirmed here."""
    from fwdasv.analysis import triage
    from fwdasv.analysis.findings.verdicts import verdicts_path

    mine = project.results_dir / machine
    for old in mine.glob("*.json"):
        old.unlink()
    for name, text in stored.items():
        write_atomic(project.results_dir / name, text, what="result file")
    verdicts = verdicts_path(project)
    verdicts.unlink(missing_ok=True)  # only what this confirm appends goes back
    wanted = [dict(i) for i in idents]
    read = triage.read(project, machine=machine)
    found = [f for f in read.findings if f.ident.to_json() in wanted]
    lines: list[str] = []
    triage.confirm(
        project,
        read,
        pending=found,
        max_processes=max_processes,
        run_explain=False,
        echo=lines.append,
    )
    appended = verdicts.read_text().splitlines() if verdicts.is_file() else []
    return {"verdicts": appended, "log": lines, "confirmed": len(found)}


@dataclass(frozen=True)
class RemoteConfirm:
    worker: Worker  # the GPU it ran on
    ran_on_node: str  # the node id the worker reported
    visible: str  # CUDA_VISIBLE_DEVICES there
    verdicts: tuple[str, ...]  # the verdict lines appended to the head's file
    log: tuple[str, ...]


def confirm_on_fleet(
    project: AsvProject,
    found: Sequence[Finding],
    *,
    root: str | None = None,
    hooks: Hooks | None = None,
    max_processes: int = 6,
    echo: Callable[[str], None] | None = print,
) -> list[RemoteConfirm]:
    """Each machine's findings confirmed on that machine's GPU; verdicts into the head."""
    import ray

    from fwdasv.analysis.findings.verdict_file import FindingVerdict, append_verdict
    from fwdasv.analysis.findings.verdicts import verdicts_path

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
            say(f"confirming {len(mine)} finding(s) of machine {machine} on {chosen.worker.label}")
            ray.get(chosen.handle.prepare.remote(payload, bundle))
            idents = [f.ident.to_json() for f in mine]
            done = ray.get(
                chosen.handle.confirm.remote(
                    stored_results(project, machine), idents, max_processes
                )
            )
            for line in done["verdicts"]:
                append_verdict(verdicts_path(project), FindingVerdict.from_line(json.loads(line)))
            for line in done["log"]:
                say(f"  [{chosen.worker.node_ip}] {line}")
            out.append(
                RemoteConfirm(
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
