"""Kernel attribution on one GPU: does the diff put an added kernel on top?

Times and profiles one case of the bundled decoder (Llama-3-8B-sized layers) in this
process, as the engine does with --profile-dir, three times: GOOD (the plain decoder), BAD
(plus one small extra kernel per layer: `torch.roll` of the attention output, a kernel the
decoder never runs otherwise) and CONTROL (GOOD again, for the noise floor of a diff).
Checks (summary.json "checks"; exit 0 when all pass): bad_top_row_is_added (the top row of
GOOD -> BAD is the extra op's kernel, calls +num_layers), bad_top_row_share_ge_50 and
explained_top5_ge_50, control_below_added (|GOOD -> CONTROL| below half the added kernel's
time), restore_excluded (what each replay leaves out is the state's copies), engine_cli
(`python -m fwdasv.engine --profile-dir` writes a loadable kernels.json). Writes good/, bad/,
control/, explain.txt/.md/.json, control.json, engine/, summary.json under --out, each as
its step ends. `--device cpu`: the tiny decoder, host-timed (every step, noisy figures).

    python bench/h200/measure_explain.py --out /tmp/explain-figures [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CASE = "decode_bs1_1k=1*1@1024"
DEFAULT_SIZE = {"cuda": "llama3-8b-layers", "cpu": "tiny"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="Directory for every output.")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--case", default=DEFAULT_CASE, help="One case, NAME=REQS.")
    parser.add_argument(
        "--size", help="Decoder size (fwdasv.targets.decoder.SIZES); default by device."
    )
    parser.add_argument("--num-layers", type=int, help="Layers of the decoder (default: size's).")
    parser.add_argument("--replays", type=int, default=3, help="Profiled replays per variant.")
    parser.add_argument("--iters", type=int, help="Timed replays per sample (cuda 20, cpu 3).")
    parser.add_argument("--samples", type=int, help="Samples (cuda 5, cpu 2).")
    parser.add_argument("--warmup-s", type=float, help="Seconds of warmup (cuda 1.0, cpu 0.05).")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="Engine CLI subprocess.")
    parser.add_argument("--skip-engine-cli", action="store_true")
    args = parser.parse_args(argv)
    # Absolute: the engine CLI subprocess runs in the repository root.
    args.out = args.out.resolve()
    cpu = args.device == "cpu"
    args.size = args.size or DEFAULT_SIZE[args.device]
    args.iters = args.iters or (3 if cpu else 20)
    args.samples = args.samples or (2 if cpu else 5)
    args.warmup_s = args.warmup_s if args.warmup_s is not None else (0.05 if cpu else 1.0)
    args.dtype = "float32" if cpu else "bfloat16"
    return args


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, allow_nan=True) + "\n")


def extra_op(attended: Any) -> Any:
    """The BAD variant's one extra kernel per layer."""
    import torch

    return torch.roll(attended, shifts=1, dims=-1)


def build_targets(args: argparse.Namespace) -> tuple[Any, Any]:
    """GOOD (the bundled decoder) and BAD (the same weights, `extra_op` after each attention)."""
    from fwdasv.targets.decoder import SIZES, DecoderTarget

    class ExtraKernelDecoder(DecoderTarget):
        def _attention(self, *args: Any, **kwargs: Any) -> Any:
            return extra_op(super()._attention(*args, **kwargs))

    config = SIZES[args.size]
    if args.num_layers:
        config = replace(config, num_layers=args.num_layers)
    good = DecoderTarget(config, args.device, args.dtype, name=f"decoder-{args.size}")
    bad = ExtraKernelDecoder(config, args.device, args.dtype, name=f"decoder-{args.size}+roll")
    return good, bad


def added_rows(args: argparse.Namespace, hidden: int) -> dict[str, int]:
    """Rows (GPU kernels or CPU ops) one call of the extra op produces, with their counts,
    from a profile of the op alone."""
    import torch
    from torch.profiler import ProfilerActivity

    from fwdasv.engine.profile import chrome_trace
    from fwdasv.engine.profile_summary import activity_name, gpu_activities

    cuda = args.device == "cuda"
    sample = torch.randn(4, hidden, device=args.device).to(getattr(torch, args.dtype))
    extra_op(sample)  # lazy init outside the profile
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    if cuda:
        torch.cuda.synchronize()
    with torch.profiler.profile(activities=activities) as prof:
        extra_op(sample)
        if cuda:
            torch.cuda.synchronize()
    if cuda:
        names = [
            activity_name(e) for e in gpu_activities(json.loads(chrome_trace(prof))["traceEvents"])
        ]
    else:
        names = [e.name for e in prof.events() if e.name.startswith("aten::")]
    return {name: names.count(name) for name in sorted(set(names))}


def measure_variant(
    args: argparse.Namespace, target: Any, label: str, case: Any
) -> tuple[dict[str, Any], Any]:
    """Time the case (the engine's method, so clocks are warm), then profile it."""
    import torch

    from fwdasv.core.kernels import load_summary
    from fwdasv.engine.capture import StateSnapshot, bench_forward
    from fwdasv.engine.config import BenchOptions
    from fwdasv.engine.profile import ProfileOptions, profile_case

    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    options = BenchOptions(
        iters=args.iters,
        samples=args.samples,
        warmup_s=args.warmup_s,
        timer="graph" if args.device == "cuda" else "host",
    )
    prepared = target.prepare(case, 0)
    snapshot = StateSnapshot(prepared.state)
    begin = time.perf_counter()
    rank = bench_forward(prepared, options, device)
    block = profile_case(
        prepared, snapshot, device, ProfileOptions(args.replays), args.out / label, case.name
    )
    rank = replace(rank, profile=block)
    write_json(
        args.out / label / "rank.json",
        {**rank.to_json(), "wall_s": time.perf_counter() - begin},
    )
    print(
        f"[{label}] median {rank.latency.median:.1f} us, busy {block.busy_us:.1f} us, "
        f"{block.activities} activities per forward",
        flush=True,
    )
    return rank, load_summary(block.summary)


def restore_check(summary: Any) -> dict[str, Any]:
    skipped = summary.pre_forward_kernels or ()
    expected = summary.restore_activities
    # A restore is copies: copy_ kernels (direct_copy_kernel) and memcpys ("Memcpy DtoD").
    copies = all(
        any(word in f"{row.name} {row.example}".lower() for word in ("copy", "memcpy"))
        for row in skipped
    )
    calls = sum(row.calls for row in skipped)
    return {
        "pre_forward_us": summary.pre_forward_us,
        "skipped": [(row.name, row.calls) for row in skipped],
        "skipped_calls": calls,
        "restore_activities": expected,
        "ok": bool(skipped) and copies and (expected is None or calls == expected),
    }


def engine_cli(args: argparse.Namespace, case_text: str) -> dict[str, Any]:
    """The wiring: `python -m fwdasv.engine --profile-dir`, GOOD, one subprocess."""
    out = args.out / "engine"
    out.mkdir(parents=True, exist_ok=True)
    factory = args.size.replace("-", "_").replace(".", "_")
    argv = [
        sys.executable,
        "-m",
        "fwdasv.engine",
        "--target",
        f"fwdasv.targets.decoder:{factory}",
        "--case",
        case_text,
        "--device",
        args.device,
        "--iters",
        str(args.iters),
        "--samples",
        str(args.samples),
        "--warmup-s",
        str(args.warmup_s),
        "--profile-dir",
        str(out / "profiles"),
        "--output-json",
        str(out / "results.json"),
    ]
    if args.num_layers:
        argv += ["--target-option", f"num_layers={args.num_layers}"]
    path = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=args.timeout_s, env=env, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {args.timeout_s} s"}
    (out / "engine.log").write_text(proc.stdout + proc.stderr)
    print(proc.stdout, end="", flush=True)
    result: dict[str, Any] = {"returncode": proc.returncode}
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr, flush=True)
        return {**result, "ok": False}
    from fwdasv.core import results
    from fwdasv.core.kernels import load_summary

    try:
        block = results.load(out / "results.json")[0].ranks[0].profile
        result["profile"] = {k: v for k, v in block.to_json().items() if k != "top_kernels"}
        result["ok"] = bool(load_summary(block.summary).kernels)
    except Exception as error:  # reported as a failed check, with what went wrong
        result.update(ok=False, error=f"{type(error).__name__}: {error}")
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import torch

    from fwdasv.analysis.explain.kernel_diff import diff_summaries
    from fwdasv.analysis.explain.kernel_diff_format import format_diff
    from fwdasv.core.cases import parse_case

    args.out.mkdir(parents=True, exist_ok=True)
    case = parse_case(args.case)
    summary: dict[str, Any] = {
        "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        "torch": torch.__version__,
        "case": args.case,
        "size": args.size,
        "replays": args.replays,
    }
    if args.device == "cuda":
        torch.cuda.set_device(0)
    with torch.inference_mode():
        good, bad = build_targets(args)
        summary["num_layers"] = len(good.layers)
        summary["added_rows"] = added = added_rows(args, good.config.hidden_size)
        write_json(args.out / "summary.json", summary)
        ranks, profiles = {}, {}
        for label, target in (("good", good), ("bad", bad), ("control", good)):
            try:
                ranks[label], profiles[label] = measure_variant(args, target, label, case)
            except Exception as error:  # the reason goes into summary.json, not only a traceback
                summary["error"] = f"{label}: {type(error).__name__}: {error}"
                write_json(args.out / "summary.json", {**summary, "ok": False})
                print(f"FAIL  {summary['error']}", file=sys.stderr, flush=True)
                raise
        del good, bad
    summary["latency_us"] = {k: r.latency.median for k, r in ranks.items()}
    diff = diff_summaries(profiles["good"], profiles["bad"])
    control = diff_summaries(profiles["good"], profiles["control"])
    (args.out / "explain.txt").write_text(format_diff(diff, "table") + "\n")
    (args.out / "explain.md").write_text(format_diff(diff, "markdown") + "\n")
    (args.out / "explain.json").write_text(format_diff(diff, "json") + "\n")
    (args.out / "control.json").write_text(format_diff(control, "json", good="GOOD", bad="CONTROL"))
    print(format_diff(diff, "table", top=15), flush=True)
    top = diff.kernels[0]
    summary["explain"] = {
        "top_row": top.name,
        "top_row_status": top.status,
        "top_row_delta_us": top.delta_us,
        "top_row_share_pct": top.share_pct,
        "top_row_calls": [top.calls_before, top.calls_after],
        "total_delta_us": diff.total_delta_us,
        "explained_top5_pct": diff.explained_top5_pct,
        "top5": list(diff.top5),
        "latency_delta_us": summary["latency_us"]["bad"] - summary["latency_us"]["good"],
    }
    summary["control"] = {
        "total_delta_us": control.total_delta_us,
        "largest_row": control.kernels[0].to_json() if control.kernels else None,
        "latency_delta_us": summary["latency_us"]["control"] - summary["latency_us"]["good"],
    }
    summary["restore"] = restore_check(profiles["good"])
    layers = summary["num_layers"]
    checks = {
        "bad_top_row_is_added": top.name in added
        and top.calls_after - top.calls_before == layers * added[top.name],
        "bad_top_row_share_ge_50": top.share_pct >= 50,
        "explained_top5_ge_50": diff.explained_top5_pct >= 50,
        "control_below_added": abs(control.total_delta_us) < 0.5 * max(top.delta_us, 0.0),
        "restore_excluded": summary["restore"]["ok"],
    }
    write_json(args.out / "summary.json", {**summary, "checks": checks})
    if not args.skip_engine_cli:
        summary["engine_cli"] = engine_cli(args, args.case)
        checks["engine_cli"] = summary["engine_cli"]["ok"]
    summary["checks"] = checks
    summary["ok"] = all(checks.values())
    write_json(args.out / "summary.json", summary)
    for name, passed in checks.items():
        print(f"{'PASS' if passed else 'FAIL'}  {name}", flush=True)
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
