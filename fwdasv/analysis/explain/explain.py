"""`fwdasv explain`'s measuring: one suite case profiled at GOOD and at BAD, then diffed.

`explain_commits` profiles the case `rounds` bench processes a commit, interleaved
(GOOD BAD GOOD BAD ...), each in asv's environment for that commit
(`fwdasv.analysis.remeasure`; a vLLM suite through the entry that names each kernel's op and
line, `fwdasv.backends.vllm_explain`), in runs of their own (`--profile-dir`, after the timed
replays), diffs the kernel summaries (`fwdasv.analysis.explain.kernel_diff`) and marks the rows whose
line is in a file the commit changed (`git diff --name-only`), with a link to its diff where
the project has a commit URL; `Timings` says what each part took. DEFAULT_ROUNDS 3: the
fewest processes a side whose spread is a noise band. `diff_files` diffs two kernels.json
files instead. `explain_record` is the diff as the verdicts file keeps it; `undecided_note`
says when confirm left the step undecided.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fwdasv.analysis import remeasure
from fwdasv.analysis.explain.kernel_diff import (
    DEFAULT_ROUNDS,
    Changes,
    KernelDiff,
    diff_rounds,
    diff_summaries,
    mark_changed,
    with_note,
)
from fwdasv.analysis.explain.kernel_diff_format import format_diff, headline, name_label
from fwdasv.analysis.findings.verdict_file import (
    VERDICTS_FILE,
    ExplainRecord,
    VerdictFileError,
    read_verdicts,
)
from fwdasv.analysis.rules.status import ReMeasureStatus
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.backends import backend_spec
from fwdasv.core.kernels import ProfileError, load_summary, profile_paths, safe_case_name

TOP_RECORDED = 10  # rows of the explain record a page shows


def diff_files(good: str | os.PathLike[str], bad: str | os.PathLike[str]) -> KernelDiff:
    """Load two kernels.json files (ProfileError naming a bad one) and diff them."""
    return diff_summaries(load_summary(good), load_summary(bad))


def explain_record(
    diff: KernelDiff,
    good: str,
    bad: str,
    profile_dir: str | os.PathLike[str],
    *,
    with_commits: bool = False,
) -> ExplainRecord:
    """The diff as the verdicts file keeps it: headline and 15-row table (commits shown by
    8 characters), the top contributors, the profiles; `with_commits`: GOOD and BAD too."""
    return ExplainRecord(
        headline=headline(diff, good[:8], bad[:8]),
        table=format_diff(diff, "table", top=15, good=good[:8], bad=bad[:8]),
        top5=diff.top5,
        explained_top5_pct=diff.explained_top5_pct,
        total_delta_us=diff.total_delta_us,
        profile_dir=str(Path(profile_dir)),
        commits=(good, bad) if with_commits else None,
        rows=record_rows(diff),
        change_link=diff.change_link,
    )


def record_rows(diff: KernelDiff) -> tuple[dict[str, object], ...]:
    """The rows that stand out, as a page shows them: the kernel (op) with its launching op,
    its source line and whether the commit changed that file."""
    rows = []
    for row in diff.stands_out[:TOP_RECORDED]:
        source = row.source
        rows.append(
            {
                "name": row.name,
                "label": name_label(row),
                "op": row.op,
                "change": row.change,
                "delta_us": row.delta_us,
                "share_pct": row.share_pct,
                "calls": [row.calls_before, row.calls_after],
                "source": None if source is None else source.label,
                "file": None if source is None else source.file,
                "line": None if source is None else source.line,
                "changed_here": row.changed_here,
            }
        )
    return tuple(rows)


@dataclass(frozen=True)
class Timings:
    """What each part of an explain took, in seconds: the profiled bench processes (installs
    apart), the eager passes inside them (the attribution forwards, summed over the
    processes, as each profile records it) and the diff."""

    processes: int
    runs_s: float
    installs_s: float
    eager_s: float
    diff_s: float

    @property
    def total_s(self) -> float:
        return self.runs_s + self.installs_s + self.diff_s

    @property
    def eager_pct(self) -> float:
        """The eager passes' share of the whole explain."""
        return 100 * self.eager_s / self.total_s if self.total_s > 0 else 0.0

    def line(self) -> str:
        return (
            f"time: profiled runs {self.runs_s:.1f} s ({self.processes} bench processes; "
            f"eager pass {self.eager_s:.1f} s of it, {self.eager_pct:.1f}% of explain), "
            f"installs {self.installs_s:.1f} s, diff {self.diff_s:.2f} s, "
            f"total {self.total_s:.1f} s"
        )

    def to_json(self) -> dict[str, float]:
        return {
            "processes": self.processes,
            "runs_s": round(self.runs_s, 2),
            "installs_s": round(self.installs_s, 2),
            "eager_s": round(self.eager_s, 2),
            "diff_s": round(self.diff_s, 3),
            "total_s": round(self.total_s, 2),
            "eager_pct": round(self.eager_pct, 2),
        }


def changed_lines(project: AsvProject, good: str, bad: str) -> Changes | None:
    """The lines GOOD..BAD changed (`git diff -U0` in the project's repository); None when
    git cannot say."""
    try:
        text = project.git("diff", "-U0", "--no-color", "--no-ext-diff", good, bad)
    except AsvError:
        return None
    return Changes.parse(text)


def change_link(project: AsvProject, good: str, bad: str) -> str | None:
    """The commit's diff on the project's site (asv's `show_commit_url`): BAD's page when GOOD
    is its parent, else a GitHub-style compare page where the URL is one; None without one."""
    url = project.raw.get("show_commit_url")
    if not isinstance(url, str) or not url:
        return None
    try:
        parent = project.git("rev-parse", "--verify", "--quiet", f"{bad}^")
    except AsvError:
        parent = ""
    stem = url.rstrip("/")
    if parent != good and stem.endswith("/commit"):
        return f"{stem.removesuffix('commit')}compare/{good}...{bad}"
    return f"{url}{bad}"


@dataclass(frozen=True)
class Explained:
    """A diff measured by fwdasv: which suite case, at which commits, where the profiles are,
    what each part took."""

    suite: str
    case: str
    good: str
    bad: str
    profile_dir: str
    diff: KernelDiff
    timings: Timings | None = None


def explain_commits(
    project: AsvProject,
    good: str,
    bad: str,
    bench: str,
    case: str | None,
    profile_dir: str | os.PathLike[str] | None = None,
    echo: Callable[[str], None] | None = None,
    bench_echo: Callable[[str], None] | None = None,
    rounds: int = DEFAULT_ROUNDS,
) -> Explained:
    """Profile one suite case at GOOD and at BAD, `rounds` bench processes each, interleaved
    (GOOD BAD GOOD BAD ...), each in asv's environment for that commit, and diff them.

    The profiled runs are runs of their own (the engine's or vLLM's
    `--profile-dir`, after the timed replays of that process); no tracked
    latency ever comes from them. Interleaving puts both commits in the same
    minutes of this machine, and the spread of each side's processes is the
    noise band each row's change is judged against (`diff_rounds`). When the
    verdicts file says confirm left this step undecided, the diff says the step
    is not established.
    """
    if rounds < 1:
        raise ProfileError(f"rounds must be at least 1, got {rounds}")
    target = remeasure.resolve(project, bench, case)
    entry = backend_spec(target.config.backend).explain_entry
    if entry is not None:
        # The bench with the eager pass that names each kernel's op and line (vLLM's).
        target = dataclasses.replace(target, config=dataclasses.replace(target.config, entry=entry))
    good_hash, bad_hash = remeasure.resolve_commits(project, good, bad)
    root = (
        Path(profile_dir)
        if profile_dir is not None
        else (
            project.results_dir.parent
            / ".fwdasv-explain"
            / f"{good_hash[:8]}-{bad_hash[:8]}-{target.suite}-{safe_case_name(target.case)}"
        )
    )
    measurer = remeasure.Remeasurer(project, target, root, echo=echo, bench_echo=bench_echo)
    paths: dict[str, list[Path]] = {"good": [], "bad": []}
    runs_s = 0.0
    for number in range(1, rounds + 1):
        for label, commit in (("good", good_hash), ("bad", bad_hash)):
            name = f"{label}-{commit[:8]}" + (f"-{number}" if rounds > 1 else "")
            directory = root / name
            if echo is not None:
                echo(
                    f"profiling {target.suite}({target.case}) at {label.upper()} {commit[:8]}"
                    + (f" ({number}/{rounds})" if rounds > 1 else "")
                )
            started = time.perf_counter()
            measurer.run(commit, name, extra=("--profile-dir", str(directory)))
            runs_s += time.perf_counter() - started
            paths[label].append(profile_paths(directory, target.case)[0])
    started = time.perf_counter()
    goods = [load_summary(path) for path in paths["good"]]
    bads = [load_summary(path) for path in paths["bad"]]
    diff = diff_rounds(goods, bads)
    changed = changed_lines(project, good_hash, bad_hash)
    if changed is not None:
        diff = mark_changed(diff, changed, change_link(project, good_hash, bad_hash))
    note = undecided_note(project, target.suite, target.case, good_hash, bad_hash)
    if note:
        diff = with_note(diff, note)
    timings = Timings(
        processes=measurer.runs,
        runs_s=runs_s - measurer.install_s,
        installs_s=measurer.install_s,
        eager_s=sum(s.attribution_s or 0.0 for s in (*goods, *bads)),
        diff_s=time.perf_counter() - started,
    )
    return Explained(target.suite, target.case, good_hash, bad_hash, str(root), diff, timings)


def undecided_note(project: AsvProject, suite: str, case: str, good: str, bad: str) -> str:
    """What to say when the newest confirmation of a step holding GOOD..BAD is undecided."""
    try:
        stored = read_verdicts(project.results_dir / VERDICTS_FILE)
    except (VerdictFileError, OSError):
        return ""
    newest = None
    for verdict in stored.by_finding.values():
        ident = verdict.ident
        if not ident.benchmark.startswith(suite) or ident.case != case:
            continue
        record = verdict.confirmation
        commits = {verdict.before_commit, *verdict.range_commits}
        if record is not None:
            commits |= {record.a_commit, record.b_commit}
        if bad not in commits and good not in commits:
            continue
        if newest is None or verdict.recorded_at >= newest.recorded_at:
            newest = verdict
    if newest is None or newest.confirmation is None:
        return ""
    record = newest.confirmation
    if record.figures.status != ReMeasureStatus.UNDECIDED:
        return ""
    return (
        f"the step is not established: confirm left {record.a_commit[:8]}..{record.b_commit[:8]} "
        f"undecided ({record.summary}); this diff says what runs differently, not that the "
        "step is real"
    )
