"""A fleet's night from the head (`fwdasv fleet-nightly --ray ADDRESS RANGE`).

`fwdasv nightly` measures and gates the one machine it runs on; over a fleet the head
measures nothing itself and owns every GPU's series. `fleet_night` is the same night in
four steps: the range over the cluster (`fwdasv.fleet.run.run_fleet`: commits a GPU of
this kind recorded before are not measured again, so a sliding range measures only the
new ones), the triage of every finding on the GPU that measured it
(`fwdasv.fleet.remote.triage_on_fleet`: confirm, explain, bisect), `publish` on the head
(every machine), and nightly's gate over every machine's findings
(`rules.gate.nightly_gate`, confirmed findings only; what someone triaged is listed, not
counted). Hardware setup and pre-flight stay with each host (`fwdasv hw`). Exit status:
nightly's (0, 1 a confirmed regression nobody triaged, 2 an unreadable result file, a
suite gone dark on a machine (`rules.dark`) or a commit no GPU measured).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.format import format_findings
from fwdasv.analysis.publish.publish import publish
from fwdasv.analysis.rules.gate import counts_tonight, nightly_gate
from fwdasv.asv.project import AsvProject
from fwdasv.fleet.actor import BISECT, CONFIRM, EXPLAIN, Hooks
from fwdasv.fleet.remote import to_triage, triage_on_fleet
from fwdasv.fleet.run import run_fleet

STATUS_UNMEASURED = 2


def fleet_night(
    project: AsvProject,
    commits: Sequence[str],
    spec: str,
    *,
    root: str | None = None,
    hooks: Hooks | None = None,
    explain: bool = True,
    bisect: bool = True,
    fail_on_suspected: bool = False,
    max_processes: int = 6,
    echo: Callable[[str], None] = print,
) -> int:
    """The night over the joined cluster (see the module); its exit status."""

    def indented(line: str) -> None:
        echo(f"  {line}")

    echo(f"[fleet-nightly] 1/4 measure {spec} over the cluster")
    outcome = run_fleet(project, commits, spec, root=root, hooks=hooks, echo=indented)
    for line in outcome.lines():
        indented(line)
    todo = to_triage(findings.find(project, improvements=True), explain=explain, bisect=bisect)
    if todo:
        echo(f"[fleet-nightly] 2/4 triage {len(todo)} finding(s) on the GPUs that measured them")
        steps = (CONFIRM, *((EXPLAIN,) if explain else ()), *((BISECT,) if bisect else ()))
        triage_on_fleet(
            project, todo, steps, root=root, hooks=hooks, max_processes=max_processes, echo=indented
        )
    else:
        echo("[fleet-nightly] 2/4 nothing to triage: no finding to confirm, explain or bisect")
    echo("[fleet-nightly] 3/4 publish with every machine's findings")
    site = publish(project, echo=None)
    gate = nightly_gate(True, fail_on_suspected).exit_status(
        (f.status for f in site.findings if counts_tonight(f.triage, False)),
        len(site.unreadable),
        len(site.dark),
    )
    echo(f"[fleet-nightly] 4/4 the gate over {len(project.machines())} machine(s): exit {gate}")
    for line in format_findings(site.findings, "table", site.unreadable, site.dark).splitlines():
        indented(line)
    left = len(outcome.ledger.failed) + len(outcome.ledger.queue)
    if left:
        echo(f"[fleet-nightly] {left} commit(s) not measured (see {outcome.record})")
        return max(gate, STATUS_UNMEASURED)
    return gate
