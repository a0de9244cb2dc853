"""A stand-in bench for tests of `fwdasv.launch`: behaves as the mode says.

It writes results the way fwdasv's engine does (rank 0 only, vLLM's schema via
`fwdasv.core.results`) without importing torch, so a torchrun group of it starts fast.

    fake_bench.py --output-json F --cases a,b --mode MODE [--pid-dir D] [--env-out F]

Modes: ok (exit 0), exit3 (every case written, exit 3), partial (only the first
case, exit 0), nowrite (exit 0, no file), raise-rank1 (rank 1 raises, the others
wait as in a collective), peer-error (rank 1 exits 7 with no traceback; rank 0
prints, as torch.distributed's excepthook does, the `[rank0]:` traceback of the
error a peer's loss raises, and waits), hang (every rank sleeps; rank 1 ignores SIGTERM),
orphan (starts a sleeper in a session of its own, as torchrun starts its
workers, and sleeps).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fwdasv.core import results
from fwdasv.core.cases import parse_case
from fwdasv.core.stats import Latency


def write(path: str, names: list[str]) -> None:
    done = []
    for name in names:
        case = parse_case(f"{name}=2*1@16")
        latency = Latency.from_replays([10.0, 11.0, 12.0, 13.0], 2, "host_perf_counter")
        rank = results.RankResult(
            rank=0,
            num_tokens=case.num_tokens,
            latency=latency.rounded(),
            finite=True,
            graph_vs_eager=None,
            eager_repeat=results.TensorDiff(0.0, 0.0),
            state_reset_bytes=0,
            timing_scope="target_only",
        )
        done.append(results.CaseResult.measured(case.name, case.requests, [rank]))
    results.dump(done, path)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--output-json", required=True)
    parser.add_argument("--cases", default="a,b")
    parser.add_argument("--mode", default="ok")
    parser.add_argument("--pid-dir")
    parser.add_argument("--env-out")
    args = parser.parse_args()
    rank = int(os.environ.get("RANK", "0"))
    names = args.cases.split(",")
    if args.pid_dir:
        Path(args.pid_dir, f"rank{rank}.pid").write_text(str(os.getpid()))
    print(f"fake bench rank {rank} pid {os.getpid()} mode {args.mode}", flush=True)
    if args.env_out and rank == 0:
        Path(args.env_out).write_text(json.dumps(dict(os.environ)))
    if args.mode == "raise-rank1":
        if rank == 1:
            raise RuntimeError("boom from rank 1")
        time.sleep(120)
        return 0
    if args.mode == "peer-error":
        if rank == 1:
            time.sleep(1.0)  # rank 0's traceback is out before torchrun sees this exit
            os._exit(7)
        traceback = [
            "Traceback (most recent call last):",
            '  File "fake_bench.py", line 1, in <module>',
            "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer",
        ]
        print("\n".join(f"[rank{rank}]: {line}" for line in traceback), flush=True)
        time.sleep(120)
        return 0
    if args.mode == "orphan":
        sleeper = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
        )
        if args.pid_dir:
            Path(args.pid_dir, "sleeper.pid").write_text(str(sleeper.pid))
        time.sleep(600)
    if args.mode == "hang":
        if rank == 1:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            print(f"rank {rank} still waiting", flush=True)
            time.sleep(0.5)
    if rank != 0:
        return 0
    if args.mode == "nowrite":
        return 0
    if args.mode == "partial":
        write(args.output_json, names[:1])
        return 0
    write(args.output_json, names)
    return 3 if args.mode == "exit3" else 0


if __name__ == "__main__":
    sys.exit(main())
