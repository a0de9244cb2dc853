"""The forward-bench JSON: vLLM's `--output-json` schema, read, written, judged.

This package owns the file in both directions, as asv's `Results` owns its own: the
engine builds `CaseResult` values and `dump` writes them; `load` reads vLLM's or
fwdasv's files back into the same values, and a file read and written again is
byte-identical (the key order read is kept). fwdasv adds what vLLM does not write, all
optional for the parser: a failed case's `"error"`, a judged case's `"refused"` and
`"unstable"`, and per rank the engine's settings, timing protocol, reference workload,
GPU telemetry and profile. vLLM writes a non-finite number as a bare `NaN`, which is not
JSON; fwdasv writes `null` there, and a null comparison reads as NaN, so the case is
still refused. `file` holds the ranks and cases and the file, `blocks` the values in a
rank's dict, `checks` the verdicts, `reading` the validators; every name is imported
from here. JSON keys are spelled in this package and nowhere else.
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
    refusals,
    verdicts,
)
from fwdasv.core.results.file import (
    CaseResult,
    RankResult,
    by_case,
    dump,
    dumps,
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
    "load",
    "parse",
    "parse_case_result",
    "parse_rank",
    "refusals",
    "verdicts",
]
