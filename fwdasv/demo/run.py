"""`fwdasv demo`: the whole service on the embedded default, in one command.

1. Builds the demo project, `tinylm` (`fwdasv.demo.project`): a small PyTorch model's
   git history, one commit of which makes the forward clearly slower.
2. Writes its asv project through `fwdasv init`'s code and this machine's entry.
3. Measures every `--every`-th commit with `asv run`, as a nightly job would (paced on a
   CPU, as `init` writes it there); the commits in between too where nothing stood out
   of a noisy machine's noise (above NOISY_PCT) or a series reads too noisy for 2 commits
   a side to show a step (above HIDING_PCT).
4. Lists the findings, speed-ups too (every step of each series; the gate is on
   slowdowns), confirms each `regression` and `suspected` one by an interleaved A/B
   re-measure (as nightly does; the speed-ups are left to nightly and `fwdasv
   confirm`), bisects the worst that holds down to one commit, explains it (the ops
   that got slower), and publishes the site. Each step returns a value;
   `DemoOutcome.found_injected` is the demo's own check. Re-running reuses the
   repository, environment and results.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click
import json5

from fwdasv.analysis import triage
from fwdasv.analysis.bisect.driver import bisect
from fwdasv.analysis.bisect.environment import BisectError
from fwdasv.analysis.bisect.from_findings import settled
from fwdasv.analysis.bisect.outcome import BisectResult
from fwdasv.analysis.explain.explain import explain_commits, explain_record
from fwdasv.analysis.explain.kernel_diff import KernelDiff
from fwdasv.analysis.explain.kernel_diff_format import format_diff
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.findings.findings import Found, judged_series
from fwdasv.analysis.findings.format import format_findings
from fwdasv.analysis.findings.verdicts import record_verdict
from fwdasv.analysis.publish.publish import publish
from fwdasv.analysis.rules.gate import FINDINGS
from fwdasv.analysis.rules.noise import estimate_noise
from fwdasv.analysis.rules.status import TO_CONFIRM, Status
from fwdasv.asv import project as asv_project
from fwdasv.asv.project_machine import ProjectMachine, choose_machine
from fwdasv.asv.scaffold import init_project
from fwdasv.asv.suitespec import SuiteSpec, paced_by_default
from fwdasv.core.clitools import command_here
from fwdasv.demo.project import (
    HISTORY_LENGTH,
    SLOW_COMMIT_SUBJECT,
    TARGET,
    build_project,
    slow_commit,
)
from fwdasv.hw import machine as hw_machine
from fwdasv.hw.machine import this_machine

SUITE_CLASS = "TinyLM"
# Attention-heavy shapes, so the injected regression (and the speed-up) stand
# far above host-timing noise on a small CPU box (about +80% and +45%).
CASES = ("decode_bs8_2k=8*1@2048", "prefill_512=512")
DEMO_DOC = "tinylm's forward: 8 decodes over 2048 cached tokens, and a 512-token prefill."
BENCHMARK = f"forward.{SUITE_CLASS}.track_latency"
# On a CPU the suite is paced (`fwdasv init`'s default there): its track_relative is what
# the findings judge in place of the latency (fwdasv.analysis.findings.findings.judged_series).
RELATIVE_BENCHMARK = f"forward.{SUITE_CLASS}.track_relative"
JUDGED = (BENCHMARK, RELATIVE_BENCHMARK)
MACHINE = "fwdasv-demo"
# Above this run-to-run noise (a busy CPU box) the commits the nightly-style run
# skipped are measured too when nothing was found: see run_demo.
NOISY_PCT = 2.0
# A series this noisy shows no step with 2 commits a side, the demo's levels at every 2nd
# commit (their threshold is about 6x the noise at dof 4.6): at 21% the paced decode hid a
# -57% speed-up that every commit measured showed at 7% (docs/measurements.md, 17).
HIDING_PCT = 5.0


@dataclass(frozen=True)
class Measured:
    """What step 3 measured: the commits, the findings on them, and why it widened (if it did)."""

    commits: list[str]
    read: Found  # the findings on them, with the read they came from
    # The noisiest case and its noise_pct, when the commits between were measured too.
    widened_for: tuple[str, float] | None = None

    @property
    def found(self) -> list[Finding]:
        return list(self.read.findings)


@dataclass(frozen=True)
class Diagnosis:
    """Steps 5-7 on the worst gating finding: its verdict, the bisect, the kernel diff."""

    finding: Finding  # as re-judged after its confirmation
    good: str  # the commits the diff is of: the step's, or bisect's pair
    bad: str
    bisected: BisectResult | None
    diff: KernelDiff
    recorded: str | None = None  # the culprit an earlier run's bisect recorded, reused

    @property
    def culprit(self) -> str | None:
        """The one commit named: bisect's first bad one (this run's or an earlier one's),
        or the step's only commit."""
        if self.recorded is not None:
            return self.recorded
        if self.bisected is not None:
            return self.bisected.first_bad if self.bisected.reproducible else None
        return self.bad if len(self.finding.commits) <= 1 else None


@dataclass(frozen=True)
class DemoOutcome:
    directory: Path
    hashes: list[str]
    measured: list[str]
    regressions: list[Finding] = field(default_factory=list)  # as published, this machine's
    bisected: list[BisectResult] = field(default_factory=list)
    explained: KernelDiff | None = None  # the kernel/op diff of the culprit
    wall_s: float = 0.0
    machine: str = MACHINE
    injected: str = ""  # the hash of the commit the demo made slower
    culprit: str | None = None  # the commit fwdasv named (bisect's, or a one-commit step's)
    diagnosed: Finding | None = None  # the finding bisected and explained

    @property
    def found_injected(self) -> bool:
        """Whether fwdasv named the injected regression: the demo's own check."""
        return bool(self.injected) and self.culprit == self.injected


def _noisiest_case(read: Found) -> tuple[str, float]:
    """The demo's judged case (its latency, or its paced ratio) with the most run-to-run
    noise, and its noise_pct."""
    series = read.series
    noise = [
        (key.case, estimate_noise(series[key].history).noise_pct)
        for key in judged_series(series)
        if key.benchmark in JUDGED and any(series[key].history)
    ]
    return max(noise, key=lambda item: item[1], default=("", 0.0))


def nightly_commits(hashes: list[str], every: int) -> list[str]:
    """Every `every`-th commit counted back from the newest (a nightly job measures the
    newest), and always the first: oldest first."""
    chosen = hashes[::-1][::every][::-1]
    if hashes[0] not in chosen:
        chosen.insert(0, hashes[0])
    return chosen


def _ordinal(n: int) -> str:
    if n == 1:
        return "one"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def run_demo(
    directory: str | Path,
    every: int = 2,
    machine: str | None = None,
    echo: Callable[[str], None] = print,
    bisect_regressions: bool = True,
) -> DemoOutcome:
    """The demo's seven steps (see the module), each returning what it found; the lines
    `[demo] ...` are printed from those values, the tools' own output indented."""
    started = time.perf_counter()
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        echo(click.style(f"[demo] {text}", bold=True))

    def indented(line: str) -> None:
        echo(f"  {line}")

    say(f"1/7 demo project: a {HISTORY_LENGTH}-commit history of tinylm in {root / 'tinylm'}")
    hashes = build_project(root / "tinylm")
    machine = demo_machine(root, machine)
    project, gpu = _asv_project(root, machine, indented)
    say(f"2/7 asv project {project.config_path} (machine {machine}: gpu {gpu})")
    others = [m for m in _machines_stored(project) if m != machine]
    if others and not _stored_under(project, machine):
        indented(
            f"machine {machine!r} has no results in this project yet (stored: "
            f"{', '.join(others)}): its series start afresh, every commit measured again; "
            f"the commands printed last name it with --machine"
        )
    steps = _Steps(project, machine, say, indented)
    measured = steps.measure(hashes, every)
    say("4/7 findings: each series judged by its own run-to-run noise")
    _lines(indented, _findings_table(measured.found))
    pending, settled = to_diagnose(measured.found)
    explained = None
    if not pending and not settled:
        say("5/7 no latency regression was found; nothing to confirm or bisect")
    else:
        if not pending:
            names = ", ".join(f"{f.key.case} at {f.after_commit[:8]}" for f in settled)
            say(f"5/7 {names}: {settled[0].status} by an earlier run's re-measure")
        # As nightly: a suspected finding is re-measured too, and only what holds goes on.
        confirmed = steps.confirm(measured.read, pending) if pending else []
        held = [*settled, *(f for f in confirmed if FINDINGS.fails(f.status))]
        if not held:
            say(
                "6/7 the re-measure ruled out (or could not decide) every finding: nothing to bisect"
            )
        else:
            worst = max(held, key=lambda f: (f.status == Status.CONFIRMED, f.percent))
            explained = steps.diagnose(worst, bisect_regressions)
    published = [f for f in publish(project, echo=None).findings if f.key.machine == machine]
    outcome = DemoOutcome(
        root,
        hashes,
        measured.commits,
        regressions=published,
        bisected=[explained.bisected] if explained and explained.bisected else [],
        explained=explained.diff if explained else None,
        wall_s=time.perf_counter() - started,
        machine=machine,
        injected=slow_commit(hashes),
        culprit=explained.culprit if explained else None,
        diagnosed=explained.finding if explained else None,
    )
    for line in _closing_lines(outcome, project):
        say(line)
    for line in next_commands(outcome, project):
        echo(line)
    return outcome


def demo_read(project: asv_project.AsvProject, machine: str) -> Found:
    """The findings of the demo's judged series on `machine`, speed-ups included: step 4
    lists every step of each series (the GQA speed-up, then the injected slowdown, on the
    decode case), and only the slowdowns go on to be confirmed (`to_diagnose`)."""
    return triage.read(project, machine=machine, bench=JUDGED, improvements=True)


def to_diagnose(found: Sequence[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(pending, settled): the findings to re-measure (`regression`, `suspected`, as
    nightly), and those an earlier run's re-measure confirmed (a re-run goes on with them
    without another)."""
    pending = [f for f in found if f.status in TO_CONFIRM]
    return pending, [f for f in found if f not in pending and FINDINGS.fails(f.status)]


def _lines(echo: Callable[[str], None], lines: Iterable[str]) -> None:
    for line in lines:
        echo(line)


def _findings_table(found: Sequence[Finding]) -> list[str]:
    return format_findings(found, "table").splitlines()


def demo_suite(
    paced: bool,
    *,
    iters: int = 5,
    samples: int = 10,
    warmup_s: float = 0.1,
    launches: int = 2,
    doc: str = "",
) -> SuiteSpec:
    """tinylm's suite: the demo's cases, paced (fwdasv's fixed workload timed beside each
    replay, on the CPU, as `fwdasv init` writes a CPU suite) or not; the demo's scale by
    default, a smaller one for the tests and bench scripts that build the demo's project."""
    return SuiteSpec(
        TARGET,
        CASES,
        class_name=SUITE_CLASS,
        device="cpu" if paced else "auto",
        reference=paced,
        iters=iters,
        samples=samples,
        warmup_s=warmup_s,
        # Two bench processes per commit by default: on a small shared CPU the process-to-
        # process noise is what a verdict must see.
        launches=launches,
        # One thread: steadier host timings on a small CPU box; ignored on a GPU.
        env={"OMP_NUM_THREADS": "1"},
        doc=doc,
    )


def _asv_project(
    root: Path, machine: str, indented: Callable[[str], None]
) -> tuple[asv_project.AsvProject, str | None]:
    """Step 2: the asv project, as `fwdasv init` writes it with the demo's suite settings (the
    demo owns its directory, so a re-run rewrites its own, identical, files), and this
    machine's entry; returns the project and the machine's GPU."""
    # Paced on a CPU, as `fwdasv init` writes it there: fwdasv's fixed workload timed
    # beside each replay, so a busy box's own changes of speed cancel in track_relative.
    suite = demo_suite(paced_by_default(), doc=DEMO_DOC)
    project = init_project(
        root,
        root / "tinylm",
        suite,
        project="tinylm",
        force=True,
        echo=indented,
        machine=ProjectMachine.of(this_machine(machine)),
    ).project
    return project, record_demo_machine(project, machine, indented).get("gpu")


def demo_machine(root: Path, asked: str | None) -> str:
    """The machine a run of the demo in `root` measures under: `asked`; else the one its
    project records when this box is that machine (`fwdasv.asv.project_machine`: another
    box is refused); else MACHINE."""
    config = root / "asv.conf.json"
    raw = json5.loads(config.read_text()) if config.is_file() else {}
    return choose_machine(raw, asked, this_machine, str(config)) or MACHINE


def record_demo_machine(
    project: asv_project.AsvProject, machine: str, indented: Callable[[str], None]
) -> dict[str, str]:
    """This machine's entry in asv's machine file, under the demo's name."""
    entry = hw_machine.this_machine(machine)
    try:
        hw_machine.write_machine_file(entry)
    except hw_machine.MachineCollision:
        # The entry is another environment's (another demo's, or a test run's). When this
        # directory stores no result under the name, nothing of it would be mislabelled:
        # the entry is this demo's from now on. Stored results under it stay refused.
        if _stored_under(project, entry["machine"]):
            raise
        indented(
            f"machine {entry['machine']!r}: the entry in asv's machine file was written for "
            "another environment, and this directory stores no result under it: rewritten "
            "for this one"
        )
        hw_machine.write_machine_file(entry, replace=True)
    return entry


def _machines_stored(project: asv_project.AsvProject) -> list[str]:
    """The machines the project's results dir holds results of, by name."""
    if not project.results_dir.is_dir():
        return []
    return sorted(d.name for d in project.results_dir.iterdir() if _stored_under(project, d.name))


def _stored_under(project: asv_project.AsvProject, machine: str) -> bool:
    """Whether the project's results dir holds a result of `machine` (beyond its machine.json)."""
    folder = project.results_dir / machine
    return folder.is_dir() and any(
        f.name != "machine.json" for f in folder.glob("*.json") if f.is_file()
    )


ASV_LOG = "asv-run.log"  # in the demo's project directory, appended run after run
# asv's own step lines ("· Creating environments", "·· Installing", "[ 7.0%] · For tinylm
# commit ..."): a benchmark's line has three dots, its notes four.
_ASV_STEP = re.compile(r"^\s*(\[\s*[\d.]+%\]\s*)?·{1,2}\s")
_ASV_TROUBLE = re.compile(r"\bfailed\b|Error|Traceback")


@dataclass
class AsvDigest:
    """asv's output as the demo shows it: every line into `log`, and on screen only asv's
    step lines (environments, installs, the benchmark count, each commit), a failed
    benchmark and an error. The rest stays in the log: ~16 tables a commit, half of them
    GPU telemetry (n/a on a CPU), and the bench's per-case notes (`notes` counts the
    "unstable timing" ones)."""

    log: Path
    show: Callable[[str], None]
    lines: int = 0
    notes: int = 0

    def __call__(self, line: str) -> None:
        with self.log.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
        self.lines += 1
        self.notes += "unstable timing" in line
        if _ASV_STEP.match(line) or _ASV_TROUBLE.search(line):
            self.show(line)

    def summary(self) -> str:
        noted = (
            f", and {self.notes} 'unstable timing' notes: the sample spread of this box, which "
            "each series' noise takes in"
            if self.notes
            else ""
        )
        return f"asv's whole output ({self.lines} lines: its tables{noted}): {self.log}"


@dataclass(frozen=True)
class _Steps:
    """Steps 3 and 5-7 on the demo's asv project and machine: `say` prints the `[demo]`
    lines, `indented` the tools' own output."""

    project: asv_project.AsvProject
    machine: str
    say: Callable[[str], None]
    indented: Callable[[str], None]

    def measure(self, hashes: list[str], every: int) -> Measured:
        """Step 3: every `every`-th commit, as a nightly job; the commits in between too on
        a noisy machine where nothing stood out yet, or where a series is too noisy for its
        levels of 2 commits to show a step."""
        project, machine = self.project, self.machine
        nightly = nightly_commits(hashes, every)
        self.say(
            f"3/7 asv run: {len(nightly)} of {len(hashes)} commits (every {_ordinal(every)}, "
            "like a nightly job); stored results are reused"
        )
        self._run(nightly)
        found = demo_read(project, machine)
        rest = [h for h in hashes if h not in nightly]
        if not rest:
            return Measured(nightly, found)
        case, noise_pct = _noisiest_case(found)
        stood_out = any(FINDINGS.fails(f.status) for f in found.findings)
        if not measure_between(noise_pct, stood_out):
            return Measured(nightly, found)
        # A level needs MIN_SEGMENT measured commits, and a threshold Studentized with
        # few commits is high: on a noisy machine every commit is what resolves a step.
        missing, line = widen_line(
            case, noise_pct, len(nightly), rest, _stored(project, machine), stood_out
        )
        self.say(line)
        if not missing:
            return Measured(list(hashes), found, widened_for=(case, noise_pct))
        self._run(missing)
        found = demo_read(project, machine)
        return Measured(list(hashes), found, widened_for=(case, noise_pct))

    def _run(self, commits: list[str]) -> None:
        """`asv run` of `commits`, its output digested (`AsvDigest`)."""
        digest = AsvDigest(self.project.config_path.parent / ASV_LOG, self.indented)
        asv_project.run_commits(self.project, commits, self.machine, echo=digest)
        if digest.lines:
            self.indented(digest.summary())

    def diagnose(self, worst: Finding, bisect_regressions: bool) -> Diagnosis:
        """Steps 6-7 on the worst finding that held its confirmation: bisect its range,
        explain its commits."""
        good, bad = worst.commit_range()
        bisected = None
        recorded = recorded_culprit(worst)
        if bisect_regressions and recorded is not None:
            good, bad = recorded
            self.say(
                f"6/7 bisect: {bad[:8]} named by an earlier run's bisect (recorded with the "
                "finding); not searched again"
            )
        elif bisect_regressions and len(worst.commits) > 1:
            bisected = self.bisect(worst)
            if bisected is not None:  # its culprit (or why none) in the verdicts file
                record_verdict(self.project, worst, status=None, culprit=bisected.culprit_record())
            if bisected is not None and bisected.reproducible:
                good, bad = bisected.last_good, bisected.first_bad
        else:
            self.say(f"6/7 the step is one commit, {bad[:8]}: nothing to bisect")
        self.say(f"7/7 explain {good[:8]} -> {bad[:8]}: what got slower")
        explained = explain_commits(
            self.project, good, bad, BENCHMARK, worst.key.case, echo=self.indented
        )
        diff = explained.diff
        table = format_diff(diff, "table", top=8, good=good[:8], bad=bad[:8])
        _lines(self.indented, table.splitlines())
        record = explain_record(diff, good, bad, explained.profile_dir, with_commits=True)
        record_verdict(self.project, worst, status=worst.status, explain=record)
        return Diagnosis(worst, good, bad, bisected, diff, recorded[1] if recorded else None)

    def confirm(self, read: Found, pending: Sequence[Finding]) -> list[Finding]:
        """Step 5: an interleaved A/B re-measure of each finding not yet re-measured
        (`regression` and `suspected`, as nightly), from step 3's read; the findings as now
        judged."""
        names = ", ".join(f"{f.key.case} at {f.after_commit[:8]} ({f.status})" for f in pending)
        self.say(f"5/7 confirm {names}: A/B interleaved on this machine")
        judged = triage.confirm(
            self.project,
            read,
            pending=pending,
            max_processes=6,
            run_explain=False,
            echo=self.indented,
        )
        again = {f.ident: f for f in judged.findings}
        return [again.get(f.ident, f) for f in pending]

    def bisect(self, worst: Finding) -> BisectResult | None:
        """Step 6: bisect the finding's range down to one commit (None: bisect could not
        start, e.g. its ends did not differ by process-level variation on a very busy box;
        the finding's own range is explained instead)."""
        good, bad = worst.commit_range()
        self.say(f"6/7 bisect {good[:8]}..{bad[:8]} ({worst.key.case}) down to one commit")
        try:
            result = bisect(
                self.project,
                good,
                bad,
                worst.key.benchmark,
                self.machine,
                case=worst.key.case,
                echo=self.indented,
            )
        except BisectError as error:
            self.indented(
                f"bisect could not decide: {error}; explaining the confirmed range instead"
            )
            return None
        self.indented(result.summary())
        return result


def recorded_culprit(finding: Finding) -> tuple[str, str] | None:
    """(last good, first bad) where an earlier bisect of the finding's range named its
    first bad commit (`fwdasv.analysis.bisect.from_findings.settled`); None otherwise."""
    culprit = finding.culprit_record
    if culprit is None or culprit.commit is None or not settled(finding):
        return None
    chain = [finding.before_commit, *(c.hash for c in finding.commits)]
    if culprit.commit not in chain[1:]:
        return None
    return chain[chain.index(culprit.commit) - 1], culprit.commit


def measure_between(noise_pct: float, stood_out: bool) -> bool:
    """Whether step 3 measures the commits between the nightly ones: the noisiest judged
    series reads above NOISY_PCT with nothing found, or above HIDING_PCT beside a finding."""
    return noise_pct > (HIDING_PCT if stood_out else NOISY_PCT)


def widen_line(
    case: str,
    noise_pct: float,
    measured: int,
    rest: Sequence[str],
    stored: set[str],
    stood_out: bool = False,
) -> tuple[list[str], str]:
    """The commits of `rest` still to measure (no stored result: `stored` holds short
    hashes), and the line that says so; a re-run with all stored measures none.
    `stood_out`: a finding stood out already, but `case` is too noisy to show a step."""
    missing = [h for h in rest if h[:8] not in stored]
    noisy = (
        f"3/7 {case} is too noisy for 2 commits a side to show a step (noise_pct {noise_pct:.1f}%"
        if stood_out
        else f"3/7 nothing stands out of this machine's noise yet ({case}: noise_pct {noise_pct:.1f}%"
    )
    if not missing:
        return missing, f"{noisy}, every commit measured; the other {len(rest)} are stored)"
    kept = f" ({len(rest) - len(missing)} already stored)" if len(missing) < len(rest) else ""
    return (
        missing,
        f"{noisy} on {measured} commits): measuring the other {len(missing)} commits too{kept}",
    )


def _stored(project: asv_project.AsvProject, machine: str) -> set[str]:
    """The short hashes with a result file of this machine (asv's <sha8>-<env>.json)."""
    folder = project.results_dir / machine
    return {p.name.split("-", 1)[0] for p in folder.glob("*-*.json")} if folder.is_dir() else set()


def _closing_lines(outcome: DemoOutcome, project: asv_project.AsvProject) -> list[str]:
    fwdasv = command_here("fwdasv")
    short = outcome.injected[:8]
    if outcome.found_injected:
        verdict = [
            f"done in {outcome.wall_s:.0f} s. fwdasv named the injected regression: {short} "
            f"'{SLOW_COMMIT_SUBJECT}', the commit the demo made slower."
        ]
    else:
        if outcome.culprit is not None:
            what = f"it named {outcome.culprit[:8]} instead"
        elif outcome.explained is not None:
            what = "the step it found was not pinned down to one commit"
        else:
            what = "no latency regression stood out of this machine's noise"
        verdict = [
            f"done in {outcome.wall_s:.0f} s. The demo did NOT find its injected regression "
            f"({short} '{SLOW_COMMIT_SUBJECT}'): {what}.",
            "What to do: run it again (stored results are reused; re-measuring adds samples: "
            f"cd {project.config_path.parent} && {command_here('asv', relative=False)} run --append-samples "
            f"--machine {outcome.machine} ALL), preferably with fewer other jobs on this machine; "
            f"`{fwdasv} regressions --config {project.config_path}` lists what was found.",
        ]
    return [*verdict, *asv_project.site_hint(project)]


def next_commands(outcome: DemoOutcome, project: asv_project.AsvProject) -> list[str]:
    """The commands to run next, as printed last: each runnable from here as it stands, with
    the exit status it gives by the rule of `fwdasv --help` (`fwdasv.core.errors.EXIT_RULE`).
    They follow the finding the demo diagnosed (explain: bisect's pair, when it named one);
    without one, the injected commit and its parent."""
    fwdasv = command_here("fwdasv")
    config = str(project.config_path)
    with contextlib.suppress(ValueError):
        inside = os.path.relpath(config)
        config = inside if not inside.startswith("..") else config
    worst = outcome.diagnosed
    if worst is not None:
        good, bad = worst.commit_range()
        bench, case, which = worst.key.benchmark, worst.key.case, "the finding's pair"
    else:
        at = outcome.hashes.index(outcome.injected) if outcome.injected in outcome.hashes else 1
        good, bad = outcome.hashes[max(at - 1, 0)], outcome.hashes[at]
        bench, case, which = BENCHMARK, CASES[-1].split("=")[0], "the injected commit's pair"
    pair = f"{good[:8]} {bad[:8]}"
    named = next((r for r in outcome.bisected if r.reproducible), None)
    # explain as the demo did: bisect's last good and first bad commits, when it named them.
    diffed = f"{named.last_good[:8]} {named.first_bad[:8]}" if named is not None else pair
    where = f"--config {config}"
    if len(_machines_stored(project)) > 1:  # compare refuses to pick one of several
        where += f" --machine {outcome.machine}"
    return [
        f"next ({which}; exit statuses: `{fwdasv} --help`):",
        f"  {fwdasv} regressions {where}   # 1: a regression or confirmed finding, 0: none",
        f"  {fwdasv} confirm {where}   # re-measures what is not yet; 1: a confirmed regression",
        f"  {fwdasv} compare {pair} {where}   # 1: {bad[:8]} is slower",
        f"  {fwdasv} bisect {good[:8]}..{bad[:8]} {bench} --case {case} {where}"
        "   # 0: the first bad commit named, 1: not for sure, 2: cannot bisect",
        f"  {fwdasv} explain {diffed} {BENCHMARK} --case {case} {where}"
        "   # 1: a slowdown stands out of the noise",
        f"  {fwdasv} export {where} -o {Path(config).parent / 'latency.csv'}   # 0: written",
    ]
