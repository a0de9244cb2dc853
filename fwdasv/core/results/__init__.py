"""The forward-bench JSON: vLLM's `--output-json` schema, read, written, judged.

This package owns the file in both directions, as asv's `Results` owns its
own: the engine builds `CaseResult` values and `dump` writes them
(`to_json`); `load` reads vLLM's or fwdasv's files back into the same values
(`parse`), and a file read and written again is byte-identical (the key order
read is kept: vLLM's pipeline bench orders its keys unlike its single-GPU
bench, and fwdasv's engine unlike both).

fwdasv adds what vLLM does not write, all optional for the parser: a case that
failed carries `"error"` (and no ranks); a case the engine judged carries
`"refused"` (the failed checks of `refusals`, empty when none) and `"unstable"`
(sample spread above `UNSTABLE_SPREAD_PCT`); each rank dict may carry the
engine's settings (`"engine"`, `EngineInfo`), its timing protocol
(`"protocol"`, `ProtocolRun`), a fixed workload timed beside it (`"reference"`,
`ReferenceRun`) and the GPU's clocks, power and clock event
reasons while it ran (`"telemetry"`, `Telemetry`). vLLM's bench never fails
on bad validation values; `verdicts` is where fwdasv refuses to record a
latency for a forward that computed garbage.

vLLM writes a non-finite number as a bare `NaN` (Python's `json.dump`), which
is not JSON; fwdasv writes `null` there (`dump`), and the parser reads a null
comparison as NaN, so such a case is still refused.

`file` holds the ranks and cases and reads and writes the file, `blocks` the
values inside a rank's dict, `checks` the verdicts, `reading` the validators;
every name is imported from here (`fwdasv.core.results`). JSON keys are spelled
in this package and nowhere else.
"""

from fwdasv.core.results.blocks import (
    TELEMETRY_NUMBERS,
    EngineInfo,
    GpuIdentity,
    PipelineTimeline,
    ProfileBlock,
    ProtocolRun,
    ReferenceRun,
    Telemetry,
    TelemetryReading,
    TensorDiff,
)
from fwdasv.core.results.checks import (
    DEFAULT_RELATIVE_RMS_TOLERANCE,
    REFUSING_CHECKS,
    Verdict,
    nan_as_worst,
    refusals,
    verdicts,
)
from fwdasv.core.results.file import (
    CaseResult,
    RankResult,
    by_case,
    dump,
    dumps,
    finite_json,
    load,
    parse,
    parse_case_result,
    parse_rank,
)
from fwdasv.core.results.reading import ResultsError

__all__ = [
    "DEFAULT_RELATIVE_RMS_TOLERANCE",
    "REFUSING_CHECKS",
    "TELEMETRY_NUMBERS",
    "CaseResult",
    "EngineInfo",
    "GpuIdentity",
    "PipelineTimeline",
    "ProfileBlock",
    "ProtocolRun",
    "RankResult",
    "ReferenceRun",
    "ResultsError",
    "Telemetry",
    "TelemetryReading",
    "TensorDiff",
    "Verdict",
    "by_case",
    "dump",
    "dumps",
    "finite_json",
    "load",
    "nan_as_worst",
    "parse",
    "parse_case_result",
    "parse_rank",
    "refusals",
    "verdicts",
]
