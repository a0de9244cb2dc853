"""One `fwdasv forward`, run: its cases through the single-stage runner or a pipeline.

Input: a checked `ForwardRun` (`fwdasv.engine.config`). Output: the judged results,
written to --output-json as each case ends. A case that failed, was refused, or whose
asked-for profile failed makes the run raise `CasesFailed` (exit 3), after every case
ran and was written.
"""

from __future__ import annotations

from collections.abc import Callable

from fwdasv.core.errors import CasesFailed
from fwdasv.core.results import CaseResult
from fwdasv.engine.config import ForwardRun


def run_forward(
    run: ForwardRun, echo: Callable[[str], None], warn: Callable[[str], None]
) -> list[CaseResult]:
    """Run every case (a pipeline through torchrun); raises CasesFailed (status 3) when
    some failed or were refused, after all ran and were written."""
    if run.pipeline:
        from fwdasv.engine.pipeline_run import pipeline_main

        outcome = pipeline_main(
            run.config,
            run.cases,
            run.pipeline_stages,
            run.output_json,
            run.timeout_s,
            run.dump_output,
            echo=echo,
            warn=warn,
        )
    else:
        from fwdasv.engine.runner import run_cases

        outcome = run_cases(
            run.config,
            run.cases,
            run.output_json,
            echo=echo,
            warn=warn,
            profile_dir=run.profile_dir,
        )
    failed = [(r.case, _failure(r)) for r in outcome if _failure(r)]
    if failed:
        raise CasesFailed(
            f"{len(failed)} case(s) failed: "
            + ", ".join(f"{case} ({why})" for case, why in failed)
            + (f" (details in {run.output_json})" if run.output_json else "")
        )
    return outcome


def _failure(result: CaseResult) -> str | None:
    """Why a case counts as failed: an error, a refusal, or a profile asked for that failed."""
    if not result.ok:
        return "error"
    if result.refused:
        return "refused"
    if any(rank.profile is not None and rank.profile.error for rank in result.ranks):
        return "profile failed"
    return None
