"""Single-stage forward latency: vLLM models (vllm backend) and fwdasv's canary (torch backend).

Each class is one configuration, its cases asv parameters; asv runs one bench
process per class and commit. Shapes are exact at every commit (the vLLM
backend pins `--kv-len-jitter 0` and `--seed`). On an offline GPU host set
FWDASV_MODEL_DIR to a directory holding `qwen3-0.6b/` and `llama-3.1-8b/`
(config.json is enough: weights are dummy) and FWDASV_VLLM_ENTRY=module when
the vLLM install lacks the CLI's server dependencies.
"""

from fwdasv import asvsuite
from fwdasv.core.cases import SUITES
from fwdasv.vllm_suites import Llama31_8B, Qwen3_0_6B, Qwen3_0_6B_Verify

__all__ = ["Llama31_8B", "Qwen3_0_6B", "Qwen3_0_6B_Verify"]


class CanaryDecoder(asvsuite.TorchSuite):
    """fwdasv's bundled tiny decoder: no code of the project under test.

    A step here at some commit means the environment changed (torch, driver,
    machine), not the project's code. Runs everywhere (host timer on CPU).
    """

    model = "fwdasv.targets.decoder:tiny"
    iters = 10
    samples = 10
    warmup_s = 0.2
    cases = ("decode_bs4=4*1@256", "prefill_64=64")
    version = "1"


class Llama3_8BLayersGraph(asvsuite.TorchSuite):
    """fwdasv's decoder with Llama-3-8B-sized layers, CUDA graphs only (skipped without a GPU)."""

    model = "fwdasv.targets.decoder:llama3_8b_layers"
    timer = "graph"
    cases = SUITES["h200"]
    version = "1"
