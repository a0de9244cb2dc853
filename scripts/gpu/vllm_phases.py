"""vLLM's forward bench in-process, with the wall time of each startup phase printed.

    python scripts/gpu/vllm_phases.py [vllm bench forward args...]

Kept for the earlier lease scripts: the hooks live in `fwdasv.backends.vllm_phases`
(which the asv suites run with FWDASV_VLLM_ENTRY=phases).
"""

from fwdasv.backends.vllm_phases import main

if __name__ == "__main__":
    main()
