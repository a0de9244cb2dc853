"""vLLM's models as asv suites (vllm backend): what `benchmarks/forward.py` and `fwdasv init --vllm` use.

Each class is one configuration, its cases asv parameters; asv runs one bench
process per class and commit (one engine for all of a model's cases). Shapes
are exact at every commit (the vLLM backend pins `--kv-len-jitter 0` and
`--seed`). On an offline GPU host set FWDASV_MODEL_DIR to a directory holding
`qwen3-0.6b/` and `llama-3.1-8b/` (config.json is enough: weights are dummy)
and FWDASV_VLLM_ENTRY=module when the vLLM install lacks the CLI's server
dependencies. A benchmark module imports the classes it runs; asv names them
by that module (`forward.Qwen3_0_6B.track_latency`, `pipeline.Qwen3_0_6B_PP2...`). The
pipeline suites take 2 GPUs a process (skipped with fewer); `DecoderPP2`, fwdasv's
decoder in 2 stages, runs everywhere (gloo on a CPU, NCCL on 2 GPUs) and holds no vLLM code.
"""

from fwdasv import asvsuite
from fwdasv.core.cases import SUITES

__all__ = ["DecoderPP2", "Llama31_8B", "Qwen3_0_6B", "Qwen3_0_6B_PP2", "Qwen3_0_6B_Verify"]


class Qwen3_0_6B(asvsuite.VllmSuite):
    """vLLM's default model: decode batches 1/8/32/128 at 1k and 1/8/32 at 8k, prefills, a mixed batch."""

    model = "Qwen/Qwen3-0.6B"
    local_model = "qwen3-0.6b"
    max_model_len = 8192
    cases = (
        *(c for c in SUITES["vllm-decode"] if c.split("=")[0] != "decode_bs128_8k"),
        *SUITES["vllm-prefill"],
        "mix_2k_bs32=2048,32*1@4096",
    )
    version = "1"


class Qwen3_0_6B_Verify(asvsuite.VllmSuite):
    """A speculative-verify step (Q = 1 + 3 draft tokens); the target only, no drafter timed."""

    model = "Qwen/Qwen3-0.6B"
    local_model = "qwen3-0.6b"
    max_model_len = 8192
    extra_args = (
        "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 2}',
        "--exclude-drafter",
    )
    cases = ("verify_bs16_4k=16*4@4096:3",)
    version = "1"


class Llama31_8B(asvsuite.VllmSuite):
    """Llama-3.1-8B: decode at 1k and 8k, a 2k prefill and a mixed batch."""

    model = "meta-llama/Llama-3.1-8B"
    local_model = "llama-3.1-8b"
    max_model_len = 8192
    cases = (
        "decode_bs1_1k=1*1@1024",
        "decode_bs32_1k=32*1@1024",
        "decode_bs128_1k=128*1@1024",
        "decode_bs32_8k=32*1@8192",
        "prefill_2k=2048",
        "mix_2k_bs32=2048,32*1@4096",
    )
    version = "1"


class Qwen3_0_6B_PP2(asvsuite.PipelineSuite, asvsuite.VllmSuite):
    """vLLM's pipeline bench (`--pipeline-parallel-size 2` under torchrun)."""

    model = "Qwen/Qwen3-0.6B"
    local_model = "qwen3-0.6b"
    max_model_len = 8192
    cases = ("decode_bs32_1k=32*1@1024", "prefill_512=512")
    version = "1"


class DecoderPP2(asvsuite.PipelineSuite, asvsuite.TorchSuite):
    """fwdasv's tiny decoder in 2 stages (gloo on CPU, NCCL and CUDA graphs on 2 GPUs)."""

    model = "fwdasv.targets.decoder:tiny"
    iters = 10
    samples = 10
    warmup_s = 0.2
    cases = ("decode_bs4=4*1@256", "prefill_64=64")
    version = "1"
