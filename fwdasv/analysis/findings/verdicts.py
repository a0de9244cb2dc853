"""A finding's verdicts: the stored one attached to it, and a new one appended.

The verdicts file (`fwdasv.analysis.findings.verdict_file`: its line and its rules) lives in
the results directory (`verdicts_path`). `apply_verdict` attaches a finding's newest
stored verdict (about it, or about a wider range of its series that holds it) and
takes its status where the verdict re-measured it (confirmed, not-reproduced); drift
and improvements keep theirs. `record_verdict` appends one line about a finding: a
re-measure, a kernel diff, or bisect's culprit (a line without a status of its own).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.verdict_file import (
    VERDICTS_FILE,
    ConfirmationRecord,
    CulpritRecord,
    ExplainRecord,
    FindingVerdict,
    StoredVerdicts,
    TriageRecord,
    append_verdict,
    now_utc,
)
from fwdasv.analysis.rules.status import ReMeasureStatus, Status, finding_status
from fwdasv.asv.project import AsvProject


def verdicts_path(project: AsvProject) -> Path:
    return project.results_dir / VERDICTS_FILE


def apply_verdict(finding: Finding, verdicts: StoredVerdicts) -> Finding:
    """The finding with its stored verdict attached, and its status when the verdict
    re-measured it (confirmed, not-reproduced; a speed-up stays one unless not reproduced);
    drift is never overruled."""
    stored = verdicts.about(
        finding.ident, finding.before_commit, faster=finding.status == Status.IMPROVEMENT
    )
    if stored is None or finding.status == Status.DRIFT:
        return finding
    return replace(
        finding, status=finding_status(finding.status, re_measured=stored.status), verdict=stored
    )


def record_verdict(
    project: AsvProject,
    finding: Finding,
    *,
    status: Status | ReMeasureStatus | None,
    confirmation: ConfirmationRecord | None = None,
    explain: ExplainRecord | None = None,
    culprit: CulpritRecord | None = None,
    triage: TriageRecord | None = None,
) -> None:
    """Append one verdict line about `finding`: its status (None: the line says none, as
    bisect's), and its re-measure, diff or culprit."""
    append_verdict(
        verdicts_path(project),
        FindingVerdict(
            ident=finding.ident,
            recorded_at=now_utc(),
            # The range it is about: it also holds for a narrower range found later.
            before_commit=finding.before_commit,
            range_commits=tuple(c.hash for c in finding.commits) or (finding.after_commit,),
            status=status,
            confirmation=confirmation,
            explain=explain,
            culprit=culprit,
            triage=triage,
        ),
    )
