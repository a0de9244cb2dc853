"""`fwdasv explain`'s measuring: one suite case profiled at GOOD and at BAD, then diffed.

`explain_commits` profiles the case `rounds` bench processes a commit, interleaved
(GOOD BAD GOOD BAD ...), each in asv's environment for that commit
(`fwdasv.analysis.remeasure`), in runs of their own (`--profile-dir`, after the timed
replays: no tracked latency comes from them), and diffs the kernel summaries
(`fwdasv.analysis.kernel_diff`). DEFAULT_ROUNDS 3: the fewest processes a side whose
spread is a noise band. `diff_files` diffs two kernels.json files instead (one a side).
`explain_record` is the diff as the verdicts file keeps it; `undecided_note` says when
confirm left the step undecided.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fwdasv.analysis.kernel_diff import (
    DEFAULT_ROUNDS,
    KernelDiff,
    diff_rounds,
    diff_summaries,
    with_note,
)
from fwdasv.analysis.kernel_diff_format import format_diff, headline
from fwdasv.analysis.status import Status
from fwdasv.analysis.verdict_file import ExplainRecord
from fwdasv.asv.project import AsvProject
from fwdasv.core.kernels import ProfileError, load_summary, profile_paths, safe_case_name


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
    )


@dataclass(frozen=True)
class Explained:
    """A diff measured by fwdasv: which suite case, at which commits, where the profiles are."""

    suite: str
    case: str
    good: str
    bad: str
    profile_dir: str
    diff: KernelDiff


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
    from fwdasv.analysis.remeasure import Remeasurer, resolve, resolve_commits

    if rounds < 1:
        raise ProfileError(f"rounds must be at least 1, got {rounds}")
    target = resolve(project, bench, case)
    good_hash, bad_hash = resolve_commits(project, good, bad)
    root = (
        Path(profile_dir)
        if profile_dir is not None
        else (
            project.results_dir.parent
            / ".fwdasv-explain"
            / f"{good_hash[:8]}-{bad_hash[:8]}-{target.suite}-{safe_case_name(target.case)}"
        )
    )
    measurer = Remeasurer(project, target, root, echo=echo, bench_echo=bench_echo)
    paths: dict[str, list[Path]] = {"good": [], "bad": []}
    for number in range(1, rounds + 1):
        for label, commit in (("good", good_hash), ("bad", bad_hash)):
            name = f"{label}-{commit[:8]}" + (f"-{number}" if rounds > 1 else "")
            directory = root / name
            if echo is not None:
                echo(
                    f"profiling {target.suite}({target.case}) at {label.upper()} {commit[:8]}"
                    + (f" ({number}/{rounds})" if rounds > 1 else "")
                )
            measurer.run(commit, name, extra=("--profile-dir", str(directory)))
            paths[label].append(profile_paths(directory, target.case)[0])
    diff = diff_rounds(
        [load_summary(path) for path in paths["good"]],
        [load_summary(path) for path in paths["bad"]],
    )
    note = undecided_note(project, target.suite, target.case, good_hash, bad_hash)
    if note:
        diff = with_note(diff, note)
    return Explained(target.suite, target.case, good_hash, bad_hash, str(root), diff)


def undecided_note(project: AsvProject, suite: str, case: str, good: str, bad: str) -> str:
    """What to say when the newest confirmation of a step holding GOOD..BAD is undecided."""
    from fwdasv.analysis.verdict_file import VERDICTS_FILE, VerdictFileError, read_verdicts

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
    if record.figures.status != Status.UNDECIDED:
        return ""
    return (
        f"the step is not established: confirm left {record.a_commit[:8]}..{record.b_commit[:8]} "
        f"undecided ({record.summary}); this diff says what runs differently, not that the "
        "step is real"
    )
