"""fwdasv's forward engine: vLLM's forward-bench method for any PyTorch model.

`capture` times one stage (a CUDA graph on a GPU, a host timer on CPU), `pipeline`
streams microbatches through stages across torchrun ranks; `runner` (one stage) and
`pipeline_run` run lists of cases and write vLLM's results JSON, `run` picks one for a
`fwdasv forward` whose flags `cli` maps onto `config`.
"""
