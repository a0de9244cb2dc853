"""`python -m fwdasv.backends.vllm_forward ...`: vLLM's forward bench in-process.

The same parser and `main` as `vllm bench forward`, without importing the CLI's
serving stack (an install without uvicorn/fastapi still runs the bench).
Runs under torchrun as well.
"""

import sys


def main(argv: list[str] | None = None) -> None:
    from vllm.benchmarks.forward.main import add_cli_args
    from vllm.benchmarks.forward.main import main as bench_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="python -m fwdasv.backends.vllm_forward")
    add_cli_args(parser)
    bench_main(parser.parse_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
