"""`fwdasv demo`: the whole service on the embedded default, in one command.

1. Builds the demo project, `tinylm`: a git repository of a small PyTorch
   model package with 14 commits of realistic history, one of which makes the
   forward clearly slower (attention stops using the fused kernel) and one
   faster (native GQA instead of repeated K/V heads).
2. Writes its asv project through `fwdasv init`'s code (configuration, one
   suite timing `tinylm.bench:target` through fwdasv's engine: CUDA graphs on
   a GPU, a host timer on CPU) and this machine's asv machine entry.
3. Measures every `--every`-th commit with `asv run`, as a nightly job that
   does not measure every commit would have. On a noisy machine (a busy CPU
   box: run-to-run noise above NOISY_PCT) where nothing stood out yet, it
   measures the commits in between too: more commits at each level and a
   better noise estimate are what resolve a step there.
4. Lists the findings of the stored results (each series judged by its own
   noise), confirms the regression by an interleaved A/B re-measure, bisects
   its range down to one commit, explains it (the ops that got slower), and
   publishes the site with the finding, its status and its diff.

Re-running reuses the repository, the environment and every stored result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from fwdasv.asv import project as asv_project
from fwdasv.asv.scaffold import SuiteSpec, init_project
from fwdasv.demo.project import HISTORY_LENGTH, SLOW_COMMIT_SUBJECT, TARGET, build_project

SUITE_CLASS = "TinyLM"
# Attention-heavy shapes, so the injected regression (and the speed-up) stand
# far above host-timing noise on a small CPU box (about +80% and +45%).
CASES = ("decode_bs8_2k=8*1@2048", "prefill_512=512")
BENCHMARK = f"forward.{SUITE_CLASS}.track_latency"
MACHINE = "fwdasv-demo"
# Above this run-to-run noise (a busy CPU box) the commits the nightly-style run
# skipped are measured too when nothing was found: see run_demo.
NOISY_PCT = 2.0


@dataclass
class DemoOutcome:
    directory: Path
    hashes: list[str]
    measured: list[str]
    regressions: list = field(default_factory=list)
    bisected: list = field(default_factory=list)
    explained: Any = None  # the kernel/op diff of the culprit
    wall_s: float = 0.0


def _noisiest_case(project: asv_project.AsvProject, machine: str) -> tuple[str, float]:
    """The demo's latency case with the most run-to-run noise, and its noise_pct."""
    from fwdasv.analysis import findings
    from fwdasv.analysis.noise import estimate_noise

    _, series = findings.load_series(project, machine)
    noise = [
        (key.case, estimate_noise(s.history).noise_pct)
        for key, s in series.items()
        if key.benchmark == BENCHMARK and any(s.history)
    ]
    return max(noise, key=lambda item: item[1], default=("", 0.0))


def nightly_commits(hashes: list[str], every: int) -> list[str]:
    """Every `every`-th commit from the first, and always the last."""
    chosen = hashes[::every]
    if hashes[-1] not in chosen:
        chosen.append(hashes[-1])
    return chosen


def _ordinal(n: int) -> str:
    if n == 1:
        return "one"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def run_demo(
    directory: str | Path,
    every: int = 2,
    machine: str = MACHINE,
    echo: Callable[[str], None] = print,
    bisect_regressions: bool = True,
) -> DemoOutcome:
    from fwdasv.analysis import findings
    from fwdasv.analysis.bisect.driver import bisect
    from fwdasv.analysis.explain import explain_commits, explain_record, format_diff
    from fwdasv.analysis.gate import FINDINGS
    from fwdasv.analysis.publish import publish
    from fwdasv.analysis.reproduce import confirm_findings
    from fwdasv.analysis.status import Status
    from fwdasv.hw import machine as hw_machine

    started = time.perf_counter()
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        echo(click.style(f"[demo] {text}", bold=True))

    def indented(line: str) -> None:
        echo(f"  {line}")

    say(f"1/7 demo project: a {HISTORY_LENGTH}-commit history of tinylm in {root / 'tinylm'}")
    hashes = build_project(root / "tinylm")
    suite = SuiteSpec(
        TARGET,
        CASES,
        class_name=SUITE_CLASS,
        iters=5,
        samples=10,
        warmup_s=0.1,
        # Two bench processes per commit: on a small shared CPU the process-to-
        # process noise is what a verdict must see.
        launches=2,
        # One thread: steadier host timings on a small CPU box; ignored on a GPU.
        env={"OMP_NUM_THREADS": "1"},
        doc="tinylm's forward: 8 decodes over 2048 cached tokens, and a 512-token prefill.",
    )
    # What `fwdasv init` does, with the demo's suite settings; the demo owns its
    # directory, so a re-run rewrites its own (identical) files.
    project = init_project(
        root,
        root / "tinylm",
        suite,
        project="tinylm",
        force=True,
        echo=indented,
    ).project
    entry = hw_machine.this_machine(machine)
    hw_machine.write_machine_file(entry)
    say(f"2/7 asv project {project.config_path} (machine {machine}: gpu {entry.get('gpu')})")

    nightly = nightly_commits(hashes, every)
    say(
        f"3/7 asv run: {len(nightly)} of {len(hashes)} commits (every {_ordinal(every)}, "
        "like a nightly job); stored results are reused"
    )
    asv_project.run_commits(project, nightly, machine, echo=indented)
    found = findings.find(project, machine=machine, bench=[BENCHMARK])
    rest = [h for h in hashes if h not in nightly]
    unresolved = rest and not any(FINDINGS.fails(f.status) for f in found)
    # The results are read again for the noise only when nothing was found.
    noisiest = _noisiest_case(project, machine) if unresolved else ("", 0.0)
    if unresolved and noisiest[1] > NOISY_PCT:
        # A level needs MIN_SEGMENT measured commits, and a threshold Studentized with
        # few commits is high: on a noisy machine every commit is what resolves a step.
        say(
            f"3/7 nothing stands out of this machine's noise yet ({noisiest[0]}: noise_pct "
            f"{noisiest[1]:.1f}% on {len(nightly)} commits): measuring the other "
            f"{len(rest)} commits too"
        )
        asv_project.run_commits(project, rest, machine, echo=indented)
        nightly = list(hashes)
        found = findings.find(project, machine=machine, bench=[BENCHMARK])
    say("4/7 findings: each series judged by its own run-to-run noise")
    for line in findings.format_findings(found, "table").splitlines():
        indented(line)
    outcome = DemoOutcome(root, hashes, nightly, regressions=found)
    pending = [f for f in found if FINDINGS.fails(f.status)]
    if not pending:
        say("5/7 no latency regression was found; nothing to confirm or bisect")
    else:
        worst = max(pending, key=lambda f: f.percent)
        if worst.status == Status.REGRESSION:
            say(f"5/7 confirm {worst.key.name}: A/B interleaved on this machine")
            confirm_findings(project, [worst], max_processes=6, run_explain=False, echo=indented)
            worst = next(
                (
                    f
                    for f in findings.find(project, machine=machine, bench=[BENCHMARK])
                    if f.ident == worst.ident
                ),
                worst,
            )
        else:
            say(f"5/7 {worst.key.name} already {worst.status}")
        good, bad = worst.commit_range()
        if bisect_regressions and len(worst.commits) > 1:
            say(f"6/7 bisect {good[:8]}..{bad[:8]} ({worst.key.case}) down to one commit")
            result = bisect(
                project, good, bad, BENCHMARK, machine, case=worst.key.case, echo=indented
            )
            outcome.bisected.append(result)
            indented(result.summary())
            if result.reproducible:
                good, bad = result.last_good, result.first_bad
        else:
            say(f"6/7 the step is one commit, {bad[:8]}: nothing to bisect")
        say(f"7/7 explain {good[:8]} -> {bad[:8]}: what got slower")
        explained = explain_commits(project, good, bad, BENCHMARK, worst.key.case, echo=indented)
        diff = explained.diff
        for line in format_diff(diff, "table", top=8, good=good[:8], bad=bad[:8]).splitlines():
            indented(line)
        record = explain_record(diff, good, bad, explained.profile_dir, with_commits=True)
        findings.record_verdict(project, worst, status=worst.status, explain=record)
        outcome.explained = diff
    found = publish(project, echo=None)
    outcome.regressions = [f for f in found if f.key.machine == machine]
    outcome.wall_s = time.perf_counter() - started
    say(
        f"done in {outcome.wall_s:.0f} s. The injected regression is the commit "
        f"'{SLOW_COMMIT_SUBJECT}'."
    )
    for line in asv_project.site_hint(project):
        say(line)
    say(f"regressions: fwdasv regressions --config {project.config_path} --format markdown")
    return outcome
