"""A step at commits that change no file the benchmark imports: never a `regression` on a CPU
until confirm decides.

On a shared CPU box a loaded stretch of the history can pass every rule of the history
(seen: +57% to +74% `regression`s at commits that touch no forward code). What the bench
imported is recorded beside the results (`fwdasv.engine.imports` names the modules of the
code under test; `fwdasv.asv.ranenv` keeps them per commit and suite). `reaching` keeps the
changed files that can reach the forward: a Python file whose module the bench imported
(`pkg/mod.py` is `pkg.mod`, also under a `src/`-like directory), and any other file that is
not documentation (a build file, data, C sources: they may). `hold_back` makes a host-timed
`regression` whose range reaches nothing `suspected` (NOTE); the A/B re-measure decides it.
GPU series are left as they are, and so is every series without a record of its imports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from fwdasv.analysis.rules.status import Status, finding_status
from fwdasv.asv.project import AsvError
from fwdasv.asv.ranenv import load_records

if TYPE_CHECKING:
    from fwdasv.analysis.findings.finding import Finding
    from fwdasv.asv.project import AsvProject
    from fwdasv.asv.ranenv import RanRecord

NOTE = "changes nothing the bench imports"
# Files no forward reads: documentation, images, licences, git's own files.
INERT_SUFFIXES = frozenset({".md", ".rst", ".txt", ".png", ".jpg", ".jpeg", ".gif", ".svg"})
INERT_NAMES = frozenset(
    {"LICENSE", "LICENCE", "COPYING", "AUTHORS", ".gitignore", ".gitattributes"}
)
# Python files that build or install the package: a change there may change what runs.
BUILD_FILES = frozenset({"setup.py", "conftest.py"})


def module_of(path: str) -> str | None:
    """The dotted module a repository path is (`tinylm/model.py` -> `tinylm.model`, a
    package's `__init__.py` -> the package); None for a file that is not Python."""
    parts = PurePosixPath(path)
    if parts.suffix != ".py":
        return None
    names = list(parts.with_suffix("").parts)
    if names[-1] == "__init__" and len(names) > 1:
        names.pop()
    return ".".join(names)


def _reaches(path: str, imported: Collection[str]) -> bool:
    name = PurePosixPath(path).name
    module = module_of(path)
    if module is None:
        return not (PurePosixPath(path).suffix.lower() in INERT_SUFFIXES or name in INERT_NAMES)
    if name in BUILD_FILES:
        return True
    # A directory put on the import path (`src/`) prefixes the dotted path.
    return any(module == m or module.endswith("." + m) for m in imported)


def reaching(changed: Iterable[str], imported: Collection[str]) -> list[str]:
    """The changed files (repository paths) that can reach a forward that imported
    `imported` (module names)."""
    return [path for path in changed if _reaches(path, imported)]


def hold_back(finding: Finding, changed: Sequence[str], imported: Collection[str]) -> Finding:
    """`finding` as `suspected` (NOTE) when it is a `regression` whose range's changed files
    reach none of `imported`; else unchanged. Pure: the caller knows it is host-timed."""
    if finding.status != Status.REGRESSION or reaching(changed, imported):
        return finding
    return dataclasses.replace(
        finding, status=finding_status(finding.status, untouched=True), note=NOTE
    )


def _imports(records: Sequence[RanRecord], finding: Finding) -> tuple[str, ...] | None:
    """What the finding's suite imported at its two commits, when both were recorded on the
    host timer; None otherwise (nothing can be told)."""
    key = finding.key
    found: set[str] = set()
    for commit in (finding.before_commit, finding.after_commit):
        mine = [
            r
            for r in records
            if (r.commit, r.env_name, r.suite) == (commit, key.env_name, key.suite)
        ]
        if not mine or any(
            r.imported is None or not (r.timer or "").startswith("host") for r in mine
        ):
            return None
        found.update(name for r in mine for name in r.imported or ())
    return tuple(sorted(found))


def hold_back_untouched(project: AsvProject, found: Sequence[Finding]) -> list[Finding]:
    """Each `regression` of `found` timed on the host whose range (git's diff of its two
    commits) changes no file its bench imported, as `suspected`; the rest as they are."""
    if project.local_repo is None or not any(f.status == Status.REGRESSION for f in found):
        return list(found)
    records = load_records(project.results_dir)
    changed: dict[tuple[str, str], list[str] | None] = {}
    out = []
    for finding in found:
        imported = _imports(records, finding) if finding.status == Status.REGRESSION else None
        if imported is None:
            out.append(finding)
            continue
        span = finding.commit_range()
        if span not in changed:
            try:
                changed[span] = project.git("diff", "--name-only", *span).splitlines()
            except AsvError:
                changed[span] = None
        paths = changed[span]
        out.append(finding if paths is None else hold_back(finding, paths, imported))
    return out
