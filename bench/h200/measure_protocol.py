"""Timing protocols side by side on one GPU: `steady` against duty-cycled and long blocks.

On a shared H200 the heavy cases of the 8B-layer decoder run at the 700 W power cap, with
sample spreads of 2-5.7% (0.08% on decode_bs1_1k). In ONE run this times decode_bs1_1k,
decode_bs32_8k, prefill_2k and mix on `fwdasv.targets.decoder:llama3_8b_layers` with each
protocol of `fwdasv.engine.protocol`, each in `--rounds` fresh processes, interleaved (round
r starts with the r-th protocol), and records per protocol and case: every process's sample
spread (goal <= 1%, SPREAD_GOAL_PCT), the range of the process medians (goal <= 0.3%), the
GPU telemetry of every block (SM clock, % of blocks capped, correlation with the clock) and
each process's wall time. `--vllm-model DIR` adds vLLM's `bench forward` on the same cases
once per round. Every process has a timeout; summary.json / summary.md are rewritten after
each step; none starts once `--deadline-s` would be passed (about 5.5 minutes by default).

    python bench/h200/measure_protocol.py --out /tmp/protocol [--vllm-model DIR --vllm-entry module]
    python bench/h200/measure_protocol.py --out /tmp/p --device cpu --quick   # dry run, CPU
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fwdasv.core import results  # noqa: E402
from fwdasv.core.numbers import finite_json  # noqa: E402
from fwdasv.engine.protocol import PROTOCOLS  # noqa: E402

CASES = (
    "decode_bs1_1k=1*1@1024",
    "decode_bs32_8k=32*1@8192",
    "prefill_2k=2048",
    "mix=2048,32*1@4096",
)
HEAVY = ("decode_bs32_8k", "prefill_2k", "mix")
TARGET = "fwdasv.targets.decoder:llama3_8b_layers"
QUICK_CASES = ("decode_bs4=4*1@64", "prefill_32=32")
QUICK_TARGET = "fwdasv.targets.decoder:tiny"
SPREAD_GOAL_PCT = 1.0
PROCESS_RANGE_GOAL_PCT = 0.3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--rounds", type=int, default=3, help="Fresh processes per protocol.")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--target", default=None)
    parser.add_argument("--case", action="append", default=None)
    parser.add_argument("--timeout-s", type=float, default=180.0, help="Per process.")
    parser.add_argument("--deadline-s", type=float, default=345.0, help="Whole run.")
    parser.add_argument(
        "--quick", action="store_true", help="Dry run: tiny target and cases, 1 round, no warmup."
    )
    parser.add_argument("--vllm-model", default=None, help="Also run vLLM's bench on this model.")
    parser.add_argument("--vllm-entry", choices=("cli", "module"), default="cli")
    parser.add_argument("--vllm-max-model-len", type=int, default=8192)
    parser.add_argument(
        "--vllm-extra", default="", help="Extra vLLM arguments, one string (shlex split)."
    )
    args = parser.parse_args(argv)
    args.protocols = [p for p in args.protocols.split(",") if p]
    unknown = [p for p in args.protocols if p not in PROTOCOLS]
    if unknown:
        parser.error(f"unknown protocol(s) {unknown}; known: {', '.join(PROTOCOLS)}")
    if args.quick:
        args.rounds, args.iters, args.samples, args.warmup_s = 1, 3, 2, 0.0
        args.target = args.target or QUICK_TARGET
        args.case = args.case or list(QUICK_CASES)
    args.target = args.target or TARGET
    args.case = args.case or list(CASES)
    return args


# --- one step -------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *([path] if path else [])]),
        "PYTHONUNBUFFERED": "1",
    }


def run_engine(args: argparse.Namespace, protocol: str, round_index: int) -> dict[str, Any]:
    stem = f"r{round_index}-{protocol}"
    path = args.out / f"{stem}.json"
    argv = [sys.executable, "-m", "fwdasv.engine", "--target", args.target]
    argv += ["--device", args.device, "--protocol", protocol, "--iters", str(args.iters)]
    argv += ["--samples", str(args.samples), "--warmup-s", str(args.warmup_s)]
    argv += ["--output-json", str(path)]
    for case in args.case:
        argv += ["--case", case]
    step: dict[str, Any] = {"kind": "engine", "protocol": protocol, "round": round_index}
    begin = time.perf_counter()
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=args.timeout_s, env=child_env()
        )
        (args.out / f"{stem}.log").write_text(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}")
        print(proc.stdout, end="", flush=True)
        step["returncode"] = proc.returncode
        if proc.returncode not in (0, 3):
            step["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    except subprocess.TimeoutExpired:
        step["returncode"] = None
        step["error"] = f"timed out after {args.timeout_s:g} s"
    step["wall_s"] = round(time.perf_counter() - begin, 2)
    step["cases"] = read_cases(path, args.samples)
    return step


def run_vllm(args: argparse.Namespace, round_index: int) -> dict[str, Any]:
    from fwdasv.backends import RunConfig, launch_bench
    from fwdasv.core.cases import parse_case

    step: dict[str, Any] = {"kind": "vllm", "protocol": "vllm", "round": round_index}
    config = RunConfig(
        backend="vllm",
        model=args.vllm_model,
        cases=tuple(parse_case(text) for text in args.case),
        iters=args.iters,
        samples=args.samples,
        max_model_len=args.vllm_max_model_len,
        extra_args=tuple(shlex.split(args.vllm_extra)),
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        timeout_s=args.timeout_s,
        entry=args.vllm_entry,
    )
    begin = time.perf_counter()
    workdir = args.out / f"vllm-r{round_index}"
    try:
        outcome = launch_bench(config, workdir, echo=None, tag="bench")
        step["returncode"] = 0
        step["cases"] = {r.case: case_figures(r, args.samples) for r in outcome.results}
    except Exception as error:  # recorded; the run goes on
        step["returncode"] = None
        step["error"] = (
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        )
        step["cases"] = read_cases(workdir / "bench.json", args.samples)
    step["wall_s"] = round(time.perf_counter() - begin, 2)
    return step


def read_cases(path: Path, samples: int) -> dict[str, Any]:
    try:
        return {r.case: case_figures(r, samples) for r in results.load(path)}
    except results.ResultsError as error:
        return {"_error": str(error)}


def case_figures(result: results.CaseResult, samples: int) -> dict[str, Any]:
    """One process's figures for one case."""
    if not result.ok:
        return {"error": result.error}
    latency = result.latency
    medians = latency.block_medians(samples)
    figures: dict[str, Any] = {
        "median_us": latency.median,
        "spread_pct": latency.sample_spread_pct,
        "refused": list(result.refused),
        "iters_per_block": latency.count // samples,
    }
    rank = result.ranks[0]
    telemetry = rank.telemetry
    for key in ("sm_clock_min_mhz", "sm_clock_median_mhz", "power_capped_pct"):
        figures[key] = getattr(telemetry, key, None)
    figures["thermal_capped_pct"] = getattr(telemetry, "thermal_capped_pct", None)
    clocks = [r.sm_clock_mhz for r in (telemetry.log or ())] if telemetry is not None else []
    figures["block_medians_us"] = medians
    figures["block_sm_clock_mhz"] = clocks
    figures["clock_corr"] = correlation(medians, clocks)
    figures["protocol"] = None if rank.protocol is None else rank.protocol.to_json()
    return figures


def correlation(xs: list[float], ys: list[Any]) -> float | None:
    pairs = [(x, y) for x, y in zip(xs, ys, strict=False) if y is not None]
    if len(pairs) < 3:
        return None
    a = [p[0] for p in pairs]
    b = [float(p[1]) for p in pairs]
    if statistics.pstdev(a) == 0 or statistics.pstdev(b) == 0:
        return None
    return round(statistics.correlation(a, b), 3)


# --- the summary ----------------------------------------------------------------------


def summarize(steps: list[dict[str, Any]], cases: list[str]) -> dict[str, Any]:
    names = [text.partition("=")[0] for text in cases]
    protocols = list(dict.fromkeys(s["protocol"] for s in steps))
    table: dict[str, dict[str, Any]] = {}
    for protocol in protocols:
        runs = [s for s in steps if s["protocol"] == protocol]
        per_case = {}
        for name in names:
            figures = [
                r["cases"][name]
                for r in runs
                if isinstance(r.get("cases"), dict)
                and name in r["cases"]
                and "median_us" in r["cases"][name]
            ]
            medians = [f["median_us"] for f in figures]
            spreads = [f["spread_pct"] for f in figures]
            middle = statistics.median(medians) if medians else None
            per_case[name] = {
                "processes": len(figures),
                "medians_us": medians,
                "spreads_pct": spreads,
                "spread_median_pct": statistics.median(spreads) if spreads else None,
                "spread_max_pct": max(spreads) if spreads else None,
                "process_range_pct": 100 * (max(medians) - min(medians)) / middle
                if len(medians) > 1 and middle
                else None,
                "median_us": middle,
                "sm_clock_min_mhz": _least([f.get("sm_clock_min_mhz") for f in figures]),
                "sm_clock_median_mhz": _middle([f.get("sm_clock_median_mhz") for f in figures]),
                "power_capped_pct": _middle([f.get("power_capped_pct") for f in figures]),
                "clock_corr": _middle([f.get("clock_corr") for f in figures]),
                "refused": sorted({r for f in figures for r in f.get("refused", [])}),
            }
        table[protocol] = {
            "cases": per_case,
            "wall_s": [r.get("wall_s") for r in runs],
            "errors": [r["error"] for r in runs if r.get("error")],
            "meets_goals": meets_goals(per_case),
        }
    return {"protocols": table}


def _least(values: list[Any]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def _middle(values: list[Any]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def meets_goals(per_case: dict[str, dict[str, Any]]) -> bool | None:
    """Spread <= 1% in every process on the heavy cases, process medians within 0.3%."""
    heavy = [per_case[name] for name in HEAVY if name in per_case]
    if not heavy or any(c["processes"] < 2 for c in heavy):
        return None
    return all(
        c["spread_max_pct"] <= SPREAD_GOAL_PCT and c["process_range_pct"] <= PROCESS_RANGE_GOAL_PCT
        for c in heavy
    )


def _fmt(value: Any, spec: str = ".2f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return format(value, spec)


def markdown(summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [
        f"# Timing protocols side by side ({meta.get('gpu') or meta['device']})",
        "",
        f"{meta['target']}, iters {meta['iters']} x samples {meta['samples']}, warmup "
        f"{meta['warmup_s']} s, {meta['rounds']} fresh process(es) per protocol, interleaved. "
        f"Goals: spread <= {SPREAD_GOAL_PCT}% on {', '.join(HEAVY)}, process medians within "
        f"{PROCESS_RANGE_GOAL_PCT}%.",
        "",
        "| protocol | case | procs | median us | spread med / max % | process range % "
        "| SM MHz min / med | power-capped % | corr(latency, clock) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for protocol, data in summary["protocols"].items():
        for name, c in data["cases"].items():
            lines.append(
                f"| {protocol} | {name} | {c['processes']} | {_fmt(c['median_us'], '.1f')} | "
                f"{_fmt(c['spread_median_pct'])} / {_fmt(c['spread_max_pct'])} | "
                f"{_fmt(c['process_range_pct'], '.3f')} | {_fmt(c['sm_clock_min_mhz'], '.0f')} / "
                f"{_fmt(c['sm_clock_median_mhz'], '.0f')} | {_fmt(c['power_capped_pct'], '.0f')} | "
                f"{_fmt(c['clock_corr'])} |"
            )
    lines += [
        "",
        "| protocol | wall s per process | meets the goals | errors |",
        "|---|---|---|---|",
    ]
    for protocol, data in summary["protocols"].items():
        walls = ", ".join(_fmt(w, ".0f") for w in data["wall_s"])
        verdict = {True: "yes", False: "no", None: "too few processes"}[data["meets_goals"]]
        lines.append(f"| {protocol} | {walls} | {verdict} | {'; '.join(data['errors']) or '-'} |")
    return "\n".join(lines) + "\n"


def machine(device: str) -> dict[str, Any]:
    if not device.startswith("cuda"):
        return {}
    try:
        from fwdasv.hw.nvml import read_inventory

        inventory = read_inventory()
        gpu = inventory.gpus[0]
        return {
            "gpu": gpu.name,
            "driver": inventory.driver_version,
            "power_limit_w": gpu.power_limit_w,
            "sm_clock_max_mhz": gpu.sm_clock_max_mhz,
        }
    except Exception as error:  # telemetry of the machine is a nicety here
        return {"machine_error": str(error)}


def write_outputs(args: argparse.Namespace, meta: dict[str, Any], steps: list) -> str:
    summary = summarize(steps, args.case)
    document = {"meta": meta, "summary": summary, "steps": steps}
    tmp = args.out / "summary.json.tmp"
    tmp.write_text(json.dumps(finite_json(document), indent=2) + "\n")
    os.replace(tmp, args.out / "summary.json")
    text = markdown(summary, meta)
    (args.out / "summary.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    meta = {
        "target": args.target,
        "cases": args.case,
        "iters": args.iters,
        "samples": args.samples,
        "warmup_s": args.warmup_s,
        "rounds": args.rounds,
        "device": args.device,
        "protocols": args.protocols,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **machine(args.device),
    }
    order = [*args.protocols, *(["vllm"] if args.vllm_model else [])]
    steps: list[dict[str, Any]] = []
    walls: dict[str, list[float]] = {}
    for round_index in range(args.rounds):
        shift = round_index % len(order)
        for protocol in order[shift:] + order[:shift]:
            expected = statistics.median(walls[protocol]) if walls.get(protocol) else 60.0
            if time.monotonic() - began + expected > args.deadline_s:
                print(f"[protocol] deadline: skipping round {round_index} {protocol}", flush=True)
                steps.append(
                    {"protocol": protocol, "round": round_index, "skipped": "deadline", "cases": {}}
                )
                continue
            print(f"[protocol] round {round_index}: {protocol}", flush=True)
            try:
                step = (
                    run_vllm(args, round_index)
                    if protocol == "vllm"
                    else run_engine(args, protocol, round_index)
                )
            except Exception as error:  # one step's failure never ends the run
                step = {
                    "protocol": protocol,
                    "round": round_index,
                    "error": f"{type(error).__name__}: {error}",
                    "traceback": traceback.format_exc(),
                    "cases": {},
                }
            steps.append(step)
            if step.get("wall_s"):
                walls.setdefault(protocol, []).append(step["wall_s"])
            write_outputs(args, meta, steps)
    meta["elapsed_s"] = round(time.monotonic() - began, 1)
    print(write_outputs(args, meta, steps), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
