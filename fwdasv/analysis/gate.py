"""What fails CI, in one place: which statuses fail a check, and the exit status that says so.

A `Gate` is one small frozen value, as pytest-benchmark's
`PercentageRegressionCheck` is: the set of statuses that fail, and how a
list of verdicts becomes an exit status (1 when any of them fails, else 0).
Every command that gates reads one of the gates below; none maps statuses
to exit statuses itself.

    FINDINGS         regressions, confirm, publish's count, nightly --no-confirm,
                     the demo's "something to confirm": a regression (detected, not
                     yet re-measured) or a confirmed one fails; suspected,
                     not-reproduced, drift and improvement do not
    CONFIRMED_ONLY   nightly with confirmation: only a confirmed regression fails
                     (an unconfirmed one was re-measured and left undecided)
    COMPARISON       compare and explain (two commits): worse, or newly failing

`suspected` (a step at the history's edge that one or a few commits show and
that could still be outliers) does not fail by default: one slow commit at the
head of a history is a few % of nights, and `nightly` and `regressions
--confirm` re-measure a suspected finding the night it appears, so it fails
as `confirmed` when it is real. `strict` (the commands' `--fail-on-suspected`)
adds it to a gate's failing set. An improvement never fails any gate.

Results that cannot be read fail every gate too: a step at an unreadable commit
is invisible, so `exit_status(..., unreadable=n)` is EXIT_UNREADABLE (2) when
no verdict fails but n files could not be read (unless the user passed
`--skip-unreadable`, and the command then passes 0). A missing result (a commit
never built) is not unreadable.

To extend a rule, add the status to the gate's `failing` set; a new kind of failure is a
new argument with its default, read by `exit_status`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fwdasv.analysis.status import Status
from fwdasv.core.errors import EXIT_FINDING, EXIT_OK, EXIT_UNREADABLE


@dataclass(frozen=True)
class Gate:
    """The statuses that fail a check (`failing`), named for help texts and reports."""

    name: str
    failing: frozenset[Status]

    def __post_init__(self) -> None:
        wrong = [s for s in self.failing if not isinstance(s, Status)]
        assert not wrong, f"gate {self.name}: not status words: {wrong}"

    def fails(self, status: str) -> bool:
        """Whether one verdict's status fails the check."""
        return status in self.failing

    def count(self, statuses: Iterable[str]) -> int:
        """How many of the verdicts fail the check."""
        return sum(1 for status in statuses if self.fails(status))

    def exit_status(self, statuses: Iterable[str], unreadable: int = 0) -> int:
        """EXIT_FINDING (1) when any verdict fails the check, else EXIT_UNREADABLE (2) when
        `unreadable` result files could not be read, else EXIT_OK (0)."""
        if any(self.fails(status) for status in statuses):
            return EXIT_FINDING
        return EXIT_UNREADABLE if unreadable else EXIT_OK

    def describe(self) -> str:
        """The failing statuses, in `Status` order: `regression or confirmed`."""
        return " or ".join(str(s) for s in Status if s in self.failing)


FINDINGS = Gate("findings", frozenset({Status.REGRESSION, Status.CONFIRMED}))
CONFIRMED_ONLY = Gate("confirmed-only", frozenset({Status.CONFIRMED}))
COMPARISON = Gate("comparison", frozenset({Status.WORSE, Status.FAILED}))


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
