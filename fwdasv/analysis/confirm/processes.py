"""Bench processes of several commits, measured on demand and kept: what confirm and bisect judge.

A re-measure is per commit, not per series: one bench process of a suite measures every
case asked of it (`remeasure.resolve_cases`), so all the findings of one commit pair, or
all the series a bisection follows, are judged from the same processes. `ProcessPool`
holds one `Remeasurer` per suite and, per commit, the processes so far (each a mapping
from a series, `SeriesRef`, to that process's median). `measure(commits, rounds)` runs
`rounds` more processes of each commit, interleaved (A B A B ...); `values` gives a
series' process medians at a commit, oldest first; `Cursor` hands them to
`confirm.run_confirmation`, measuring only what no earlier finding of the pair asked for.
With `resume` (bisect, check) each process is appended to PROCESSES_FILE in the workdir
and a later pool over it takes those first: a run cut short goes on where it stopped.
With `since_judged` too (confirm, triage's fix check), a pool takes only the processes
after the last JUDGED line, which it appends once its verdicts are recorded
(`mark_judged`): a confirm cut short (a CI job's time limit) goes on from its processes,
while a pair confirmed before is measured anew. Bisect's ends over the same pair start
from all of them (`kept_dir`), so a night's bisect does not re-measure what confirm did.
A kept line of another machine is never taken. `set_aside` moves a workdir's kept
processes out of the way (check's `--fresh`), keeping them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from fwdasv.analysis.findings.series import RELATIVE_METRIC, SeriesKey, metric_name
from fwdasv.analysis.remeasure import RemeasureError, Remeasurer, resolve_cases
from fwdasv.asv.project import AsvProject
from fwdasv.hw.devices import machine_devices

PROCESSES_FILE = "processes.jsonl"  # in the workdir: one measured process a line
# A line of PROCESSES_FILE that is no process: the processes above it were judged
# (`ProcessPool.mark_judged`); a `since_judged` pool takes none of them.
JUDGED = "judged"
# The first line of a PROCESSES_FILE a `since_judged` pool (confirm, the fix check) starts
# since JUDGED lines exist. A confirm's file without it, and without a JUDGED line, was
# kept by a confirm that took nothing back: every process in it was judged, so a
# `since_judged` pool takes none of them (and marks them so, to go on from its own).
FORMAT_LINE = {"format": "processes-with-judged-lines"}
CONFIRM_DIR = ".fwdasv-confirm"  # beside asv.conf.json: each confirmed pair's processes
BISECT_DIR = ".fwdasv-bisect"  # beside asv.conf.json: each bisected range's processes


def kept_dir(project: AsvProject, kind: str, a: str, b: str) -> Path:
    """Where the processes of the pair (or range) A..B are kept: `kind` is CONFIRM_DIR or
    BISECT_DIR."""
    return project.config_path.parent / kind / f"{a[:8]}-{b[:8]}"


def set_aside(workdir: Path) -> Path | None:
    """Move the workdir's kept processes to a dated file beside it, so that a pool over the
    workdir measures anew; that file's path, or None when nothing was kept."""
    path = workdir / PROCESSES_FILE
    if not path.is_file():
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    aside = path.with_name(f"{path.stem}-before-{stamp}{path.suffix}")
    number = 1
    while aside.exists():  # two in one second: never overwrite
        number += 1
        aside = path.with_name(f"{path.stem}-before-{stamp}-{number}{path.suffix}")
    path.rename(aside)
    return aside


@dataclass(frozen=True)
class SeriesRef:
    """A series as one bench process measures it: its suite, case, and whether its value is
    the forward over the workload (`track_relative`) rather than the latency."""

    suite: str  # "forward.TinyLM"
    case: str
    relative: bool = False

    @classmethod
    def of(cls, key: SeriesKey) -> SeriesRef:
        return cls(key.suite, key.case, key.metric == RELATIVE_METRIC)

    @property
    def name(self) -> str:
        return f"{self.suite}.{metric_name(self.relative)}({self.case})"

    def shown(self, value: float) -> str:
        """A process median as a reader takes it."""
        return f"{value:.4f} (forward / workload)" if self.relative else f"{value * 1e6:.2f} us"


@dataclass
class ProcessPool:
    """The processes measured so far at each commit, for `series` (grouped by suite)."""

    project: AsvProject
    series: tuple[SeriesRef, ...]
    workdir: Path
    echo: Callable[[str], None] | None = None
    bench_echo: Callable[[str], None] | None = None
    processes: dict[str, list[dict[SeriesRef, float]]] = field(default_factory=dict)
    bench_processes: int = 0  # bench processes launched (one per suite per process)
    rounds: int = 0  # bench runs: `run` calls that measured something (one look each)
    measurers: dict[str, Remeasurer] = field(default_factory=dict)
    # The series' machine: its processes run on that machine's GPUs (`fwdasv.hw.devices`).
    machine: str | None = None
    resume: bool = False  # keep each process in PROCESSES_FILE, and take those kept first
    since_judged: bool = False  # with `resume`: only those after the last JUDGED line
    resumed: int = 0  # processes taken from the file instead of launched
    measured: int = 0  # processes launched that measured
    failed: int = 0  # processes launched that failed (a `RemeasureError`)
    last_failure: str = ""  # the last one's error
    _kept: dict[str, list[dict[SeriesRef, float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        assert self.series, "a process pool needs at least one series"
        if self.resume:
            self._kept, before_judged_lines = self._read_kept()
            if before_judged_lines:
                self._append({JUDGED: "kept before judged lines"})
        self._set_up()

    def _set_up(self) -> None:
        """One `Remeasurer` per suite, narrowed to the cases asked for (and pinned to the
        machine's GPUs)."""
        pinned = self._devices()
        for suite in dict.fromkeys(ref.suite for ref in self.series):
            cases = list(dict.fromkeys(r.case for r in self.series if r.suite == suite))
            target = resolve_cases(self.project, suite, cases)
            if pinned:
                config = replace(target.config, env={**target.config.env, **pinned})
                target = replace(target, config=config)
            self.measurers[suite] = Remeasurer(
                self.project, target, self.workdir, echo=self.echo, bench_echo=self.bench_echo
            )

    def _devices(self) -> dict[str, str]:
        """CUDA_VISIBLE_DEVICES of the machine's GPUs for every process, said once."""
        if self.machine is None:
            return {}
        choice = machine_devices(self.project.results_dir, self.machine)
        if self.echo is not None and choice.reason is not None:
            self.echo(f"  {choice.reason}")
        return choice.env()

    @property
    def kept(self) -> int:
        """Kept processes not taken yet (a `resume` pool)."""
        return sum(len(processes) for processes in self._kept.values())

    @property
    def installs(self) -> int:
        return sum(m.installs for m in self.measurers.values())

    @property
    def install_s(self) -> float:
        return sum(m.install_s for m in self.measurers.values())

    def count(self, commit: str) -> int:
        return len(self.processes.get(commit, ()))

    def values(self, commit: str, ref: SeriesRef) -> list[float]:
        return [process[ref] for process in self.processes.get(commit, ())]

    def set_aside(self, commit: str) -> int:
        """`commit`'s processes taken out of what is judged, so that it is measured again
        on fresh ones (bisect's second look at a probe it could not place); they stay in
        PROCESSES_FILE. How many there were."""
        return len(self.processes.pop(commit, []))

    def measure(
        self, commits: Sequence[str], rounds: int = 1, after: Callable[[], None] | None = None
    ) -> None:
        """`rounds` more processes of each of `commits`, interleaved (c1 c2 c1 c2 ...)."""
        self.run([commit for _ in range(rounds) for commit in commits], after)

    def run(self, plan: Sequence[str], after: Callable[[], None] | None = None) -> None:
        """One process of each commit of `plan`, in its order: one bench run (a look).
        `after()` is called after each process (a caller's progress)."""
        if not plan:
            return
        self.rounds += 1
        for commit in plan:
            self.processes.setdefault(commit, []).append(self._one(commit))
            if after is not None:
                after()

    def _read_kept(self) -> tuple[dict[str, list[dict[SeriesRef, float]]], bool]:
        """The processes a pool over this workdir kept, per commit (lines naming every
        series); and, `since_judged`, whether the file predates JUDGED lines (no FORMAT_LINE,
        no JUDGED line) and holds processes: all of them judged, none taken."""
        path = self.workdir / PROCESSES_FILE
        kept: dict[str, list[dict[SeriesRef, float]]] = {}
        if not path.is_file():
            return kept, False
        names = {ref.name: ref for ref in self.series}
        dated = judged = processes = False
        for line in path.read_text().splitlines():
            try:
                raw = json.loads(line)
                if raw == FORMAT_LINE:
                    dated = True
                    continue
                if self.since_judged and JUDGED in raw:
                    kept, judged = {}, True  # judged: a verdict was recorded from them
                    continue
                processes = processes or "commit" in raw
                commit, values = raw["commit"], raw["values"]
                process = {names[n]: float(values[n]) for n in names}
                machine = raw.get("machine")
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a line cut short, or of other series: measured again
            if machine != self.machine:
                continue  # another machine's GPUs: not this series' processes
            kept.setdefault(str(commit), []).append(process)
        if self.since_judged and not dated and not judged and processes:
            return {}, True
        return kept, False

    def _one(self, commit: str) -> dict[SeriesRef, float]:
        if self._kept.get(commit):
            self.resumed += 1
            return self._kept[commit].pop(0)
        try:
            values = self._launch(commit)
        except RemeasureError as error:
            self.failed += 1
            self.last_failure = str(error)
            raise
        self.measured += 1
        if self.resume:
            line: dict[str, object] = {
                "commit": commit,
                "values": {ref.name: v for ref, v in values.items()},
            }
            if self.machine is not None:
                line["machine"] = self.machine  # compare reads them as the commit's results
            self._append(line)
        return values

    def mark_judged(self) -> None:
        """A JUDGED line after the processes kept so far: the verdicts judged from them are
        recorded, so a later `since_judged` pool over this workdir measures anew. Nothing
        when nothing is kept."""
        if self.resume and (self.workdir / PROCESSES_FILE).is_file():
            self._append({JUDGED: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})

    def _append(self, line: dict[str, object]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / PROCESSES_FILE
        first = [FORMAT_LINE] if self.since_judged and not path.exists() else []
        with open(path, "a", encoding="utf-8") as stream:
            for each in (*first, line):
                stream.write(json.dumps(each, sort_keys=True) + "\n")

    def _launch(self, commit: str) -> dict[SeriesRef, float]:
        number = self.count(commit) + 1
        values: dict[SeriesRef, float] = {}
        for suite, measurer in self.measurers.items():
            self.bench_processes += 1
            got = measurer.process_values(commit, f"{commit[:8]}-{number}")
            for ref in (r for r in self.series if r.suite == suite):
                if (ref.case, ref.relative) not in got:
                    raise RemeasureError(
                        f"{commit[:8]} {ref.case}: the bench wrote no reference workload times "
                        "(a track_relative series needs the suite's `reference = True`)"
                    )
                values[ref] = got[ref.case, ref.relative]
        return values


@dataclass
class Cursor:
    """One series' view of an A/B pair in a pool, as `confirm.run_confirmation` measures:
    each call takes the next k processes of A and of B, measuring (interleaved) only those
    the pool does not hold yet. `on_round(n, a, b)` is told of each process pair taken, as
    soon as its second process is measured (a vLLM process takes most of a minute: a look
    of three pairs is not said all at its end)."""

    pool: ProcessPool
    a: str
    b: str
    ref: SeriesRef
    on_round: Callable[[int, float, float], None] | None = None
    taken: int = 0

    def measure(self, k: int) -> tuple[list[float], list[float]]:
        need = self.taken + k
        said = self.taken

        def say() -> None:  # the pairs complete so far, not said yet
            nonlocal said
            ready = min(self.pool.count(self.a), self.pool.count(self.b), need)
            if self.on_round is not None:
                a, b = self.pool.values(self.a, self.ref), self.pool.values(self.b, self.ref)
                for n in range(said, ready):
                    self.on_round(n + 1, a[n], b[n])
            said = max(said, ready)

        say()  # pairs the pool already held (an earlier finding's, kept ones)
        have = min(self.pool.count(self.a), self.pool.count(self.b))
        self.pool.measure([self.a, self.b], need - have, after=say)
        a = self.pool.values(self.a, self.ref)[self.taken : need]
        b = self.pool.values(self.b, self.ref)[self.taken : need]
        self.taken = need
        return a, b
