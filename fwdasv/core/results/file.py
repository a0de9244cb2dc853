"""A bench run's results: every rank of every case, read from and written to the file."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fwdasv.core.cases import BenchRequest, CaseError
from fwdasv.core.files import write_atomic
from fwdasv.core.numbers import finite_json, nan_as_worst
from fwdasv.core.results.blocks import (
    EngineInfo,
    PipelineTimeline,
    ProfileBlock,
    ProtocolRun,
    ReferenceRun,
    Telemetry,
    TensorDiff,
    diffs_json,
    parse_diffs,
    parse_latency,
    unavailable_telemetry_json,
)
from fwdasv.core.results.checks import DEFAULT_RELATIVE_RMS_TOLERANCE, Verdict, refusals, verdicts
from fwdasv.core.results.reading import (
    ResultsError,
    T,
    integer,
    json_object,
    number,
    optional,
    optional_int,
    optional_number,
    optional_str,
    require,
)
from fwdasv.core.stats import UNSTABLE_SPREAD_PCT, Latency

# --- a rank -------------------------------------------------------------------------------

# The orders fwdasv's engine writes a rank's keys in: single-stage, pipeline. A key
# of `_WRITTEN_WHEN_SET` is left out when unset; the others are always written (null
# when not measured, as vLLM writes them). A value read from a file keeps that
# file's keys and order (`RankResult.layout`) instead.
_ENGINE_LAYOUT = (
    "num_tokens",
    "timing_scope",
    "eager_repeat",
    "graph_vs_eager",
    "graph_deterministic",
    "finite",
    "latency_us",
    "state_reset_bytes",
    "protocol",
    "reference",
    "telemetry",
    "engine",
    "profile",
)
_PIPELINE_LAYOUT = (
    "num_tokens",
    "pp_rank",
    "timing_scope",
    "graph_vs_eager",
    "intermediate_graph_vs_eager",
    "state_reset_bytes",
    "pipeline_vs_eager",
    "finite",
    "engine",
    "pipeline_timeline",
    "pipeline_warmup_microbatches",
    "clock_uncertainty_us",
    "latency_us",
)
_WRITTEN_WHEN_SET = frozenset({"protocol", "reference", "telemetry", "engine", "profile"})
# Every key a RankResult holds as a value of its own; any other key of a rank dict
# (vLLM's kv_blocks, routing, batch_order, drafter, ...) is kept as written (`extra`).
_RANK_KEYS = frozenset(_ENGINE_LAYOUT) | frozenset(_PIPELINE_LAYOUT)


@dataclass(frozen=True)
class RankResult:
    """One global rank's dict of a case.

    `intermediate_graph_vs_eager` is None where no graph was compared (a CPU
    pipeline), `telemetry_unavailable` says why NVML could not read a GPU
    rank's device. `extra` holds vLLM's keys fwdasv does not read, as written;
    `layout` the key order of the dict it was read from (empty: built by
    fwdasv's engine, written in its order).
    """

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
    pipeline_vs_eager: Mapping[str, TensorDiff] = field(default_factory=dict)
    intermediate_graph_vs_eager: Mapping[str, TensorDiff] | None = None
    clock_uncertainty_us: float | None = None
    telemetry: Telemetry | None = None
    telemetry_unavailable: str | None = None
    protocol: ProtocolRun | None = None
    reference: ReferenceRun | None = None
    engine: EngineInfo | None = None
    profile: ProfileBlock | None = None
    pipeline_timeline: PipelineTimeline | None = None
    pipeline_warmup_microbatches: int | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    layout: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def is_pipeline(self) -> bool:
        return self.pp_rank is not None

    def _values(self) -> dict[str, object]:
        def json_of(
            value: TensorDiff
            | ProtocolRun
            | ReferenceRun
            | EngineInfo
            | ProfileBlock
            | PipelineTimeline
            | None,
        ) -> dict[str, object] | None:
            return None if value is None else value.to_json()

        telemetry = (
            self.telemetry.to_json()
            if self.telemetry is not None
            else None
            if self.telemetry_unavailable is None
            else unavailable_telemetry_json(self.telemetry_unavailable)
        )
        return {
            "num_tokens": self.num_tokens,
            "pp_rank": self.pp_rank,
            "timing_scope": self.timing_scope,
            "eager_repeat": json_of(self.eager_repeat),
            "graph_vs_eager": json_of(self.graph_vs_eager),
            "intermediate_graph_vs_eager": diffs_json(self.intermediate_graph_vs_eager),
            "graph_deterministic": self.graph_deterministic,
            "state_reset_bytes": self.state_reset_bytes,
            "pipeline_vs_eager": diffs_json(self.pipeline_vs_eager),
            "finite": self.finite,
            "latency_us": self.latency.to_json(),
            "protocol": json_of(self.protocol),
            "reference": json_of(self.reference),
            "telemetry": telemetry,
            "engine": json_of(self.engine),
            "profile": json_of(self.profile),
            "pipeline_timeline": json_of(self.pipeline_timeline),
            "pipeline_warmup_microbatches": self.pipeline_warmup_microbatches,
            "clock_uncertainty_us": self.clock_uncertainty_us,
            **self.extra,
        }

    def to_json(self) -> dict[str, object]:
        """The rank dict: the keys read, in their order; else the engine's order.

        A key set since it was read (telemetry added to vLLM's file) goes last.
        """
        values = self._values()
        if self.layout:
            data = {key: values.get(key) for key in self.layout}
        else:
            layout = _PIPELINE_LAYOUT if self.is_pipeline else _ENGINE_LAYOUT
            data = {
                key: values[key]
                for key in layout
                if key not in _WRITTEN_WHEN_SET or values[key] is not None
            }
        data.update((k, v) for k, v in values.items() if k not in data and v not in (None, {}))
        return data


def _telemetry(data: object, where: str) -> tuple[Telemetry | None, str | None]:
    """A `telemetry` block: (its summary, None), or (None, why) where NVML could not read."""
    if data is None:
        return None, None
    data = json_object(data, where)
    if require(data, "summary", where) is None:
        unavailable = data.get("unavailable")
        return None, None if unavailable is None else str(unavailable)
    return Telemetry.from_json(data, where), None


def _block(
    data: Mapping[str, object], key: str, where: str, parse: Callable[[object, str], T]
) -> T | None:
    value = data.get(key)
    return None if value is None else parse(value, f"{where}.{key}")


def parse_rank(data: object, rank: int, where: str) -> RankResult:
    data = json_object(data, where)
    finite = require(data, "finite", where)
    if not isinstance(finite, bool):
        raise ResultsError(f"{where}: 'finite' must be true or false, got {finite!r}")
    telemetry, unavailable = _telemetry(data.get("telemetry"), f"{where}.telemetry")
    return RankResult(
        rank=rank,
        num_tokens=integer(data, "num_tokens", where),
        latency=parse_latency(require(data, "latency_us", where), f"{where}.latency_us"),
        finite=finite,
        graph_vs_eager=_block(data, "graph_vs_eager", where, TensorDiff.from_json),
        eager_repeat=_block(data, "eager_repeat", where, TensorDiff.from_json),
        graph_deterministic=optional(  # type: ignore[arg-type]
            data, "graph_deterministic", where, lambda v: isinstance(v, bool), "true/false"
        ),
        state_reset_bytes=optional_int(data, "state_reset_bytes", where),
        timing_scope=optional_str(data, "timing_scope", where),
        pp_rank=optional_int(data, "pp_rank", where),
        pipeline_vs_eager=_block(data, "pipeline_vs_eager", where, parse_diffs) or {},
        intermediate_graph_vs_eager=_block(data, "intermediate_graph_vs_eager", where, parse_diffs),
        clock_uncertainty_us=optional_number(data, "clock_uncertainty_us", where),
        telemetry=telemetry,
        telemetry_unavailable=unavailable,
        protocol=_block(data, "protocol", where, ProtocolRun.from_json),
        reference=_block(data, "reference", where, ReferenceRun.from_json),
        engine=_block(data, "engine", where, EngineInfo.from_json),
        profile=_block(data, "profile", where, ProfileBlock.from_json),
        pipeline_timeline=_block(data, "pipeline_timeline", where, PipelineTimeline.from_json),
        pipeline_warmup_microbatches=optional_int(data, "pipeline_warmup_microbatches", where),
        extra={key: value for key, value in data.items() if key not in _RANK_KEYS},
        layout=tuple(data),
    )


@dataclass(frozen=True)
class CaseResult:
    """One case of a bench run: its requests and every rank's result, or the error it raised.

    `judged`: the case carries fwdasv's verdict fields (`refused`, `unstable`),
    as fwdasv's engine writes it (`judge`); vLLM's files have none.
    """

    case: str
    requests: tuple[BenchRequest, ...]
    median_us: float | None
    ranks: tuple[RankResult, ...]
    error: str | None = None
    # fwdasv's engine: the refusing checks that failed, as "check: detail" (see `refusals`).
    refused: tuple[str, ...] = ()
    judged: bool = False

    @classmethod
    def measured(
        cls, case: str, requests: Sequence[BenchRequest], ranks: Sequence[RankResult]
    ) -> CaseResult:
        """A case that ran; its median is rank 0's (every replay is already the max over ranks)."""
        return cls(case, tuple(requests), ranks[0].latency.median, tuple(ranks))

    @classmethod
    def failed(cls, case: str, requests: Sequence[BenchRequest], error: str) -> CaseResult:
        return cls(case, tuple(requests), None, (), error=error)

    def judge(self, tolerance: float = DEFAULT_RELATIVE_RMS_TOLERANCE) -> CaseResult:
        """This result with fwdasv's verdict fields set, the asv suites' rule (`refusals`).

        A non-finite output, a graph (or pipeline) output that differs from
        eager, or replays that differ refuse the case; a sample spread above
        0.5% marks it unstable. A case that failed is returned as it is.
        """
        if self.error is not None:
            return self
        refused = tuple(f"{v.check}: {v.detail}" for v in refusals(self, tolerance))
        return dataclasses.replace(self, refused=refused, judged=True)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "case": self.case,
            "requests": [r.to_json() for r in self.requests],
            "median_us": self.median_us,
        }
        if self.error is not None:
            data.update(error=self.error, ranks=[])
            return data
        data["ranks"] = [rank.to_json() for rank in self.ranks]
        if self.judged:
            data.update(refused=list(self.refused), unstable=self.unstable)
        return data

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


def parse_case_result(data: object, where: str) -> CaseResult:
    data = json_object(data, where)
    name = require(data, "case", where)
    where = f"{where} (case {name!r})"
    raw_requests = require(data, "requests", where)
    try:
        requests = tuple(BenchRequest(**r) for r in raw_requests)  # type: ignore[attr-defined]
    except (TypeError, CaseError) as error:
        raise ResultsError(f"{where}: bad request entry: {error}") from None
    failure = data.get("error")
    if failure is not None:
        return CaseResult.failed(str(name), requests, str(failure))
    ranks = require(data, "ranks", where)
    if not isinstance(ranks, list) or not ranks:
        raise ResultsError(f"{where}: 'ranks' must be a non-empty list")
    refused = data.get("refused") or []
    if not isinstance(refused, list) or not all(isinstance(r, str) for r in refused):
        raise ResultsError(f"{where}: 'refused' must be a list of strings")
    return CaseResult(
        case=str(name),
        requests=requests,
        median_us=number(data, "median_us", where),
        ranks=tuple(parse_rank(r, i, f"{where}.ranks[{i}]") for i, r in enumerate(ranks)),
        refused=tuple(refused),
        judged="refused" in data or "unstable" in data,
    )


def parse(data: object, source: str = "<results>") -> list[CaseResult]:
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


def dumps(results: Iterable[CaseResult]) -> str:
    """The file's text as vLLM writes it (`json.dump(results, f, indent=2)`), except that a
    non-finite number is written as null, so the file is valid JSON; with a final newline."""
    data = [result.to_json() for result in results]
    return json.dumps(finite_json(data), indent=2, allow_nan=False) + "\n"


def dump(
    results: Iterable[CaseResult],
    path: str | os.PathLike[str],
    *,
    make_parents: bool = True,
    what: str = "results file",
) -> None:
    """Write the results (`dumps`) atomically."""
    write_atomic(path, dumps(results), make_parents=make_parents, what=what)
