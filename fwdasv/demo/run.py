"""`fwdasv demo`: the whole service on the embedded default, in one command.

1. Builds the demo project, `tinylm`: a git repository of a small PyTorch
   model package with 12 commits of realistic history, one of which makes the
   forward clearly slower (attention stops using the fused kernel) and one
   faster (native GQA instead of repeated K/V heads).
2. Writes its asv project (configuration, one suite timing `tinylm.bench:target`
   through fwdasv's engine: CUDA graphs on a GPU, a host timer on CPU) and this
   machine's asv machine entry.
3. Measures every `--every`-th commit with `asv run`, as a nightly job that
   does not measure every commit would have.
4. Publishes the site, lists the regression asv flagged (a commit range),
   bisects it down to one commit, and publishes again.

Re-running reuses the repository, the environment and every stored result.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass
class DemoOutcome:
    directory: Path
    hashes: list[str]
    measured: list[str]
    regressions: list = field(default_factory=list)
    bisected: list = field(default_factory=list)
    wall_s: float = 0.0


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


def _percent(label: str) -> float:
    return float(label.split()[-1].rstrip("%"))


def sample_steps(
    project: asv_project.AsvProject, nightly: list[str], machine: str, echo: Callable[[str], None]
) -> list[tuple[tuple[str, str], str | None, str]]:
    """Consecutive nightly results that fwdasv's compare finds significantly slower."""
    from fwdasv.analysis.compare import WORSE, compare_commits

    steps = []
    for before, after in itertools.pairwise(nightly):
        for c in compare_commits(project, before, after, machine, factor=1.10, bench=[BENCHMARK]):
            if c.verdict == WORSE and c.judgement.ratio is not None:
                percent = 100 * (c.judgement.ratio - 1)
                echo(
                    f"  fwdasv compare: {c.name} {before[:8]} -> {after[:8]} {percent:+.1f}% "
                    f"(p={c.judgement.p_value:.1e})"
                )
                steps.append(((before, after), c.case, f"fwdasv compare: {percent:+.1f}%"))
    return steps


def run_demo(
    directory: str | Path,
    every: int = 3,
    machine: str = MACHINE,
    echo: Callable[[str], None] = print,
    bisect_regressions: bool = True,
) -> DemoOutcome:
    from fwdasv.hw import machine as hw_machine
    from fwdasv.analysis import regressions
    from fwdasv.analysis.bisect.driver import bisect

    started = time.perf_counter()
    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        echo(click.style(f"[demo] {text}", bold=True))

    say(f"1/5 demo project: a {HISTORY_LENGTH}-commit history of tinylm in {root / 'tinylm'}")
    hashes = build_project(root / "tinylm")
    suite = SuiteSpec(
        TARGET,
        CASES,
        class_name=SUITE_CLASS,
        iters=5,
        samples=10,
        warmup_s=0.1,
        # Two bench processes per commit: on a small shared CPU the process-to-
        # process noise is what hides steps from asv's detector.
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
        regression_threshold=0.10,
        force=True,
        echo=lambda line: echo(f"  {line}"),
    ).project
    entry = hw_machine.this_machine(machine)
    hw_machine.write_machine_file(entry)
    say(f"2/5 asv project {project.config_path} (machine {machine}: gpu {entry.get('gpu')})")

    nightly = nightly_commits(hashes, every)
    say(
        f"3/5 asv run: {len(nightly)} of {len(hashes)} commits (every {_ordinal(every)}, like a nightly job); "
        "stored results are reused"
    )
    asv_project.run_commits(project, nightly, machine, echo=lambda line: echo(f"  {line}"))
    say("4/5 asv publish, then the regressions asv flagged")
    asv_project.publish(project, echo=None)
    found = regressions.load_regressions(project)
    for line in regressions.format_table(found).splitlines():
        echo(f"  {line}")
    outcome = DemoOutcome(root, hashes, nightly, regressions=found)
    ranges = [
        (r.commit_range(), r.case, f"asv: {r.percent:+.1f}%")
        for r in found
        if r.benchmark == BENCHMARK
    ]
    if not ranges:
        # asv's step detector needs steps well above the noise of a few points;
        # fwdasv's compare tests each nightly step on its samples.
        ranges = sample_steps(project, nightly, machine, echo)
    if bisect_regressions and ranges:
        (good, bad), case, why = max(ranges, key=lambda r: _percent(r[2]))
        say(f"5/5 bisect {good[:8]}..{bad[:8]} ({case}, {why}) down to one commit")
        result = bisect(
            project,
            good,
            bad,
            BENCHMARK,
            machine,
            case=case,
            echo=lambda line: echo(f"  {line}"),
        )
        outcome.bisected.append(result)
        echo(f"  {result.summary()}")
        asv_project.publish(project, echo=None)
    elif not ranges:
        say("5/5 no latency regression was found; nothing to bisect")
    outcome.wall_s = time.perf_counter() - started
    say(
        f"done in {outcome.wall_s:.0f} s. The injected regression is the commit '{SLOW_COMMIT_SUBJECT}'."
    )
    for line in asv_project.site_hint(project):
        say(line)
    say(f"regressions: fwdasv regressions --config {project.config_path} --format markdown")
    return outcome
