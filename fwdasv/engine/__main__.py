"""`python -m fwdasv.engine ...` (also under `torchrun -m fwdasv.engine`).

On Linux the engine first re-executes itself with glibc's mmap and trim
thresholds raised (`STEADY_MALLOC_ENV`), unless they are set already: with the
defaults, a forward's large temporaries are mapped and unmapped at every run,
and the page faults made host-timed CPU forwards of the same code differ by up
to 3.5x from one process to the next (measured, docs/measurements.md). The
variables must be in place before the interpreter starts, hence the exec.
"""

import os
import sys

from fwdasv.engine.hostmem import STEADY_MALLOC_ENV, wants_steady_malloc


def main() -> None:
    if wants_steady_malloc(os.environ):
        env = {**os.environ, **STEADY_MALLOC_ENV}
        os.execve(sys.executable, [sys.executable, "-m", "fwdasv.engine", *sys.argv[1:]], env)
    from fwdasv.engine.cli import forward

    forward(prog_name="python -m fwdasv.engine")


if __name__ == "__main__":
    main()
