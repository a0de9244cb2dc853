"""The forward-bench JSON: vLLM's `--output-json` schema, loaded, written, judged.

fwdasv's engine writes the same schema, so one parser serves both backends.
fwdasv adds what vLLM does not write, all optional for the parser: a case that
failed carries `"error"` (and no ranks); a case that ran carries `"refused"`
(the failed checks of `refusals`, empty when none) and `"unstable"` (sample
spread above `UNSTABLE_SPREAD_PCT`); each rank dict may carry the engine's
settings (`"engine"`) and the GPU's clocks, power and clock event reasons
while it ran (`"telemetry"`, see `Telemetry`). vLLM's bench never fails on bad
validation values; `verdicts` is where fwdasv refuses to record a latency for
a forward that computed garbage.

vLLM writes a non-finite number as a bare `NaN` (Python's `json.dump`), which
is not JSON; fwdasv writes `null` there (`dump`), and the parser reads a null
comparison as NaN, so such a case is still refused.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwdasv.core.cases import BenchRequest, CaseError
from fwdasv.core.errors import UserError
from fwdasv.core.files import write_atomic
from fwdasv.core.stats import UNSTABLE_SPREAD_PCT, Latency

# Graph (or pipeline) output against the eager reference. fwdasv's engine and
# vLLM's bench both give bitwise equality on a correct capture; a small
# tolerance admits kernels that legitimately reorder reductions.
DEFAULT_RELATIVE_RMS_TOLERANCE = 1e-3


class ResultsError(UserError, ValueError):
    """A forward-bench JSON file that is missing, truncated or malformed."""


@dataclass(frozen=True)
class TensorDiff:
    """`_compare(actual, expected)`: float32 difference of the first output tensor."""

    max_abs: float
    relative_rms: float

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorDiff:
        return cls(float(data["max_abs"]), float(data["relative_rms"]))

    @property
    def exact(self) -> bool:
        return self.max_abs == 0.0

    def to_json(self) -> dict[str, float]:
        return {"max_abs": self.max_abs, "relative_rms": self.relative_rms}


@dataclass(frozen=True)
class RankResult:
    """One global rank's dict of a case."""

    rank: int
    num_tokens: int
    latency: Latency
    finite: bool
    graph_vs_eager: TensorDiff | None
    eager_repeat: TensorDiff | None = None
    graph_deterministic: bool | None = None
    state_reset_bytes: int | None = None
    timing_scope: str | None = None
    pp_rank: int | None = None
    pipeline_vs_eager: dict[str, TensorDiff] = field(default_factory=dict)
    intermediate_graph_vs_eager: dict[str, TensorDiff] = field(default_factory=dict)
    clock_uncertainty_us: float | None = None
    telemetry: Telemetry | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_pipeline(self) -> bool:
        return self.pp_rank is not None


# A rank's telemetry summary: what `fwdasv.hw.telemetry.summarize` writes.
TELEMETRY_NUMBERS = (
    "readings",
    "sm_clock_min_mhz",
    "sm_clock_median_mhz",
    "sm_clock_max_mhz",
    "memory_clock_min_mhz",
    "memory_clock_median_mhz",
    "power_median_w",
    "power_max_w",
    "temperature_max_c",
    "power_capped_pct",
    "thermal_capped_pct",
)


@dataclass(frozen=True)
class Telemetry:
    """One GPU's state while a case ran, from NVML readings (None: not readable there).

    `readings` is how many readings the summary holds: one per sample block in
    fwdasv's engine, one per sampler tick around vLLM's bench. A reading is
    power (or thermally) capped when NVML's clock event reasons said so.
    """

    readings: int
    sm_clock_min_mhz: float | None = None
    sm_clock_median_mhz: float | None = None
    sm_clock_max_mhz: float | None = None
    memory_clock_min_mhz: float | None = None
    memory_clock_median_mhz: float | None = None
    power_median_w: float | None = None
    power_max_w: float | None = None
    temperature_max_c: float | None = None
    power_capped_pct: float | None = None
    thermal_capped_pct: float | None = None
    scope: str | None = None

    def worst(self, other: Telemetry) -> Telemetry:
        """The slower GPU's view of two ranks: lowest clocks, highest power and capping."""

        def pick(a: float | None, b: float | None, better) -> float | None:
            values = [v for v in (a, b) if v is not None]
            return better(values) if values else None

        return Telemetry(
            readings=self.readings + other.readings,
            sm_clock_min_mhz=pick(self.sm_clock_min_mhz, other.sm_clock_min_mhz, min),
            sm_clock_median_mhz=pick(self.sm_clock_median_mhz, other.sm_clock_median_mhz, min),
            sm_clock_max_mhz=pick(self.sm_clock_max_mhz, other.sm_clock_max_mhz, min),
            memory_clock_min_mhz=pick(self.memory_clock_min_mhz, other.memory_clock_min_mhz, min),
            memory_clock_median_mhz=pick(
                self.memory_clock_median_mhz, other.memory_clock_median_mhz, min
            ),
            power_median_w=pick(self.power_median_w, other.power_median_w, max),
            power_max_w=pick(self.power_max_w, other.power_max_w, max),
            temperature_max_c=pick(self.temperature_max_c, other.temperature_max_c, max),
            power_capped_pct=pick(self.power_capped_pct, other.power_capped_pct, max),
            thermal_capped_pct=pick(self.thermal_capped_pct, other.thermal_capped_pct, max),
            scope=self.scope or other.scope,
        )

    def line(self) -> str:
        """`SM 1605-1980 MHz (median 1755), 100% of blocks power-capped`, or what is known."""
        parts = []
        if self.sm_clock_min_mhz is not None and self.sm_clock_max_mhz is not None:
            parts.append(
                f"SM {self.sm_clock_min_mhz:.0f}-{self.sm_clock_max_mhz:.0f} MHz "
                f"(median {self.sm_clock_median_mhz:.0f})"
            )
        if self.power_capped_pct:
            parts.append(f"{self.power_capped_pct:.0f}% power-capped")
        if self.thermal_capped_pct:
            parts.append(f"{self.thermal_capped_pct:.0f}% thermally capped")
        return ", ".join(parts) or "no GPU telemetry"


@dataclass(frozen=True)
class Verdict:
    """One validation check of a case: ok, failed, or not applicable (ok=None)."""

    check: str
    ok: bool | None
    detail: str

    @property
    def failed(self) -> bool:
        return self.ok is False


@dataclass(frozen=True)
class CaseResult:
    case: str
    requests: tuple[BenchRequest, ...]
    median_us: float | None
    ranks: tuple[RankResult, ...]
    error: str | None = None
    # fwdasv's engine: the refusing checks that failed, as "check: detail" (see `refusals`).
    refused: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The case ran (it may still be refused: see `refused` and `refusals`)."""
        return self.error is None

    @property
    def unstable(self) -> bool:
        return bool(self.ranks) and not (self.latency.sample_spread_pct <= UNSTABLE_SPREAD_PCT)

    @property
    def telemetry(self) -> Telemetry | None:
        """The worst GPU's telemetry over the ranks (None without any)."""
        found = [r.telemetry for r in self.ranks if r.telemetry is not None]
        if not found:
            return None
        worst = found[0]
        for other in found[1:]:
            worst = worst.worst(other)
        return worst

    @property
    def latency(self) -> Latency:
        """Rank 0's latency: every replay is already the max over ranks."""
        if not self.ranks:
            raise ResultsError(f"case {self.case!r} has no ranks (error: {self.error})")
        return self.ranks[0].latency

    @property
    def num_tokens(self) -> int:
        return self.ranks[0].num_tokens if self.ranks else sum(r.query_len for r in self.requests)

    @property
    def pipeline(self) -> bool:
        return any(r.is_pipeline for r in self.ranks)

    @property
    def clock_uncertainty_us(self) -> float | None:
        values = [r.clock_uncertainty_us for r in self.ranks if r.clock_uncertainty_us is not None]
        return max(values) if values else None

    def worst_graph_vs_eager(self) -> TensorDiff | None:
        values = [r.graph_vs_eager for r in self.ranks if r.graph_vs_eager is not None]
        # A NaN comparison is the worst (max() with a NaN key depends on rank order).
        return (
            max(values, key=lambda c: (nan_as_worst(c.relative_rms), nan_as_worst(c.max_abs)))
            if values
            else None
        )

    def verdicts(self, tolerance: float = DEFAULT_RELATIVE_RMS_TOLERANCE) -> list[Verdict]:
        return verdicts(self, tolerance)

    def failures(self, tolerance: float = DEFAULT_RELATIVE_RMS_TOLERANCE) -> list[Verdict]:
        return [v for v in self.verdicts(tolerance) if v.failed]

    def line(self) -> str:
        """The one-line summary vLLM's bench prints per case."""
        if self.error is not None:
            return f"[forward] {self.case}: FAILED: {self.error}"
        if self.refused:
            return f"[forward] {self.case}: REFUSED (no latency recorded): " + "; ".join(
                self.refused
            )
        rank0 = self.ranks[0]
        latency = rank0.latency
        compare = rank0.graph_vs_eager
        tail = (
            f", graph vs eager rel rms {compare.relative_rms:.1e}"
            if compare is not None
            else f" ({latency.timer})"
        )
        return (
            f"[forward] {self.case}: {len(self.requests)} reqs, {rank0.num_tokens} tokens, "
            f"median {latency.median:.1f} us, sample spread {latency.sample_spread_pct:.2f}%" + tail
        )


def nan_as_worst(value: float) -> float:
    """Sort key of an error where NaN counts as worse than any number."""
    return math.inf if math.isnan(value) else value


def _require(data: dict[str, Any], key: str, where: str) -> Any:
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: expected an object, got {type(data).__name__}")
    if key not in data:
        raise ResultsError(f"{where}: missing key {key!r}")
    return data[key]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(data: dict[str, Any], key: str, where: str) -> float:
    value = _require(data, key, where)
    if not _is_number(value):
        raise ResultsError(f"{where}: {key!r} must be a number, got {value!r}")
    return float(value)


def _integer(data: dict[str, Any], key: str, where: str) -> int:
    value = _require(data, key, where)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ResultsError(f"{where}: {key!r} must be an integer, got {value!r}")
    return value


def _optional(data: dict[str, Any], key: str, where: str, check, expected: str) -> Any:
    value = data.get(key)
    if value is not None and not check(value):
        raise ResultsError(f"{where}: {key!r} must be {expected} or null, got {value!r}")
    return value


def _measured(data: dict[str, Any], key: str, where: str) -> float:
    """A number, or null for a non-finite one (fwdasv writes NaN as null): NaN."""
    if _require(data, key, where) is None:
        return math.nan
    return _number(data, key, where)


def _tensor_diff(data: Any, where: str) -> TensorDiff:
    return TensorDiff(_measured(data, "max_abs", where), _measured(data, "relative_rms", where))


def _telemetry(data: Any, where: str) -> Telemetry | None:
    if data is None:
        return None
    summary = _require(data, "summary", where)
    if summary is None:
        return None
    where = f"{where}.summary"
    values = {}
    for key in TELEMETRY_NUMBERS:
        value = _optional(summary, key, where, _is_number, "a number")
        values[key] = value
    if values["readings"] is None:
        raise ResultsError(f"{where}: missing key 'readings'")
    scope = data.get("scope")
    return Telemetry(
        **{k: (int(v) if k == "readings" else v) for k, v in values.items()},
        scope=scope if isinstance(scope, str) else None,
    )


def _tensor_diffs(data: Any, where: str) -> dict[str, TensorDiff]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ResultsError(f"{where}: expected an object of comparisons")
    return {name: _tensor_diff(value, f"{where}.{name}") for name, value in data.items()}


def _latency(data: Any, where: str) -> Latency:
    timer = _require(data, "timer", where)
    if not isinstance(timer, str):
        raise ResultsError(f"{where}: 'timer' must be a string, got {timer!r}")
    values = {
        key: _number(data, key, where)
        for key in ("median", "sample_spread_pct", "mean", "std", "min", "p90")
    }
    samples = data.get("samples_us", [])
    if not isinstance(samples, list) or not all(_is_number(t) for t in samples):
        raise ResultsError(f"{where}: 'samples_us' must be a list of numbers")
    return Latency(
        timer=timer,
        count=_integer(data, "count", where),
        samples_us=tuple(float(t) for t in samples),
        **values,
    )


def parse_rank(data: dict[str, Any], rank: int, where: str) -> RankResult:
    latency = _latency(_require(data, "latency_us", where), f"{where}.latency_us")
    finite = _require(data, "finite", where)
    if not isinstance(finite, bool):
        raise ResultsError(f"{where}: 'finite' must be true or false, got {finite!r}")
    graph_vs_eager = data.get("graph_vs_eager")
    eager_repeat = data.get("eager_repeat")
    return RankResult(
        rank=rank,
        num_tokens=_integer(data, "num_tokens", where),
        latency=latency,
        finite=finite,
        graph_vs_eager=None
        if graph_vs_eager is None
        else _tensor_diff(graph_vs_eager, f"{where}.graph_vs_eager"),
        eager_repeat=None
        if eager_repeat is None
        else _tensor_diff(eager_repeat, f"{where}.eager_repeat"),
        graph_deterministic=_optional(
            data, "graph_deterministic", where, lambda v: isinstance(v, bool), "true/false"
        ),
        state_reset_bytes=data.get("state_reset_bytes"),
        timing_scope=data.get("timing_scope"),
        pp_rank=_optional(
            data,
            "pp_rank",
            where,
            lambda v: isinstance(v, int) and not isinstance(v, bool),
            "an integer",
        ),
        pipeline_vs_eager=_tensor_diffs(
            data.get("pipeline_vs_eager"), f"{where}.pipeline_vs_eager"
        ),
        intermediate_graph_vs_eager=_tensor_diffs(
            data.get("intermediate_graph_vs_eager"), f"{where}.intermediate_graph_vs_eager"
        ),
        clock_uncertainty_us=_optional(data, "clock_uncertainty_us", where, _is_number, "a number"),
        telemetry=_telemetry(data.get("telemetry"), f"{where}.telemetry"),
        raw=data,
    )


def parse_case_result(data: dict[str, Any], where: str) -> CaseResult:
    name = _require(data, "case", where)
    where = f"{where} (case {name!r})"
    raw_requests = _require(data, "requests", where)
    try:
        requests = tuple(BenchRequest(**r) for r in raw_requests)
    except (TypeError, CaseError) as error:
        raise ResultsError(f"{where}: bad request entry: {error}") from None
    error = data.get("error")
    if error is not None:
        return CaseResult(name, requests, None, (), error=str(error))
    ranks = _require(data, "ranks", where)
    if not isinstance(ranks, list) or not ranks:
        raise ResultsError(f"{where}: 'ranks' must be a non-empty list")
    refused = data.get("refused") or []
    if not isinstance(refused, list) or not all(isinstance(r, str) for r in refused):
        raise ResultsError(f"{where}: 'refused' must be a list of strings")
    return CaseResult(
        case=name,
        requests=requests,
        median_us=_number(data, "median_us", where),
        ranks=tuple(parse_rank(r, i, f"{where}.ranks[{i}]") for i, r in enumerate(ranks)),
        refused=tuple(refused),
    )


def parse(data: Any, source: str = "<results>") -> list[CaseResult]:
    if not isinstance(data, list):
        raise ResultsError(
            f"{source}: expected a JSON array of cases (vLLM's --output-json), got {type(data).__name__}"
        )
    return [parse_case_result(entry, f"{source}[{i}]") for i, entry in enumerate(data)]


def load(path: str | os.PathLike[str]) -> list[CaseResult]:
    """Read a forward-bench JSON file (vLLM's or fwdasv's engine's)."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ResultsError(
            f"{path}: no results file (the bench exited before writing it; see its log)"
        ) from None
    if not text.strip():
        raise ResultsError(f"{path}: the results file is empty (the bench was interrupted?)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ResultsError(
            f"{path}: not valid JSON ({error}); the file is truncated or corrupt"
        ) from None
    return parse(data, str(path))


def by_case(results: Iterable[CaseResult]) -> dict[str, CaseResult]:
    return {r.case: r for r in results}


# --- writing ----------------------------------------------------------------------


def dump(
    entries: Sequence[dict[str, Any]],
    path: str | os.PathLike[str],
    *,
    make_parents: bool = True,
    what: str = "results file",
) -> None:
    """Write case entries as vLLM does (`json.dump(results, f, indent=2)`), atomically,
    except that a non-finite number is written as null: the file is valid JSON."""
    text = json.dumps(finite_json(list(entries)), indent=2, allow_nan=False) + "\n"
    write_atomic(path, text, make_parents=make_parents, what=what)


def finite_json(value: Any) -> Any:
    """`value` with every NaN or infinity (in dicts, lists, tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def judge_entry(
    entry: dict[str, Any], tolerance: float = DEFAULT_RELATIVE_RMS_TOLERANCE
) -> CaseResult:
    """Add fwdasv's verdict fields to a case entry that ran: `refused`, `unstable`.

    The rule is the asv suites' (`refusals`): a non-finite output, a graph (or
    pipeline) output that differs from eager, or replays that differ refuse
    the case; a sample spread above 0.5% marks it unstable. Returns the parsed
    result with the fields set.
    """
    if entry.get("error") is None:
        parsed = parse_case_result(entry, entry["case"])
        entry["refused"] = [f"{v.check}: {v.detail}" for v in refusals(parsed, tolerance)]
        entry["unstable"] = parsed.unstable
    return parse_case_result(entry, entry["case"])


def case_entry(
    case_name: str, requests: Sequence[BenchRequest], ranks: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "case": case_name,
        "requests": [r.to_json() for r in requests],
        "median_us": ranks[0]["latency_us"]["median"],
        "ranks": list(ranks),
    }


def error_entry(case_name: str, requests: Sequence[BenchRequest], error: str) -> dict[str, Any]:
    return {
        "case": case_name,
        "requests": [r.to_json() for r in requests],
        "median_us": None,
        "error": error,
        "ranks": [],
    }


# --- verdicts ---------------------------------------------------------------------


def verdicts(
    result: CaseResult, tolerance: float = DEFAULT_RELATIVE_RMS_TOLERANCE
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
    result: CaseResult, tolerance: float = DEFAULT_RELATIVE_RMS_TOLERANCE
) -> list[Verdict]:
    """Failed checks that mean the forward computed garbage: no latency is recorded."""
    return [v for v in verdicts(result, tolerance) if v.failed and v.check in REFUSING_CHECKS]


def _within(check: str, values: list[tuple[int, TensorDiff | None]], tolerance: float) -> Verdict:
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
