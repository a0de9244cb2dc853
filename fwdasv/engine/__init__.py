"""fwdasv's forward engine: vLLM's forward-bench method for any PyTorch model.

`capture` times one stage (a CUDA graph on a GPU, a host timer on CPU),
`pipeline` streams microbatches through stages across torchrun ranks, and
`runner` / `cli` run lists of cases and write vLLM's results JSON.
"""
