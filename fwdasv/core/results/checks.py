"""The checks vLLM's bench leaves to its wrapper: a case's verdicts and refusals.

Input: a case (`CheckedCase`: what `fwdasv.core.results.CaseResult` offers); output: one
`Verdict` per check. `refusals` are the failed checks that mean the forward computed
garbage, so no latency is recorded; `stable` only marks a point.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from fwdasv.core.results.blocks import TensorDiff
from fwdasv.core.stats import UNSTABLE_SPREAD_PCT, Latency


class CheckedRank(Protocol):
    """What the checks read of one rank's result."""

    @property
    def rank(self) -> int: ...
    @property
    def finite(self) -> bool: ...
    @property
    def graph_vs_eager(self) -> TensorDiff | None: ...
    @property
    def eager_repeat(self) -> TensorDiff | None: ...
    @property
    def graph_deterministic(self) -> bool | None: ...
    @property
    def pipeline_vs_eager(self) -> Mapping[str, TensorDiff]: ...


class CheckedCase(Protocol):
    """What the checks read of one case's result."""

    @property
    def error(self) -> str | None: ...
    @property
    def ranks(self) -> Sequence[CheckedRank]: ...
    @property
    def pipeline(self) -> bool: ...
    @property
    def latency(self) -> Latency: ...


# Graph (or pipeline) output against the eager reference. fwdasv's engine and
# vLLM's bench both give bitwise equality on a correct capture; a small
# tolerance admits kernels that legitimately reorder reductions.
DEFAULT_RELATIVE_RMS_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Verdict:
    """One validation check of a case: ok, failed, or not applicable (ok=None)."""

    check: str
    ok: bool | None
    detail: str

    @property
    def failed(self) -> bool:
        return self.ok is False


def verdicts(
    result: CheckedCase, tolerance: float = DEFAULT_RELATIVE_RMS_TOLERANCE
) -> list[Verdict]:
    """The checks vLLM's bench leaves to its wrapper, on every rank.

    finite output; graph (or pipeline) vs eager and the eager repeat within
    `tolerance` relative RMS (vLLM and fwdasv give exactly 0 on a correct
    capture; the tolerance admits kernels that reorder reductions); replays
    bitwise deterministic; sample spread at most 0.5% (over it the point is
    `unstable`, a warning rather than a failure).
    """
    if result.error is not None:
        return [Verdict("ran", False, result.error)]
    out: list[Verdict] = []
    bad = [r.rank for r in result.ranks if not r.finite]
    out.append(
        Verdict("finite", not bad, f"non-finite output on ranks {bad}" if bad else "all finite")
    )
    out.append(
        _within("graph_vs_eager", [(r.rank, r.graph_vs_eager) for r in result.ranks], tolerance)
    )
    out.append(_within("eager_repeat", [(r.rank, r.eager_repeat) for r in result.ranks], tolerance))
    pipeline = [(r.rank, c) for r in result.ranks for c in r.pipeline_vs_eager.values()]
    if result.pipeline:
        out.append(_within("pipeline_vs_eager", pipeline, tolerance))
    determinism = [r.graph_deterministic for r in result.ranks if r.graph_deterministic is not None]
    if determinism:
        bad = [r.rank for r in result.ranks if r.graph_deterministic is False]
        out.append(
            Verdict(
                "deterministic",
                not bad,
                f"replays differ on ranks {bad}" if bad else "replays bitwise equal",
            )
        )
    else:
        out.append(Verdict("deterministic", None, "not checked by this timer"))
    spread = result.latency.sample_spread_pct
    stable = not (spread > UNSTABLE_SPREAD_PCT) and math.isfinite(spread)
    out.append(
        Verdict(
            "stable",
            stable,
            f"sample spread {spread:.2f}% ({'<=' if stable else '>'} {UNSTABLE_SPREAD_PCT}%)",
        )
    )
    return out


# `stable` marks a point; the others refuse it.
REFUSING_CHECKS = (
    "ran",
    "finite",
    "graph_vs_eager",
    "eager_repeat",
    "pipeline_vs_eager",
    "deterministic",
)


def refusals(
    result: CheckedCase, tolerance: float = DEFAULT_RELATIVE_RMS_TOLERANCE
) -> list[Verdict]:
    """Failed checks that mean the forward computed garbage: no latency is recorded."""
    return [v for v in verdicts(result, tolerance) if v.failed and v.check in REFUSING_CHECKS]


def _within(
    check: str, values: Sequence[tuple[int, TensorDiff | None]], tolerance: float
) -> Verdict:
    present = [(rank, c) for rank, c in values if c is not None]
    if not present:
        return Verdict(check, None, "not measured")
    bad = [
        (rank, c)
        for rank, c in present
        if not (math.isfinite(c.relative_rms) and c.relative_rms <= tolerance)
    ]
    if bad:
        rank, worst = max(
            bad,
            key=lambda rc: rc[1].relative_rms if math.isfinite(rc[1].relative_rms) else math.inf,
        )
        return Verdict(
            check,
            False,
            f"rank {rank}: relative rms {worst.relative_rms:.3e} > {tolerance:.0e} (max abs {worst.max_abs:.3e})",
        )
    worst = max((c for _, c in present), key=lambda c: c.relative_rms)
    return Verdict(
        check,
        True,
        "bitwise equal" if worst.max_abs == 0 else f"relative rms {worst.relative_rms:.1e}",
    )
