"""`fwdasv forward` / `python -m fwdasv.engine`: the engine's command line.

Flags follow `vllm bench forward` where they mean the same (`--case`,
`--shapes`, `--iters`, `--samples`, `--seed`, `--output-json`), and the output
is the same JSON, so one parser and one asv layer serve both.
"""

from __future__ import annotations

import os

import click

from fwdasv.core.cases import GRAMMAR_HELP, load_cases, parse_case, suite_cases, unique_cases
from fwdasv.core.clitools import CliError, Command
from fwdasv.core.errors import CasesFailed
from fwdasv.core.files import check_output_dir, check_output_path
from fwdasv.engine.protocol import AUTO, DEFAULT_GPU_PROTOCOL, PROTOCOLS, STEADY, resolve_protocol
from fwdasv.targets.base import DEFAULT_TARGET, TargetSpec, check_dtype_name, parse_options


def collect_cases(case: tuple[str, ...], shapes: str | None, suite: tuple[str, ...]):
    cases = [parse_case(text) for text in case]
    if shapes:
        cases += load_cases(shapes)
    for name in suite:
        cases += suite_cases(name)
    if not cases:
        raise CliError("No cases: pass at least one --case, --shapes or --suite")
    return unique_cases(cases)


@click.command(
    "forward",
    cls=Command,
    context_settings={"show_default": True, "help_option_names": ["-h", "--help"]},
)
@click.option(
    "--target",
    default=DEFAULT_TARGET,
    help="Factory of the model to time, package.module:callable.",
)
@click.option(
    "--target-option",
    "target_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Keyword passed to the target factory (VALUE read as JSON), e.g. num_layers=4. Repeatable.",
)
@click.option(
    "--case", "case", multiple=True, metavar="NAME=REQS", help=GRAMMAR_HELP + ". Repeatable."
)
@click.option(
    "--shapes", type=click.Path(), help="JSON or YAML file of cases (vLLM's --shapes schema)."
)
@click.option(
    "--suite", multiple=True, help="A named case suite of fwdasv.core.cases.SUITES. Repeatable."
)
@click.option("--iters", type=click.IntRange(min=1), default=20, help="Replays per sample.")
@click.option(
    "--samples",
    type=click.IntRange(min=1, max=100_000),
    default=5,
    help="Samples (blocks of --iters replays).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**32 - 1),
    default=0,
    help="Seed of the weights, tokens and cached prefixes.",
)
@click.option(
    "--dtype",
    default="auto",
    help="bfloat16, float16 or float32; auto: bfloat16 on CUDA, float32 on CPU.",
)
@click.option("--device", default="auto", help="cuda, cuda:N or cpu; auto: cuda when available.")
@click.option(
    "--timer",
    type=click.Choice(["auto", "graph", "host"]),
    default="auto",
    help="graph: CUDA events inside a CUDA graph; host: perf_counter around eager forwards. auto: graph on CUDA.",
)
@click.option(
    "--warmup-s",
    type=click.FloatRange(min=0, max=3600),
    default=1.0,
    help="Seconds of replays before timing (steady clocks).",
)
@click.option(
    "--protocol",
    type=click.Choice([AUTO, *PROTOCOLS]),
    default=AUTO,
    help="How the timed blocks are laid out in time: steady (back to back, vLLM's), "
    "duty-cycled (short bursts with 3x idle: the GPU stays off its power cap), long-blocks "
    f"(blocks of at least 1 s). auto: {DEFAULT_GPU_PROTOCOL} for CUDA graphs, steady for the "
    "host timer. See fwdasv/engine/protocol.py.",
)
@click.option(
    "--pipeline-stages",
    type=click.IntRange(min=1),
    default=1,
    help="Split the target into N stages, one process each (torchrun); at most the target's "
    "layers and the visible GPUs (CUDA) or twice the usable CPUs (gloo).",
)
@click.option(
    "--timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=3600.0,
    help="Pipeline runs: kill the torchrun group after this long.",
)
@click.option(
    "--output-json",
    type=click.Path(dir_okay=False),
    help="Write results here (vLLM's --output-json schema).",
)
@click.option(
    "--create-dirs",
    is_flag=True,
    help="Create the missing parent directories of --output-json and --dump-output "
    "(refused otherwise).",
)
@click.option(
    "--profile-dir",
    type=click.Path(file_okay=False),
    help="After timing each case, profile it in separate runs that never count in the timings "
    "(3 CUDA graph replays under torch.profiler; on CPU 3 eager forwards, per-op self time); "
    "write DIR/<case>.rank<r>.kernels.json (vLLM's schema) and .trace.json.gz.",
)
@click.option(
    "--dump-output",
    type=click.Path(file_okay=False),
    help="Debug, pipeline runs: save each rank's streamed output tensors per case as "
    "DIR/<case>.rank<r>.pt (torch.save).",
)
def forward(
    target: str,
    target_options: tuple[str, ...],
    case: tuple[str, ...],
    shapes: str | None,
    suite: tuple[str, ...],
    iters: int,
    samples: int,
    seed: int,
    dtype: str,
    device: str,
    timer: str,
    warmup_s: float,
    protocol: str,
    pipeline_stages: int,
    timeout_s: float,
    output_json: str | None,
    create_dirs: bool,
    dump_output: str | None,
    profile_dir: str | None,
) -> None:
    """Time the forward of exact batches of a PyTorch model, like `vllm bench forward`.

    Prints one line per case and writes the results JSON as each case finishes.
    A case whose output is non-finite, differs from eager or replays
    non-deterministically is refused (no latency recorded, the reason in the
    JSON); a sample spread above 0.5% is marked `unstable` with a warning.
    Exits 3 when some cases failed or were refused, 1 on bad input, 2 on bad usage.
    """
    cases = collect_cases(case, shapes, suite)
    pipeline = pipeline_stages > 1 or _under_torchrun()
    if pipeline and protocol not in (AUTO, STEADY):
        raise CliError(
            f"--protocol {protocol} is for single-stage runs: a pipeline streams its "
            "microbatches back to back (use --protocol steady or auto)"
        )
    if dump_output is not None and not pipeline:
        raise CliError("--dump-output is for pipeline runs (--pipeline-stages N > 1)")
    options = parse_options(target_options)
    # A misspelt target fails before torch is imported, in a fraction of a second.
    spec = TargetSpec.parse(target, options)
    spec.resolve()
    if pipeline_stages > 1 and not _under_torchrun():
        # Before any rank starts (64 stages of a 4-layer target ran a box out of memory).
        spec.check_stages(pipeline_stages)
    if dtype != "auto":
        check_dtype_name(dtype)
    # Before anything is measured: a bad path must cost nothing.
    if output_json is not None:
        check_output_path(output_json, make_parents=create_dirs, what="--output-json")
    if dump_output is not None:
        check_output_dir(dump_output, make_parents=create_dirs, what="--dump-output")

    # Import torch only once the arguments are known to be good.
    from fwdasv.engine.config import (
        BenchOptions,
        EngineConfig,
        resolve_device,
        resolve_dtype,
        resolve_timer,
    )
    from fwdasv.targets.base import torch_dtype

    try:
        device = resolve_device(device)
        timer = resolve_timer(timer, device)
    except ValueError as error:
        raise CliError(str(error)) from None
    protocol = STEADY if pipeline else resolve_protocol(protocol, timer)
    dtype = resolve_dtype(dtype, device)
    torch_dtype(dtype)
    config = EngineConfig(
        target=target,
        target_options=options,
        device=device,
        dtype=dtype,
        options=BenchOptions(
            iters=iters,
            samples=samples,
            seed=seed,
            warmup_s=warmup_s,
            timer=timer,
            protocol=protocol,
        ),
    )
    if pipeline:
        if profile_dir is not None:
            raise CliError(
                "--profile-dir is not supported for pipeline runs yet; profile with one stage"
            )
        from fwdasv.engine.pipeline_run import pipeline_main

        outcome = pipeline_main(
            config,
            cases,
            pipeline_stages,
            output_json,
            timeout_s,
            dump_output,
            echo=click.echo,
            warn=_warn,
        )
    else:
        from fwdasv.engine.runner import run_cases

        outcome = run_cases(
            config, cases, output_json, echo=click.echo, warn=_warn, profile_dir=profile_dir
        )
    failed = [r for r in outcome if not r.ok or r.refused]
    if failed:
        raise CasesFailed(
            f"{len(failed)} case(s) failed: "
            + ", ".join(f"{r.case} ({'refused' if r.ok else 'error'})" for r in failed)
            + (f" (details in {output_json})" if output_json else "")
        )


def _under_torchrun() -> bool:
    return "RANK" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) > 1


def _warn(line: str) -> None:
    click.echo(line, err=True)
