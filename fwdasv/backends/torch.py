"""The torch backend: fwdasv's own engine on a target of the project under test.

`python -m fwdasv.engine --target pkg.mod:factory --case ... --output-json F`,
or under torchrun with `--pipeline-stages N` for a pipeline.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
from pathlib import Path

from fwdasv.backends import RunConfig, visible_gpus


def argv(config: RunConfig, output_json: Path) -> list[str]:
    args = [
        "-m",
        "fwdasv.engine",
        "--target",
        config.model,
        "--dtype",
        config.dtype,
        "--device",
        config.device,
        "--timer",
        config.timer,
        "--iters",
        str(config.iters),
        "--samples",
        str(config.samples),
        "--seed",
        str(config.seed),
        "--warmup-s",
        str(config.warmup_s),
        "--output-json",
        str(output_json),
    ]
    for key, value in config.model_options.items():
        args += ["--target-option", f"{key}={json.dumps(value)}"]
    if config.pipeline_stages > 1:
        args += ["--pipeline-stages", str(config.pipeline_stages)]
    for case in config.cases:
        args += ["--case", case.to_string()]
    return args + list(config.extra_args)


def unavailable(config: RunConfig) -> str | None:
    module = config.model.partition(":")[0]
    top = module.split(".")[0]
    # The bench may get more of a path than this process has (the config's PYTHONPATH).
    extra = [p for p in config.env.get("PYTHONPATH", "").split(os.pathsep) if p]
    found = importlib.util.find_spec(top) is not None or (
        extra and importlib.machinery.PathFinder.find_spec(top, extra) is not None
    )
    if not found:
        return f"target module {module!r} is not installed in this environment"
    gpus = visible_gpus()
    if (config.device.startswith("cuda") or config.timer == "graph") and gpus < 1:
        return "this suite times CUDA graphs and no CUDA device is visible"
    # On GPUs a pipeline takes one device per stage; without GPUs it runs on CPU (gloo).
    if config.pipeline_stages > 1 and 0 < gpus < config.pipeline_stages and config.device != "cpu":
        return f"{config.pipeline_stages} pipeline stages need {config.pipeline_stages} GPUs; {gpus} visible"
    return None
