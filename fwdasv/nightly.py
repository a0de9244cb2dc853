"""`fwdasv nightly` / scripts/nightly.py: one unattended run on a benchmark box.

In order: optional hardware setup (locked clocks, persistence), this machine's asv
entry, the pre-flight checks, `asv run` (the new commits, or one prepared build with
`--set-commit-hash`), the findings (one read of the results, `fwdasv.analysis.triage`),
their confirmation by an interleaved A/B re-measure (suspected ones too) and the kernel
diff of a confirmed one, bisect of every finding whose range holds unmeasured commits and
no culprit yet, `asv publish`, the gate (`rules.gate.nightly_gate` over what nobody
triaged, `rules.gate.counts_tonight`), and the hardware reset, which runs whatever
happened before (a failure, Ctrl-C). Each step returns a value (`MachineStep`,
`PreflightStep`, `ConfirmStep`, `BisectStep`, `NightlyOutcome`); what it prints is read
from that value. Exit status (`fwdasv.core.errors.EXIT_RULE`): 0 none below, 1 a confirmed
regression nobody triaged (any, without confirmation; a suspected one too with
`fail_on_suspected`, an acknowledged one with `fail_on_open`), 2 no run, an unreadable
result file, or a suite of this machine with no value at its newest commit
(`rules.dark`), 4 a pre-flight failure.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fwdasv.analysis import triage
from fwdasv.analysis.bisect.from_findings import range_groups
from fwdasv.analysis.findings.dark import DarkSuite
from fwdasv.analysis.findings.finding import Finding, to_re_measure
from fwdasv.analysis.findings.findings import Found
from fwdasv.analysis.findings.format import format_findings
from fwdasv.analysis.publish import notify as notify_module
from fwdasv.analysis.publish.publish import publish
from fwdasv.analysis.rules.gate import counts_tonight, inside_steps, nightly_gate
from fwdasv.asv import project as asv_project
from fwdasv.asv.history import Problem
from fwdasv.asv.project_machine import project_machine
from fwdasv.core.errors import EXIT_HARDWARE, UserError
from fwdasv.core.files import check_output_path
from fwdasv.hw import checks as hw_checks
from fwdasv.hw import machine as hw_machine
from fwdasv.hw import setup as hw_setup
from fwdasv.hw.clocks import check_lock_values
from fwdasv.hw.nvml import read_inventory

STATUS_OK, STATUS_REGRESSION, STATUS_FAILED = 0, 1, 2
# What `asv run` says (with status 1) when the range holds no commit to measure.
NOTHING_SELECTED = "No commit hashes selected"


def _run_new(
    project: asv_project.AsvProject,
    spec: str,
    machine: str,
    echo: Callable[[str], None],
    machine_file: str | os.PathLike[str] | None = None,
) -> int:
    """`asv run SPEC`; a night without new commits is not a failure (asv exits 1 then)."""
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        echo(f"  {line}")

    try:
        return asv_project.run_spec(project, spec, machine, echo=say, machine_file=machine_file)
    except asv_project.AsvError:
        if not any(NOTHING_SELECTED in line for line in lines):
            raise
        echo("[nightly] no new commit to measure; the stored results are judged again")
        return 0


@dataclass(frozen=True)
class MachineStep:
    """Step 2: this machine's asv entry, as written to the machine file."""

    name: str
    gpu: str | None
    gpu_count: str

    def lines(self) -> list[str]:
        return [f"[nightly] 2/7 machine {self.name}: gpu {self.gpu} x{self.gpu_count}"]


@dataclass(frozen=True)
class PreflightStep:
    """Step 3: the pre-flight checks (none on a machine without GPUs)."""

    checks: tuple[hw_checks.Check, ...] = ()

    @property
    def failed(self) -> list[hw_checks.Check]:
        return [c for c in self.checks if c.required and not c.ok]

    def lines(self) -> list[str]:
        out = [
            f"  {c.name} gpu {c.gpu}: {'ok' if c.ok else 'FAILED'} {c.detail}" for c in self.checks
        ]
        if self.failed:
            return [
                *out,
                f"[nightly] 3/7 pre-flight failed ({len(self.failed)} check(s)); not measuring",
            ]
        return [*out, "[nightly] 3/7 pre-flight ok"]


@dataclass(frozen=True)
class ConfirmStep:
    """Step 5's decision: whether to re-measure, and why not."""

    confirm: bool  # the gate counts only confirmed regressions
    pending: int  # findings not yet re-measured (speed-ups too, unless --no-improvements)
    existing: bool  # asked, but an existing environment installs nothing per commit

    @property
    def runs(self) -> bool:
        return self.confirm and self.pending > 0

    def lines(self) -> list[str]:
        out = []
        if self.existing:
            out.append(
                "[nightly] an existing environment installs nothing per commit: no confirmation"
            )
        if self.runs:
            out.append("[nightly] 5/7 confirm the new findings (A/B re-measure, then explain)")
        else:
            out.append(
                "[nightly] 5/7 nothing to confirm"
                if self.confirm
                else "[nightly] 5/7 confirm: skipped"
            )
        return out


@dataclass(frozen=True)
class BisectStep:
    """Step 6's decision: whether to bisect, and why not."""

    bisect: bool  # asked (--bisect) on an environment that installs each commit
    pending: int  # ranges of several commits without a culprit
    existing: bool  # asked, but an existing environment installs nothing per commit

    @property
    def runs(self) -> bool:
        return self.bisect and self.pending > 0

    def lines(self) -> list[str]:
        if self.existing:
            return ["[nightly] 6/7 bisect: an existing environment installs nothing per commit"]
        if self.runs:
            return [f"[nightly] 6/7 bisect {self.pending} range(s) of several commits"]
        return [
            "[nightly] 6/7 nothing to bisect" if self.bisect else "[nightly] 6/7 bisect: skipped"
        ]


@dataclass(frozen=True)
class NightlyOutcome:
    """What one night found and its exit status; `findings` are this machine's, as published."""

    status: int
    machine: MachineStep | None = None
    preflight: PreflightStep | None = None
    asv_status: int | None = None
    confirmation: ConfirmStep | None = None
    bisection: BisectStep | None = None
    findings: tuple[Finding, ...] = ()
    unreadable: tuple[Problem, ...] = ()  # result files the findings could not read
    fail_on_open: bool = False  # an acknowledged finding gates too
    dark: tuple[DarkSuite, ...] = ()  # this machine's suites with nothing at their newest

    @property
    def triaged(self) -> list[Finding]:
        """The gating findings someone triaged that the gate does not count: listed only."""
        return [
            f for f in self.findings if f.gating and not counts_tonight(f.triage, self.fail_on_open)
        ]

    def lines(self) -> list[str]:
        listing = format_findings(self.findings, "table", self.unreadable, self.dark)
        out = [f"  {line}" for line in listing.splitlines()]
        if self.triaged:
            states = ", ".join(f"{f.key.name} {f.range_label}: {f.triage}" for f in self.triaged)
            out.append(f"[nightly] triaged, listed, not gating: {states}")
        return out


def run_nightly(
    config: str | Path,
    *,
    machine: str | None = None,
    gpus: tuple[str, ...] | None = None,
    lock_clocks: str | None = None,
    state_file: str | os.PathLike[str] | None = None,
    spec: str = "NEW",
    existing_python: str | None = None,
    commit: str | None = None,
    machine_file: str | os.PathLike[str] | None = None,
    confirm: bool | None = None,
    fail_on_suspected: bool = False,
    explain: bool = True,
    improvements: bool = True,
    bisect: bool = True,
    skip_unreadable: bool = False,
    notify: tuple[str, ...] = (),
    site_url: str | None = None,
    echo: Callable[[str], None] = print,
    fail_on_open: bool = False,  # an acknowledged regression gates too
) -> NightlyOutcome:
    """The seven steps, each returning what it found; the `[nightly]` lines are printed from
    those values (a step's first line before its work, whose own output is indented).
    The outcome's `status` is the exit status (see the module). With `notify` URLs, the
    findings the night brought are POSTed to each (`fwdasv.analysis.publish.notify`),
    after the gate, which a failed POST never changes. Refused in one line before anything
    runs: a `notify` or `site_url` that is no http(s) URL with a host, `existing_python`
    without `commit` or `commit` without it, a `spec` git cannot read or a reversed A..B
    (`asv_project.check_spec`)."""
    project = asv_project.AsvProject.load(config)
    if confirm is None:
        confirm = project.verdict_settings().confirm
    if existing_python and not commit:
        raise UserError("--existing needs --commit: asv must be told which commit the build is")
    if commit and not existing_python:
        raise UserError(
            "--commit needs --existing: it names the commit of an --existing build; "
            "without --existing asv run measures --spec (NEW by default), drop --commit"
        )
    # Before the clocks are touched or anything runs.
    for url in notify:
        notify_module.check_url(url, "--notify", "give the webhook's address, http(s)://HOST/PATH")
    if site_url is not None:
        notify_module.check_url(
            site_url, "--site-url", "give where html/ is served, http(s)://HOST/PATH"
        )
    # Not over results/<machine>/machine.json.
    project.check_output(hw_machine.machine_file_path(machine_file), what="--machine-file")
    check_output_path(hw_machine.machine_file_path(machine_file), what="--machine-file")
    if state_file is not None:
        project.check_output(state_file, what="--state-file")
    if not existing_python:
        asv_project.check_spec(project, spec)
    check_lock_values(lock_clocks, None)

    def say(lines: list[str]) -> None:
        for line in lines:
            echo(line)

    # The project's machine, before anything runs: another box is refused, not a new series.
    machine = project_machine(project, machine, gpus)
    locked = False
    try:
        if lock_clocks:
            echo(f"[nightly] 1/7 hardware setup: lock clocks at {lock_clocks}")
            hw_setup.setup(gpus, lock_clocks, persistence=True, state_file=state_file, echo=echo)
            locked = True
        else:
            echo("[nightly] 1/7 hardware setup: none asked (clocks as they are)")
        this = _machine_step(machine, gpus, locked, machine_file)
        say(this.lines())
        preflight = _preflight(this, gpus, state_file, locked)
        say(preflight.lines())
        if preflight.failed:
            return NightlyOutcome(EXIT_HARDWARE, this, preflight)
        # What the findings were before the night's run: the message tells only what is new.
        prior = triage.read(project, machine=this.name) if notify else None
        asv_status = _measure(project, this.name, spec, existing_python, commit, echo, machine_file)
        if asv_status == 2:
            echo("[nightly] some benchmarks failed (their results are recorded as failed)")
        # The night's one read of the results; confirm and bisect add only verdicts.
        found = triage.read(project, machine=this.name, improvements=improvements)
        step = ConfirmStep(
            confirm=confirm and not existing_python,
            pending=sum(to_re_measure(f, improvements=improvements) for f in found.findings),
            existing=bool(confirm and existing_python),
        )
        say(step.lines())
        if step.runs:
            found = triage.confirm(
                project,
                found,
                run_explain=explain,
                improvements=improvements,
                echo=lambda line: echo(f"  {line}"),
            )
        ranges = range_groups(found.findings)
        bisection = BisectStep(
            bisect and not existing_python, len(ranges), bool(bisect and existing_python)
        )
        say(bisection.lines())
        if bisection.runs:
            triage.bisect(project, found, echo=lambda line: echo(f"  {line}"))
        echo("[nightly] 7/7 asv publish with the findings")
        site = publish(project, echo=None)
        published = tuple(f for f in site.findings if f.key.machine == this.name)
        dark = tuple(d for d in site.dark if d.machine == this.name)
        # Skipped, an unreadable file still counts inside a finding's range (misread there).
        unreadable = [p.path for p in site.unreadable]
        counted = (
            len(inside_steps(unreadable, site.steps())) if skip_unreadable else len(unreadable)
        )
        # Only what nobody triaged gates (an acknowledged one too with fail_on_open).
        gate = nightly_gate(step.confirm, fail_on_suspected).exit_status(
            (f.status for f in published if counts_tonight(f.triage, fail_on_open)),
            counted,
            len(dark),
        )
        outcome = NightlyOutcome(
            gate,
            this,
            preflight,
            asv_status,
            step,
            bisection,
            published,
            site.unreadable,
            fail_on_open,
            dark,
        )
        say(outcome.lines())
        if prior is not None:
            _notify(project, this.name, prior, outcome, notify, site_url, echo)
        return outcome
    finally:
        if locked:
            echo("[nightly] reset: restoring the saved GPU state")
            hw_setup.reset(state_file, echo=echo)


def _notify(
    project: asv_project.AsvProject,
    machine: str,
    prior: Found,
    outcome: NightlyOutcome,
    urls: tuple[str, ...],
    site_url: str | None,
    echo: Callable[[str], None],
) -> None:
    """One document to each URL when the night brought a finding or a suite went dark;
    none on a quiet night. `prior`: the results as read before the night's run."""
    new = notify_module.news(notify_module.seen(prior.findings), outcome.findings)
    dark = notify_module.dark_news(notify_module.seen_dark(prior.dark), outcome.dark)
    if not new and not dark:
        echo("[nightly] notify: nothing new tonight, no message")
        return
    name = str(project.raw.get("project", project.config_path.parent.name))
    document = notify_module.night_document(name, machine, new, outcome.status, site_url, dark)
    what = f"{len(new)} new finding(s)" + (f", {len(dark)} suite(s) gone dark" if dark else "")
    for url in urls:
        sent = notify_module.post(url, document, echo=lambda line: echo(f"  {line}"))
        echo(f"[nightly] notify {url}: {what} " + ("sent" if sent else "NOT sent"))


def _machine_step(
    machine: str | None,
    gpus: tuple[str, ...] | None,
    locked: bool,
    machine_file: str | os.PathLike[str] | None,
) -> MachineStep:
    entry = hw_machine.this_machine(machine, gpus, "locked" if locked else "auto")
    hw_machine.write_machine_file(entry, machine_file)
    return MachineStep(entry["machine"], entry.get("gpu"), entry.get("gpu_count", "0"))


def _preflight(
    this: MachineStep,
    gpus: tuple[str, ...] | None,
    state_file: str | os.PathLike[str] | None,
    locked: bool,
) -> PreflightStep:
    if this.gpu_count == "0":
        return PreflightStep()
    inventory = read_inventory(gpus, state_file)
    return PreflightStep(tuple(hw_checks.preflight(inventory, "locked" if locked else "any")))


def _measure(
    project: asv_project.AsvProject,
    name: str,
    spec: str,
    existing_python: str | None,
    commit: str | None,
    echo: Callable[[str], None],
    machine_file: str | os.PathLike[str] | None = None,
) -> int:
    """Step 4: `asv run` of the new commits, or of the existing environment's one build
    (asv reading `machine_file` for the machine, when given)."""
    if not existing_python:
        echo(f"[nightly] 4/7 asv run {spec}")
        return _run_new(project, spec, name, echo, machine_file)
    echo(f"[nightly] 4/7 asv run on the existing environment {existing_python}, commit {commit}")
    return asv_project.run_asv(
        project,
        "run",
        "-E",
        f"existing:{existing_python}",
        "--set-commit-hash",
        str(commit),
        "--machine",
        name,
        "--record-samples",
        "--launch-method",
        "spawn",
        "--show-stderr",
        echo=lambda line: echo(f"  {line}"),
        check_codes=(0, 2),
        machine_file=machine_file,
    )
