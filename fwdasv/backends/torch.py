"""The torch backend: fwdasv's own engine on a target of the project under test.

`python -m fwdasv.engine --target pkg.mod:factory --case ... --output-json F`,
or under torchrun with `--pipeline-stages N` for a pipeline.
"""

from __future__ import annotations

import os
from pathlib import Path

from fwdasv.backends import RunConfig, find_module, visible_gpus
from fwdasv.engine.argv import EngineArgs, engine_argv
from fwdasv.launch import MAX_RANKS_PER_CPU, usable_cpus


def argv(config: RunConfig, output_json: Path) -> list[str]:
    return engine_argv(
        EngineArgs(
            target=config.model,
            cases=config.cases,
            output_json=output_json,
            target_options=config.model_options,
            dtype=config.dtype,
            device=config.device,
            timer=config.timer,
            iters=config.iters,
            samples=config.samples,
            seed=config.seed,
            warmup_s=config.warmup_s,
            protocol=config.protocol,
            pipeline_stages=config.pipeline_stages,
            reference=config.reference,
            extra=config.extra_args,
        )
    )


def unavailable(config: RunConfig) -> str | None:
    module = config.model.partition(":")[0]
    # The bench may get more of a path than its interpreter has (the config's PYTHONPATH).
    extra = [p for p in config.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if find_module(config.python, module.split(".")[0], extra) is None:
        return f"target module {module!r} is not installed in this environment"
    gpus = visible_gpus()
    if (config.device.startswith("cuda") or config.timer == "graph") and gpus < 1:
        return "this suite times CUDA graphs and no CUDA device is visible"
    # On GPUs a pipeline takes one device per stage; without GPUs it runs on CPU (gloo).
    if config.pipeline_stages > 1 and 0 < gpus < config.pipeline_stages and config.device != "cpu":
        return f"{config.pipeline_stages} pipeline stages need {config.pipeline_stages} GPUs; {gpus} visible"
    on_cpu = config.device == "cpu" or (gpus == 0 and not config.device.startswith("cuda"))
    if on_cpu and config.pipeline_stages > MAX_RANKS_PER_CPU * usable_cpus():
        return (
            f"{config.pipeline_stages} pipeline stages on CPU need at least "
            f"{-(-config.pipeline_stages // MAX_RANKS_PER_CPU)} usable CPUs; {usable_cpus()} here"
        )
    return None
