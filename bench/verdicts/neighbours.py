#!/usr/bin/env python
"""A command run beside busy neighbours: N memory streamers (busy_demo.py's), then stopped.

Each neighbour streams a 64 MiB array back and forth in random bursts of 0.5-5 s with
pauses of 0.5-5 s (`busy_demo.stream_memory`), the load a shared box's other jobs give.
Runs COMMAND with them, stops them (also on Ctrl-C or a failure), and prints the command's
wall time and the 1-minute load average seen while it ran (sampled every 5 s: min / median
/ max); exits with the command's exit status.

    python bench/verdicts/neighbours.py --count 3 -- scripts/test.sh
    python bench/verdicts/neighbours.py --count 3 -- .venv/bin/python -m pytest -m "measure and not long"
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import busy_demo


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3, help="memory streamers (default 3)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    stop = multiprocessing.Event()
    neighbours = [
        multiprocessing.Process(target=busy_demo.stream_memory, args=(seed, stop), daemon=True)
        for seed in range(args.count)
    ]
    loads: list[float] = []
    sampling = threading.Event()
    sampler = threading.Thread(target=busy_demo.sample_load, args=(loads, sampling), daemon=True)
    started = time.monotonic()
    status = 1
    try:
        for process in neighbours:
            process.start()
        sampler.start()
        print(f"[neighbours] {args.count} memory streamers started; running {command}", flush=True)
        status = subprocess.call(command)
    finally:
        wall = time.monotonic() - started
        stop.set()
        sampling.set()
        for process in neighbours:
            process.join(10)
            if process.is_alive():
                process.terminate()
    shown = (
        f"load average min {min(loads):.1f}, median {statistics.median(loads):.1f}, "
        f"max {max(loads):.1f} ({os.cpu_count()} CPUs)"
        if loads
        else "no load sample (under 5 s)"
    )
    print(f"[neighbours] exit {status} after {wall:.0f} s beside {args.count} streamers; {shown}")
    return status


if __name__ == "__main__":
    sys.exit(main())
