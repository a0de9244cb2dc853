"""`fwdasv forward` / `python -m fwdasv.engine`: the engine's command line.

Flags follow `vllm bench forward` where they mean the same (`--case`,
`--shapes`, `--iters`, `--samples`, `--seed`, `--output-json`), and the output
is the same JSON, so one parser and one asv layer serve both. The flags are
only mapped here: `fwdasv.engine.config.ForwardRun.from_options` checks them, and
`fwdasv.engine.run.run_forward` runs them.
"""

from __future__ import annotations

from typing import Any

import click

from fwdasv.core.cases import GRAMMAR_HELP
from fwdasv.core.clitools import Command, FiniteRange, PathOption
from fwdasv.engine.config import ForwardRun
from fwdasv.engine.protocol import AUTO, DEFAULT_GPU_PROTOCOL, PROTOCOLS
from fwdasv.engine.run import run_forward
from fwdasv.targets.base import DEFAULT_TARGET


@click.command(
    "forward",
    cls=Command,
    context_settings={"show_default": True, "help_option_names": ["-h", "--help"]},
)
@click.option(
    "--target",
    default=DEFAULT_TARGET,
    metavar="PKG.MODULE:CALLABLE",
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
    "--shapes", type=PathOption(), help="JSON or YAML file of cases (vLLM's --shapes schema)."
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
    type=FiniteRange(min=0, max=3600),
    default=1.0,
    help="Seconds of replays before timing (steady clocks).",
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="torch's intra-op threads while timing. [default: 1 on the host timer (as the asv "
    "suites: beside other jobs, torch's one thread per core spread a 1 ms forward's samples "
    "up to 1000x), torch's own with CUDA graphs]",
)
@click.option(
    "--reference",
    is_flag=True,
    help="Host timer on CPU: after each timed replay, also time fwdasv's fixed workload (a "
    "GEMM chain, fwdasv/engine/yardstick.py) in the same process and write its times beside "
    "the forward's (the rank's `reference`). The forward's time over it cancels the "
    "machine's own changes of speed: a busy or shared box.",
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
    type=FiniteRange(min=0, min_open=True),
    default=3600.0,
    help="Pipeline runs: kill the torchrun group after this long.",
)
@click.option(
    "--output-json",
    type=PathOption(dir_okay=False),
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
    type=PathOption(file_okay=False),
    help="After timing each case, profile it in separate runs that never count in the timings "
    "(3 CUDA graph replays under torch.profiler; on CPU 3 eager forwards, per-op self time); "
    "write DIR/<case>.rank<r>.kernels.json (vLLM's schema) and .trace.json.gz.",
)
@click.option(
    "--dump-output",
    type=PathOption(file_okay=False),
    help="Debug, pipeline runs: save each rank's streamed output tensors per case as "
    "DIR/<case>.rank<r>.pt (torch.save).",
)
def forward(**flags: Any) -> None:
    """Time the forward of exact batches of a PyTorch model, like `vllm bench forward`.

    Prints one line per case and writes the results JSON as each case finishes.
    A case whose output is non-finite, differs from eager or replays
    non-deterministically is refused (no latency recorded, the reason in the
    JSON); a sample spread above 0.5% is marked `unstable` with a warning.
    Exits 3 when some cases failed or were refused, 2 on bad input.
    """
    run_forward(ForwardRun.from_options(**flags), echo=click.echo, warn=_warn)


def _warn(line: str) -> None:
    click.echo(line, err=True)
