"""`fwdasv compare`'s I/O edge: two commits' stored asv results, loaded and compared.

`compare_commits(project, a, b)` resolves A and B through git (a bare hash prefix
when git cannot), reads their records with samples from the results directory (one
machine; an unreadable result file that may hold them is an error, never "no
results"), estimates each series' noise from its whole history (`series_noise`) and
the samples per bench process of each fwdasv suite (`remeasure.process_sizes`), and returns
`fwdasv.analysis.compare.compare.pair`'s comparisons, each with the stored history's findings
between A and B in its series (`attach_findings`: one verdict per pair, as
`fwdasv regressions` gives it). A commit with no stored result takes the bench processes
bisect or confirm kept of it (`fwdasv.analysis.compare.kept`), marked as a re-measure. A
`CompareError` names what the user can fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from fwdasv.analysis.compare.compare import METHODS, NOISE, Comparison, PairFinding, SeriesId, pair
from fwdasv.analysis.compare.kept import kept_processes, kept_records, series_templates
from fwdasv.analysis.findings.findings import scan
from fwdasv.analysis.findings.series import load_series
from fwdasv.analysis.remeasure import process_sizes
from fwdasv.analysis.rules.judgment import DEFAULT_ALPHA, check_rule
from fwdasv.analysis.rules.noise import Noise, estimate_noise
from fwdasv.asv.commit_filter import CommitFilter
from fwdasv.asv.history import History, Record
from fwdasv.asv.project import AsvError, AsvProject
from fwdasv.core.clitools import refuse_unmatched_bench
from fwdasv.core.errors import UserError

_HEX = re.compile(r"^[0-9a-fA-F]{4,40}$")


class CompareError(UserError):
    """The commits cannot be resolved or have no stored results."""


def default_factor(project: AsvProject) -> float:
    """The floor `--factor` defaults to: the configuration's min_effect_pct as a ratio."""
    return project.verdict_settings().min_effect_factor


def resolve_commit(project: AsvProject, rev: str) -> str:
    """A full hash through git in the asv repository; a bare hash prefix when git cannot."""
    try:
        return project.resolve(rev)
    except AsvError as error:
        if _HEX.match(rev):
            return rev.lower()
        raise CompareError(str(error)) from None


def _in_repo(project: AsvProject, rev: str) -> bool | None:
    """Whether git knows `rev`; None when the repository is not on disk to ask."""
    repo = project.local_repo
    if repo is None or not repo.is_dir():
        return None
    try:
        project.resolve(rev)
    except AsvError:
        return False
    return True


def load_records(
    project: AsvProject,
    commits: Sequence[str],
    machine: str | None = None,
    bench: Sequence[str] = (),
    warn: Callable[[str], None] | None = None,
) -> dict[str, list[Record]]:
    """History records (with samples) of each commit (full hash or prefix), by commit; a
    `bench` that keeps no benchmark of benchmarks.json is a CompareError, a regex of it that
    keeps none while another does a line to `warn`."""
    history = History(
        project.results_dir,
        machines=[machine] if machine else (),
        bench=list(bench),
        commits=CommitFilter(frozenset(commits)),
        samples=True,
    )
    # A regex of nothing would read as "no stored results" for commits that have them.
    where = f"in {history.results_dir / 'benchmarks.json'}"
    idle = refuse_unmatched_bench(history.bench, history.benchmark_names(), where, CompareError)
    for line in idle:
        if warn is not None:
            warn(line)
    by_commit: dict[str, list[Record]] = {c: [] for c in commits}
    files = history.files()
    for record in history.records(files):
        for commit in commits:
            if record.commit_hash.startswith(commit.lower()):
                by_commit[commit].append(record)
    # A result file that may hold one of the commits and cannot be read would
    # otherwise read as "no stored results", or silently drop its results.
    names = {str(f.path) for f in files}
    unreadable = [p for p in history.report.problems if p.path in names]
    if unreadable:
        more = f" (and {len(unreadable) - 1} more)" if len(unreadable) > 1 else ""
        raise CompareError(
            f"result file {unreadable[0].line()}{more}; fix or remove it (or run `asv run` "
            "for that commit again), then compare"
        )
    return by_commit


def compare_commits(
    project: AsvProject,
    a: str,
    b: str,
    machine: str | None = None,
    *,
    factor: float | None = None,
    alpha: float = DEFAULT_ALPHA,
    bench: Sequence[str] = (),
    method: str = NOISE,
    warn: Callable[[str], None] | None = None,
) -> list[Comparison]:
    """Compare commit `a` (before) with `b` (after) on `project`'s stored results.

    `method` "noise" judges each series by its run-to-run noise, estimated from
    its whole stored history (`fwdasv.analysis.rules.noise`); "mann-whitney" is asv's rule.
    `factor` None: `default_factor(project)`.
    """
    if factor is None:
        factor = default_factor(project)
    check_rule(factor, alpha)
    if method not in METHODS:
        raise CompareError(f"--method {method!r}: one of {', '.join(METHODS)}")
    hash_a, hash_b = resolve_commit(project, a), resolve_commit(project, b)
    records = load_records(project, [hash_a, hash_b], machine, bench, warn)
    remeasured = _fill_from_kept(project, records, machine, bench)
    machines = sorted({r.machine for rs in records.values() for r in rs})
    if machine is None and len(machines) > 1:
        raise CompareError(
            f"results for several machines ({', '.join(machines)}): pick one with --machine"
        )
    for rev, commit in ((a, hash_a), (b, hash_b)):
        if not records[commit]:
            if _in_repo(project, rev) is False:
                raise CompareError(
                    f"{rev!r} is not a commit of {project.local_repo}, and no stored result "
                    "has that hash: give a commit (hash, branch or tag) of the benchmarked "
                    "repository"
                )
            where = f" on machine {machine}" if machine else ""
            filtered = " matching --bench" if bench else ""
            raise CompareError(
                f"no stored results{filtered} for {rev} ({commit[:8]}){where} in "
                f"{project.results_dir}, nor bench processes bisect or confirm kept: run "
                "`asv run` for it first"
            )
        hashes = {r.commit_hash for r in records[commit]}
        if len(hashes) > 1:
            raise CompareError(
                f"{rev} matches results of several commits ({', '.join(sorted(hashes))}): "
                "give more of the hash"
            )
    noises = series_noise(project, machine) if method == NOISE else None
    sizes = process_sizes(project, {r.benchmark for rs in records.values() for r in rs})
    compared = pair(records[hash_a], records[hash_b], factor, alpha, noises, sizes, remeasured)
    a_full = next(iter({r.commit_hash for r in records[hash_a]}))
    b_full = next(iter({r.commit_hash for r in records[hash_b]}))
    return attach_findings(project, compared, a_full, b_full, machine)


def _fill_from_kept(
    project: AsvProject,
    records: dict[str, list[Record]],
    machine: str | None,
    bench: Sequence[str],
) -> frozenset[str]:
    """A commit without stored results takes the bench processes bisect or confirm kept
    of it (`compare.kept`), shaped as its series' stored records; the commits that did."""
    filled = set()
    for commit, found in records.items():
        if found:
            continue
        kept = kept_processes(project, commit, machine)
        if not kept.values:
            continue
        known = [r for rs in records.values() for r in rs]
        names = {f"{r.benchmark}({r.case})" if r.case else r.benchmark for r in known}
        unknown = sorted(set(kept.values) - names)
        templates = known + (series_templates(project, unknown, machine, bench) if unknown else [])
        records[commit] = kept_records(kept, templates)
        if records[commit]:
            filled.add(kept.commit)
    return frozenset(filled)


def attach_findings(
    project: AsvProject,
    comparisons: Sequence[Comparison],
    a: str,
    b: str,
    machine: str | None = None,
) -> list[Comparison]:
    """`comparisons` of A -> B (full hashes), each with the findings `fwdasv regressions`
    gives (stored verdicts applied, improvements too) in its series whose pair lies
    between A and B in the history's commit order: the last old commit at or after A,
    the first new one at or before B."""
    order, _ = load_series(project, machine)
    where = {commit: i for i, commit in enumerate(order)}
    if a not in where or b not in where or where[a] >= where[b]:
        return list(comparisons)
    low, high = where[a], where[b]
    found = scan(project, machine=machine, improvements=True, subjects=False).findings
    by_series: dict[SeriesId, list[PairFinding]] = {}
    for f in found:
        before, after = where.get(f.before_commit), where.get(f.after_commit)
        if before is None or after is None or not (low <= before and after <= high):
            continue
        stored = f.confirmation_record
        k = f.key
        by_series.setdefault((k.machine, k.env_name, k.benchmark, k.case), []).append(
            PairFinding(
                status=f.status,
                percent=f.percent,
                before_commit=f.before_commit,
                after_commit=f.after_commit,
                gating=f.gating,
                confirmation=None if stored is None else stored.summary,
            )
        )
    out = []
    for c in comparisons:
        mine = by_series.get((c.machine, c.env_name, c.benchmark, c.case), [])
        out.append(replace(c, findings=tuple(mine)) if mine else c)
    return out


def series_noise(project: AsvProject, machine: str | None = None) -> dict[SeriesId, Noise]:
    """Each series' noise from its whole stored history."""
    _, series = load_series(project, machine)
    return {
        (k.machine, k.env_name, k.benchmark, k.case): estimate_noise(s.history)
        for k, s in series.items()
    }
