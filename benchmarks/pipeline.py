"""Pipeline-parallel forward latency: microbatches streamed through 2 stages, one GPU each."""

from fwdasv import asvsuite


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
