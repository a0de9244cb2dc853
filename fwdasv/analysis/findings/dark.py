"""The suites of a read that went dark: measured before, nothing at their newest commit.

`dark_suites` groups the judged series by machine, environment and suite and asks
`fwdasv.analysis.rules.dark.gone_dark` of each group; `dark_line` is the note under a
listing that names them. Why it matters, and what is not dark: the rule's module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fwdasv.analysis.findings.series import Series, SeriesKey
from fwdasv.analysis.rules.dark import gone_dark


@dataclass(frozen=True)
class DarkSuite:
    """A suite with no value in any case at its newest recorded commit (`commit`), measured
    last at `last_measured`."""

    machine: str
    env_name: str | None
    suite: str
    commit: str
    last_measured: str
    cases: int

    @property
    def ident(self) -> tuple[str, str | None, str, str]:
        """What stays the same while the suite stays dark: a night tells it once."""
        return (self.machine, self.env_name, self.suite, self.last_measured)

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def dark_suites(
    order: Sequence[str], all_series: Mapping[SeriesKey, Series], keys: Iterable[SeriesKey]
) -> tuple[DarkSuite, ...]:
    """The suites of `keys` (judged series of `all_series`, over `order`) gone dark."""
    groups: dict[tuple[str, str | None, str], list[Series]] = {}
    for key in keys:
        groups.setdefault((key.machine, key.env_name, key.suite), []).append(all_series[key])
    out = []
    for (machine, env_name, suite), members in sorted(groups.items(), key=lambda g: str(g[0])):
        dark = gone_dark(
            [
                [
                    values if environment is not None else None
                    for values, environment in zip(s.history, s.environments, strict=True)
                ]
                for s in members
            ]
        )
        if dark is not None:
            out.append(
                DarkSuite(
                    machine,
                    env_name,
                    suite,
                    order[dark.newest],
                    order[dark.last_measured],
                    len(members),
                )
            )
    return tuple(out)


def dark_line(dark: Sequence[DarkSuite]) -> str:
    """The note under a listing whose newest commits some suites did not measure."""
    named = "; ".join(
        f"{d.suite} on {d.machine} at {d.commit[:8]} (last measured at {d.last_measured[:8]}, "
        f"{d.cases} case{'' if d.cases == 1 else 's'})"
        for d in dark
    )
    return (
        f"Not measured at the newest commit, every case skipped or failed: {named}. A "
        "regression there would not show here; `asv run` says why (its `asv: skipped:`, "
        "failure and build lines): fix what it names (the suite's target, the build, a "
        "compiled vLLM base older than the commit's compiled code), or take a retired "
        "suite out of benchmarks/"
    )
