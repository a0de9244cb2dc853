"""Pipeline-parallel forward latency: microbatches streamed through 2 stages, one GPU each.

The suites ship with fwdasv (`fwdasv.vllm_suites`): vLLM's pipeline bench and fwdasv's
decoder in 2 stages (gloo on a CPU, NCCL on 2 GPUs); `fwdasv init --vllm` writes the same.
"""

from fwdasv.vllm_suites import DecoderPP2, Qwen3_0_6B_PP2

__all__ = ["DecoderPP2", "Qwen3_0_6B_PP2"]
