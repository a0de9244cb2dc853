"""What fails CI, in one place: which statuses fail a check, and the exit status that says so.

A `Gate` is one small frozen value, as pytest-benchmark's `PercentageRegressionCheck`
is: the statuses that fail, and how verdicts become an exit status (2 when result files
could not be read, whatever else was found, as a step there is invisible, unless the
command skips them, or when a suite measured nothing at its newest commit; else 1 when
any fails; else 0). Every command that gates reads one
of these:

    FINDINGS         regressions, confirm, publish's count, nightly --no-confirm, the
                     demo: a regression or a confirmed one fails
    CONFIRMED_ONLY   nightly with confirmation: only a confirmed regression fails
    COMPARISON       compare and explain (two commits): worse, or newly failing

`strict` (`--fail-on-suspected`) adds `suspected`; an improvement never fails
(why: docs/verdicts.md, "The gate").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fwdasv.analysis.rules.status import CompareStatus, Status, StatusWord, TriageState
from fwdasv.core.errors import EXIT_FINDING, EXIT_OK, EXIT_UNREADABLE


@dataclass(frozen=True)
class Gate:
    """The statuses that fail a check (`failing`), named for help texts and reports."""

    name: str
    failing: frozenset[StatusWord]

    def __post_init__(self) -> None:
        wrong = [s for s in self.failing if not isinstance(s, StatusWord)]
        assert not wrong, f"gate {self.name}: not status words: {wrong}"

    def fails(self, status: str) -> bool:
        """Whether one verdict's status fails the check."""
        return status in self.failing

    def count(self, statuses: Iterable[str]) -> int:
        """How many of the verdicts fail the check."""
        return sum(1 for status in statuses if self.fails(status))

    def exit_status(self, statuses: Iterable[str], unreadable: int = 0, dark: int = 0) -> int:
        """EXIT_UNREADABLE (2) when `unreadable` result files could not be read or `dark`
        suites measured nothing at their newest commit (`rules.dark`), whatever the verdicts
        (a step at those commits is invisible, and one beside them can be misread); else
        EXIT_FINDING (1) when any verdict fails the check; else EXIT_OK (0)."""
        if unreadable or dark:
            return EXIT_UNREADABLE
        if any(self.fails(status) for status in statuses):
            return EXIT_FINDING
        return EXIT_OK

    def describe(self) -> str:
        """The failing statuses, in their group's order: `regression or confirmed`."""
        ordered = sorted(self.failing, key=lambda s: [*type(s).__members__.values()].index(s))
        return " or ".join(str(s) for s in ordered)


FINDINGS = Gate("findings", frozenset({Status.REGRESSION, Status.CONFIRMED}))
CONFIRMED_ONLY = Gate("confirmed-only", frozenset({Status.CONFIRMED}))
COMPARISON = Gate("comparison", frozenset({CompareStatus.WORSE, CompareStatus.FAILED}))


def inside_steps(
    unreadable_paths: Iterable[str], steps: Iterable[tuple[str, str, Iterable[str]]]
) -> list[tuple[str, str]]:
    """The unreadable result files whose commit lies inside a step's range, each with the
    step's label. `steps` holds (label, machine, the range's commit hashes after its old
    level); `unreadable_paths` are asv's `results/<machine>/<sha8>-<env>.json`. A step
    around such a file can be misread (its range spans the missing commit, a confirmation
    recorded for it no longer matches), so `--skip-unreadable` cannot pass these."""
    ranges = [(label, machine, {h[:8] for h in hashes}) for label, machine, hashes in steps]
    out: list[tuple[str, str]] = []
    for path in unreadable_paths:
        parts = path.replace("\\", "/").split("/")
        machine = parts[-2] if len(parts) > 1 else ""
        prefix = parts[-1].split("-", 1)[0]
        out.extend(
            (path, label)
            for label, where, commits in ranges
            if where == machine and prefix in commits
        )
    return out


def counts_tonight(triage: str | None, fail_on_open: bool = False) -> bool:
    """Whether a failing finding in that triage state fails the nightly gate: one nobody
    triaged (a regression first seen tonight is one) always; an acknowledged one (known,
    still open) only with `fail_on_open`; accepted, fixed-by or invalid never: they are
    listed, not counted."""
    if triage is None or triage == TriageState.OPEN:
        return True
    return fail_on_open and triage == TriageState.ACKNOWLEDGED


def strict(gate: Gate, fail_on_suspected: bool = True) -> Gate:
    """`gate`, with `suspected` failing too when `fail_on_suspected` (else `gate` itself)."""
    if not fail_on_suspected:
        return gate
    return Gate(f"{gate.name}+suspected", gate.failing | {Status.SUSPECTED})


def findings_gate(fail_on_suspected: bool = False) -> Gate:
    """The findings' gate: a regression or a confirmed one; suspected ones if asked."""
    return strict(FINDINGS, fail_on_suspected)


def nightly_gate(confirm: bool, fail_on_suspected: bool = False) -> Gate:
    """Nightly's gate: a confirmed regression when it re-measures, else any regression;
    suspected ones too if asked."""
    return strict(CONFIRMED_ONLY if confirm else FINDINGS, fail_on_suspected)


assert Status.IMPROVEMENT not in FINDINGS.failing | CONFIRMED_ONLY.failing, "improvements gate"
