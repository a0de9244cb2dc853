"""`python -m fwdasv.engine ...` (also under `torchrun -m fwdasv.engine`)."""

from fwdasv.engine.cli import forward

if __name__ == "__main__":
    forward(prog_name="python -m fwdasv.engine")
