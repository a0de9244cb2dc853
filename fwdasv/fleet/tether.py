"""`python -m fwdasv.fleet.tether ARGV...`: ARGV run as a child that dies with our parent.

A fleet worker (a Ray actor) runs asv through this. When the worker dies (its node
removed, the actor killed) the operating system does not end the asv it started, which
would go on measuring for nobody. Started as the leader of a process group of its own
(`fwdasv.launch.run_process` starts a new session), this waits on ARGV and checks twice
a second that its parent is still the one that started it; when not, it kills its whole
process group (asv and the bench processes asv started in it), itself included.
Otherwise it exits with ARGV's status.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

POLL_S = 0.5


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m fwdasv.fleet.tether ARGV...", file=sys.stderr)
        return 2
    parent = os.getppid()
    child = subprocess.Popen(argv)
    while True:
        try:
            return child.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if os.getppid() != parent:
                os.killpg(os.getpgid(0), signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
