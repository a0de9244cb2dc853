"""`fwdasv triage STATE COMMIT`: what a person says of a finding, recorded with its verdict.

The findings named (their first new commit, or bisect's culprit, starts with COMMIT;
`--bench`, `--machine` narrow them) get one verdicts-file line each with the state
(`TriageRecord`), which every listing shows and nightly's gate reads
(`fwdasv.analysis.rules.gate.counts_tonight`). `fixed-by` is recorded only after a
re-measure of the finding's old level against the fix shows the level back
(`fwdasv.analysis.confirm.fix`); otherwise nothing is recorded and the command exits 1. A
fix that is no commit, or not after the finding's first new commit, is refused (2) before
anything is installed.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import click

from fwdasv.analysis import triage
from fwdasv.analysis.commands.common import (
    analysis_command,
    max_processes_option,
    progress,
    show_bench_option,
)
from fwdasv.analysis.confirm.fix import check_fix, fix_commit, refuse_fix_before_step
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.format import format_findings
from fwdasv.analysis.findings.verdict_file import TriageRecord
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.rules.status import TriageState
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.clitools import bench_option, config_option, machine_option
from fwdasv.core.errors import EXIT_FINDING, EXIT_OK, UserError

STATES = tuple(str(s) for s in TriageState)
# A hash or a prefix git would take for one (4 hex digits at least): "" or "9" names
# nearly every finding.
_PREFIX = re.compile(r"^[0-9a-f]{4,40}$")


def named(found: tuple[Finding, ...], commit: str) -> list[Finding]:
    """The findings COMMIT names: their first new commit, or bisect's culprit, is it (a full
    hash) or starts with it (a prefix of 4-40 hex digits, naming one commit among them)."""
    wanted = commit.strip().lower()
    if not _PREFIX.match(wanted):
        raise UserError(
            f"COMMIT {commit!r} is no commit of the repository nor a hash prefix of 4 to 40 "
            "hex digits; give a finding's first new commit (the second hash of its range in "
            "`fwdasv regressions`) or its culprit"
        )
    hits: dict[str, list[Finding]] = {}
    for finding in found:
        culprit = finding.culprit()
        culprit_commit = culprit["commit"] if culprit is not None else None
        for candidate in (finding.after_commit, culprit_commit):
            if candidate is not None and candidate.lower().startswith(wanted):
                hits.setdefault(candidate.lower(), []).append(finding)
                break
    if len(hits) > 1:
        listed = ", ".join(sorted(c[:12] for c in hits))
        raise UserError(f"COMMIT {commit} is ambiguous: it starts {listed}; give more of the hash")
    return next(iter(hits.values()), [])


@analysis_command("triage")
@click.argument("state", type=click.Choice(STATES))
@click.argument("commit")
@config_option()
@machine_option("Only this machine's findings [default: every machine with results].")
@bench_option
@click.option("--note", help="What is known (acknowledged, accepted, invalid, fixed-by).")
@click.option(
    "--issue",
    metavar="URL|ID",
    help="The issue or bug that tracks it: its URL, or an id your tracker knows (#123).",
)
@click.option(
    "--fix",
    metavar="COMMIT",
    help="fixed-by: the commit that fixes it, one after the finding's first new commit; "
    "re-measured against the old level first.",
)
@max_processes_option("For fixed-by's re-measure. ")
@show_bench_option
def triage_command(
    state: str,
    commit: str,
    config: Path,
    machine: str | None,
    bench: tuple[str, ...],
    note: str | None,
    issue: str | None,
    fix: str | None,
    max_processes: int,
    show_bench: bool,
) -> None:
    """Say what a finding is: STATE for the findings COMMIT names.

    COMMIT is a finding's first new commit (the second hash of its range in
    `fwdasv regressions`) or bisect's culprit: a hash, a prefix of 4 or more hex
    digits naming one of them, a branch or a tag; --bench and
    --machine narrow the findings named. The states, after Chromium's perf
    dashboard (file bug, ignore, mark invalid) and Bencher's alert states:

    \b
    acknowledged  known, being worked on (--note, --issue): listed, not gating
    accepted      an intended trade-off (this slowdown buys accuracy): the new level
                  is the level; listed, never gating
    fixed-by      --fix COMMIT (a commit after the finding's first new commit)
                  brought the old level back: recorded only after an interleaved A/B
                  re-measure of the old level against COMMIT (confirm's rule) finds the
                  step gone; exits 1 and records nothing otherwise
    invalid       not the code's regression (a broken benchmark, a setup change);
                  listed, never gating
    open          untriaged again: the earlier state withdrawn

    `fwdasv nightly` exits 1 only for a confirmed regression nobody triaged (one
    first seen that night is one); --fail-on-open counts acknowledged ones too.
    The state is appended to <results_dir>/fwdasv-verdicts.jsonl, never rewritten:
    a later line wins. Exits 0 recorded, 1 fixed-by refused, 2 bad input.
    """
    project = AsvProject.load(config)
    if (state == TriageState.FIXED_BY) != (fix is not None):
        raise UserError(
            "--fix COMMIT goes with fixed-by, and fixed-by needs it (the commit whose "
            "re-measure shows the old level back)"
        )
    for option, value in (("--note", note), ("--issue", issue)):
        if value is not None and not value.strip():
            raise UserError(f"{option} is empty; give the text to record, or leave {option} out")
        if value is not None and state == TriageState.OPEN:
            raise UserError(
                f"{option} goes with a state it describes; open withdraws the earlier state "
                "and records none: leave it out"
            )
    # Before anything is read or installed: a fix that is no commit fails no later.
    fix_hash = fix_commit(project, fix) if fix is not None else None
    found = triage.read(project, machine=machine, bench=bench)
    asked = commit
    with contextlib.suppress(AsvError):  # a branch, tag or short hash as git takes it
        commit = project.resolve(commit)
    chosen = named(found.findings, commit)
    if not chosen:
        shown = asked if commit.startswith(asked.lower()) else f"{asked} ({commit[:8]})"
        raise UserError(
            f"COMMIT {shown}: no finding starts its range or names its culprit there; "
            "`fwdasv regressions` lists them (the second hash of a range)"
        )
    record = TriageRecord(state, note, issue)
    if fix_hash is not None:
        for finding in chosen:  # every one before the first is measured
            refuse_fix_before_step(project, finding, fix_hash)
        for finding in chosen:
            check = check_fix(
                project,
                finding,
                fix_hash,
                found.series,
                max_processes=max_processes,
                echo=progress,
                bench_echo=progress if show_bench else None,
            )
            click.echo(f"{finding.key.name} {finding.range_label}: {check.summary()}")
            if not check.level_back:
                click.echo(
                    f"fixed-by {fix_hash[:8]} refused: the re-measure does not show the old "
                    "level back (nothing recorded; `acknowledged` keeps it listed meanwhile)"
                )
                raise SystemExit(EXIT_FINDING)
        record = TriageRecord(state, note, issue, fix_hash, check.summary())
    for finding in chosen:
        record_verdict(project, finding, status=None, triage=record)
    click.echo(format_findings(found.with_verdicts(project).findings, "table"))
    raise SystemExit(EXIT_OK)
