"""Pipeline figures on two GPUs: fwdasv's 2-stage pipeline vs its single-GPU engine, and vLLM's.

In one run on the same two GPUs:

1. fwdasv's pipeline bench (`fwdasv forward --pipeline-stages 2`, torchrun and
   NCCL) on the decoder with Llama-3-8B-sized layers, for the given cases;
2. fwdasv's single-GPU engine on the same model and cases (the ratio, and the
   per-stage times and stage-to-stage gaps that explain it);
3. when vLLM 0.33 is importable ($VLLM_OFFLINE_HOME from the offline bundle),
   vLLM's own pipeline bench (`--pipeline-parallel-size 2` under torchrun) on
   its Qwen3-0.6B configuration, and fwdasv's pipeline on the same case shapes,
   so clock uncertainty and sample spread stand side by side.

Writes raw JSON and logs plus summary.json / summary.md under --out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET = "fwdasv.targets.decoder:llama3_8b_layers"
CASES = ("decode_bs32_8k=32*1@8192", "prefill_2k=2048")
VLLM_CASES = ("decode=32*1@1024", "prefill=512")


def run(argv: list[str], log: Path, timeout_s: float) -> int:
    begin = time.perf_counter()
    print(f"$ {' '.join(argv)}", flush=True)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        output, code = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as error:
        output, code = f"{error}\n{error.stdout or ''}{error.stderr or ''}", 124
    log.write_text(output)
    lines = [line for line in output.splitlines() if "[forward]" in line or "Error" in line]
    print("\n".join(lines[-12:]), flush=True)
    print(f"  -> exit {code} in {time.perf_counter() - begin:.0f} s", flush=True)
    return code


def engine_args(target: str, cases: tuple[str, ...], iters: int, samples: int) -> list[str]:
    args = ["--target", target, "--iters", str(iters), "--samples", str(samples)]
    for case in cases:
        args += ["--case", case]
    return args


def stage_breakdown(entry: dict) -> dict:
    """Median per-stage time and the gap from stage s's end to stage s+1's start."""
    timelines = sorted(
        (r["pipeline_timeline"] for r in entry["ranks"] if "pipeline_timeline" in r),
        key=lambda t: t["stage"],
    )
    margin = entry["ranks"][0].get("pipeline_warmup_microbatches", 0)
    out: dict = {}
    for t in timelines:
        starts, ends = (
            t["starts_us"][margin : -margin or None],
            t["ends_us"][margin : -margin or None],
        )
        out[f"stage{t['stage']}_us"] = statistics.median(
            e - s for s, e in zip(starts, ends, strict=True)
        )
    for a, b in itertools.pairwise(timelines):
        ends = a["ends_us"][margin : -margin or None]
        starts = b["starts_us"][margin : -margin or None]
        out[f"gap{a['stage']}{b['stage']}_us"] = statistics.median(
            s - e for e, s in zip(ends, starts, strict=True)
        )
    return out


def summarize_file(path: Path) -> dict:
    if not path.is_file():
        return {"error": f"no {path.name}"}
    data = json.loads(path.read_text())
    rows = {}
    for entry in data:
        if entry.get("error"):
            rows[entry["case"]] = {"error": entry["error"]}
            continue
        rank0 = entry["ranks"][0]
        latency = rank0["latency_us"]
        row = {
            "median_us": latency["median"],
            "sample_spread_pct": latency["sample_spread_pct"],
            "cv_pct": 100 * latency["std"] / latency["mean"],
            "count": latency["count"],
            "timer": latency["timer"],
            "clock_uncertainty_us": rank0.get("clock_uncertainty_us"),
            "finite": all(r.get("finite") for r in entry["ranks"]),
        }
        pipeline = [c for r in entry["ranks"] for c in (r.get("pipeline_vs_eager") or {}).values()]
        if pipeline:
            row["pipeline_vs_eager_max_abs"] = max(c["max_abs"] for c in pipeline)
        graph = [r["graph_vs_eager"] for r in entry["ranks"] if r.get("graph_vs_eager")]
        if graph:
            row["graph_vs_eager_max_abs"] = max(c["max_abs"] for c in graph)
        if pipeline:
            row.update(stage_breakdown(entry))
        rows[entry["case"]] = row
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "pipeline-figures")))
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--timeout-s", type=float, default=300)
    parser.add_argument("--skip-vllm", action="store_true")
    parser.add_argument(
        "--target", default=TARGET, help="engine target (the tiny decoder for a CPU dry run)"
    )
    parser.add_argument("--case", action="append", default=None, help="cases (default: CASES)")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    cases = tuple(args.case or CASES)
    common = engine_args(args.target, cases, args.iters, args.samples)
    codes = {}
    codes["fwdasv_pp2"] = run(
        [
            py,
            "-m",
            "fwdasv",
            "forward",
            *common,
            "--pipeline-stages",
            "2",
            "--output-json",
            str(out / "fwdasv_pp2.json"),
        ],
        out / "fwdasv_pp2.log",
        args.timeout_s,
    )
    codes["fwdasv_single"] = run(
        [py, "-m", "fwdasv.engine", *common, "--output-json", str(out / "fwdasv_single.json")],
        out / "fwdasv_single.log",
        args.timeout_s,
    )
    home = os.environ.get("VLLM_OFFLINE_HOME")
    if home and not args.skip_vllm:
        vllm = [
            py,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            f"{home}/fwd.py",
            "--model",
            f"{home}/models/qwen3-0.6b",
            "--skip-tokenizer-init",
            "--kv-len-jitter",
            "0",
            "--pipeline-parallel-size",
            "2",
            "--output-json",
            str(out / "vllm_pp2.json"),
        ]
        for case in VLLM_CASES:
            vllm += ["--case", case]
        codes["vllm_pp2"] = run(vllm, out / "vllm_pp2.log", args.timeout_s)
        same = engine_args(args.target, VLLM_CASES, args.iters, args.samples)
        codes["fwdasv_pp2_vllm_cases"] = run(
            [
                py,
                "-m",
                "fwdasv",
                "forward",
                *same,
                "--pipeline-stages",
                "2",
                "--output-json",
                str(out / "fwdasv_pp2_vllm_cases.json"),
            ],
            out / "fwdasv_pp2_vllm_cases.log",
            args.timeout_s,
        )
    summary = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "exit_codes": codes}
    for name in ("fwdasv_pp2", "fwdasv_single", "vllm_pp2", "fwdasv_pp2_vllm_cases"):
        summary[name] = summarize_file(out / f"{name}.json")
    ratios = {}
    for case in (c.split("=")[0] for c in cases):
        pp, single = summary["fwdasv_pp2"].get(case, {}), summary["fwdasv_single"].get(case, {})
        if "median_us" in pp and "median_us" in single:
            ratios[case] = pp["median_us"] / single["median_us"]
    summary["pp_over_single"] = ratios
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    lines = [
        "| run | case | median us | sample spread % | CV % | clock unc. us | pipeline==eager | stages / gaps us |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ("fwdasv_pp2", "fwdasv_single", "vllm_pp2", "fwdasv_pp2_vllm_cases"):
        rows = summary[name]
        if "error" in rows and isinstance(rows["error"], str):
            lines.append(f"| {name} | - | {rows['error']} |")
            continue
        for case, row in rows.items():
            if "error" in row:
                lines.append(f"| {name} | {case} | failed: {row['error']} |")
                continue
            stages = ", ".join(
                f"{k}={v:.1f}" for k, v in row.items() if k.startswith(("stage", "gap"))
            )
            unc = row.get("clock_uncertainty_us")
            lines.append(
                f"| {name} | {case} | {row['median_us']:.1f} | {row['sample_spread_pct']:.2f} | {row['cv_pct']:.2f} | "
                f"{'' if unc is None else f'{unc:.1f}'} | {row.get('pipeline_vs_eager_max_abs', '')} | {stages} |"
            )
    lines.append("")
    lines.append("PP/single: " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
