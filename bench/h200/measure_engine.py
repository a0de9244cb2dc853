"""Engine figures on one GPU: fwdasv's engine vs host-timed eager vs do_bench_cudagraph.

Times the bundled decoder with Llama-3-8B-sized layers on the given cases three ways, side
by side in one run:

- the engine, in `--processes` fresh processes (`python -m fwdasv.engine`), for its
  medians, sample spread, validation and process-to-process agreement;
- host-timed eager forwards (restore, synchronize, perf_counter, forward, synchronize), in
  one more process;
- `triton.testing.do_bench_cudagraph` on the same prepared forward (restore plus forward
  captured in Triton's graph), in that process too.

Writes every raw JSON plus summary.json and summary.md under --out, and prints the Markdown
table. On a GPU host: `python bench/h200/measure_engine.py --out /tmp/engine-figures`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_CASES = (
    "decode_bs1_1k=1*1@1024",
    "decode_bs32_8k=32*1@8192",
    "prefill_2k=2048",
    "mix=2048,32*1@4096",
)
TARGET = "fwdasv.targets.decoder:llama3_8b_layers"


def run_engine(args: argparse.Namespace, out: Path, index: int) -> dict:
    path = out / f"engine_p{index}.json"
    argv = [
        sys.executable,
        "-m",
        "fwdasv.engine",
        "--target",
        TARGET,
        "--iters",
        str(args.iters),
        "--samples",
        str(args.samples),
        "--output-json",
        str(path),
    ]
    for case in args.case:
        argv += ["--case", case]
    begin = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout_s)
    (out / f"engine_p{index}.log").write_text(proc.stdout + proc.stderr)
    print(proc.stdout, end="", flush=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr, flush=True)
    return {"returncode": proc.returncode, "wall_s": time.perf_counter() - begin, "path": str(path)}


def baselines(args: argparse.Namespace) -> dict:
    """Host-timed eager and do_bench_cudagraph, in this process."""
    import torch
    import triton.testing

    from fwdasv.core.cases import parse_case
    from fwdasv.core.stats import Latency
    from fwdasv.engine.capture import StateSnapshot
    from fwdasv.targets.base import TargetSpec

    torch.cuda.set_device(0)
    figures = {}
    with torch.inference_mode():
        target = TargetSpec.parse(TARGET).build("cuda", "bfloat16")
        for text in args.case:
            case = parse_case(text)
            prepared = target.prepare(case, 0)
            snapshot = StateSnapshot(prepared.state)

            def run(snapshot=snapshot, prepared=prepared) -> None:
                snapshot.restore()
                prepared.forward()

            for _ in range(3):
                run()
            torch.cuda.synchronize()
            # ~1 s of eager forwards first, as the engine warms its graph.
            begin = time.perf_counter()
            while time.perf_counter() - begin < 1.0:
                run()
            torch.cuda.synchronize()
            times = []
            for _ in range(args.iters * args.samples):
                snapshot.restore()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                prepared.forward()
                torch.cuda.synchronize()
                times.append((time.perf_counter() - t0) * 1e6)
            eager = Latency.from_replays(times, args.samples, "host_perf_counter_eager")
            # Triton captures run() (restore included) in its own graph and reports
            # the mean time per call of each timed replay batch.
            bench_ms = triton.testing.do_bench_cudagraph(
                run, rep=args.do_bench_rep_ms, return_mode="all"
            )
            bench_us = [t * 1000 for t in bench_ms]
            restore_only = triton.testing.do_bench_cudagraph(
                snapshot.restore, rep=50, return_mode="median"
            )
            figures[case.name] = {
                "eager_median_us": eager.median,
                "eager_cv": eager.cv,
                "eager_spread_pct": eager.sample_spread_pct,
                "do_bench_median_us": statistics.median(bench_us),
                "do_bench_cv": statistics.pstdev(bench_us) / statistics.mean(bench_us),
                "do_bench_n": len(bench_us),
                "restore_us": restore_only * 1000,
            }
            print(f"[baselines] {case.name}: {json.dumps(figures[case.name])}", flush=True)
            prepared = snapshot = None
            torch.cuda.empty_cache()
    return figures


def summarize(args: argparse.Namespace, out: Path, engine_runs: list[dict], base: dict) -> dict:
    from fwdasv.core import results

    per_process = []
    for run in engine_runs:
        try:
            per_process.append(results.by_case(results.load(run["path"])))
        except Exception as error:  # keep the other processes' figures
            print(f"[summary] {run['path']}: {error}", file=sys.stderr)
    rows = {}
    for text in args.case:
        name = text.partition("=")[0]
        got = [p[name] for p in per_process if name in p and p[name].ok]
        row: dict = {"case": text, "processes": len(got)}
        if got:
            medians = [g.latency.median for g in got]
            row.update(
                engine_medians_us=medians,
                engine_process_spread_pct=100 * (max(medians) - min(medians)) / min(medians),
                engine_sample_spread_pct=[g.latency.sample_spread_pct for g in got],
                engine_cv=[g.latency.cv for g in got],
                graph_vs_eager_max_abs=[g.ranks[0].graph_vs_eager.max_abs for g in got],
                eager_repeat_max_abs=[g.ranks[0].eager_repeat.max_abs for g in got],
                deterministic=[g.ranks[0].graph_deterministic for g in got],
                verdict_failures=[[f"{v.check}: {v.detail}" for v in g.failures()] for g in got],
            )
        errors = [p[name].error for p in per_process if name in p and not p[name].ok]
        if errors:
            row["errors"] = errors
        row.update(base.get(name, {}))
        if got and name in base:
            engine_cv = statistics.median(row["engine_cv"])
            row["eager_cv_over_engine_cv"] = (
                base[name]["eager_cv"] / engine_cv if engine_cv else None
            )
            row["engine_over_do_bench"] = (
                statistics.median(row["engine_medians_us"]) / base[name]["do_bench_median_us"]
            )
        rows[name] = row
    return rows


def markdown(rows: dict) -> str:
    lines = [
        "| case | engine median us (3 procs) | proc spread % | sample spread % (max) | engine CV % | eager median us | eager CV % | CV ratio eager/engine | do_bench median us | engine/do_bench | graph==eager | deterministic |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        if "engine_medians_us" not in r:
            lines.append(f"| {r['case']} | failed: {r.get('errors')} |")
            continue
        lines.append(
            "| {case} | {meds} | {ps:.3f} | {ss:.3f} | {cv:.3f} | {em:.1f} | {ecv:.2f} | {ratio:.1f}x | {db:.1f} | {edb:.3f} | {ge} | {det} |".format(
                case=r["case"],
                meds=" / ".join(f"{m:.1f}" for m in r["engine_medians_us"]),
                ps=r["engine_process_spread_pct"],
                ss=max(r["engine_sample_spread_pct"]),
                cv=100 * statistics.median(r["engine_cv"]),
                em=r.get("eager_median_us", float("nan")),
                ecv=100 * r.get("eager_cv", float("nan")),
                ratio=r.get("eager_cv_over_engine_cv") or float("nan"),
                db=r.get("do_bench_median_us", float("nan")),
                edb=r.get("engine_over_do_bench", float("nan")),
                ge=all(x == 0 for x in r["graph_vs_eager_max_abs"]),
                det=all(r["deterministic"]),
            )
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "engine-figures")))
    parser.add_argument("--case", action="append", default=None)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--do-bench-rep-ms", type=int, default=500)
    parser.add_argument("--timeout-s", type=float, default=300)
    args = parser.parse_args()
    args.case = args.case or list(DEFAULT_CASES)
    args.out.mkdir(parents=True, exist_ok=True)
    engine_runs = [run_engine(args, args.out, i) for i in range(1, args.processes + 1)]
    try:
        base = baselines(args)
    except Exception as error:
        print(f"[baselines] failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        base = {}
    rows = summarize(args, args.out, engine_runs, base)
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "engine_runs": engine_runs,
        "rows": rows,
    }
    try:
        import torch

        summary["gpu"] = torch.cuda.get_device_name(0)
        summary["torch"] = torch.__version__
    except Exception:
        pass
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    table = markdown(rows)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
