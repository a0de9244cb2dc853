"""Does `fwdasv explain` name an added op, its source line and (GPU) its kernel, on top?

Builds the demo's `tinylm` repository (fwdasv.demo.project) and one commit more that adds
one elementwise op per layer (`x = torch.tanh(x)` after the MLP: aten::tanh, an op the
model never ran before, one kernel per layer), writes an asv project timing one case through
fwdasv's engine (CUDA graphs on a GPU, the host timer on a CPU), runs `python -m fwdasv
explain HEAD~1 HEAD forward.TinyLM.track_latency --case CASE` (3 profiles a side,
interleaved) and checks (summary.json "checks"; exit 0 when all pass): added_on_top (the
first row is aten::tanh, `new`, called once a layer), names_the_line (its source is
tinylm/model.py at the added line), changed_here (it is marked: the commit changed that
file), kernel_under_op (GPU only: an elementwise kernel under it), exit_1 (explain exits
1); summary.json also keeps explain's time line (profiled runs, eager pass, diff). Writes
explain.txt, explain.json, explain.err (progress), summary.json and profiles/ under --out.
Changes no GPU setting.

    python bench/h200/explain_source.py --out "$OUT"                    # the GPU
    python bench/h200/explain_source.py --out /tmp/x --device cpu       # dry run on CPU
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ADDED = "x = torch.tanh(x)  # one added elementwise op per layer"
ANCHOR = 'x = x + (F.silu(h @ layer["w_gate"].t())'
SUITE = "forward.TinyLM.track_latency"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="Directory for every output.")
    parser.add_argument("--work", type=Path, default=None, help="Scratch [default: OUT/work].")
    parser.add_argument("--device", choices=["auto", "cpu"], default="auto")
    parser.add_argument("--case", default="decode_bs8_2k=8*1@2048", help="One case NAME=SPEC.")
    parser.add_argument("--rounds", type=int, default=3, help="Profiles a side.")
    parser.add_argument("--timeout-s", type=int, default=150, help="For the explain command.")
    return parser.parse_args(argv)


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "fwdasv",
        "GIT_AUTHOR_EMAIL": "fwdasv@example.com",
        "GIT_COMMITTER_NAME": "fwdasv",
        "GIT_COMMITTER_EMAIL": "fwdasv@example.com",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


def add_op_commit(repo: Path) -> int:
    """Commit the added op after each layer's MLP; returns its line number in model.py."""
    model = repo / "tinylm" / "model.py"
    lines = model.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(ANCHOR))
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines.insert(at + 1, indent + ADDED)
    model.write_text("\n".join(lines) + "\n")
    git(repo, "commit", "-qam", "Squash each layer's output with tanh")
    return at + 2


def build(work: Path, case: str, device: str) -> tuple[Path, Path, int]:
    """The repository (demo history + the added op) and the asv project; (repo, config, line)."""
    from fwdasv.asv.scaffold import write_torch_project
    from fwdasv.asv.suitespec import torch_suite_source
    from fwdasv.demo.project import build_project

    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    repo = work / "tinylm"
    build_project(repo)
    line = add_op_commit(repo)
    options: dict[str, object] = {"iters": 3, "samples": 3, "warmup_s": 0.1}
    if device == "cpu":
        options |= {"iters": 2, "samples": 2, "warmup_s": 0.0, "env": {"OMP_NUM_THREADS": "1"}}
    suite = torch_suite_source("TinyLM", "tinylm.bench:target", (case,), **options)
    project = write_torch_project(work / "asv", repo, "tinylm", [suite], env_dir=str(work / "env"))
    return repo, project.config_path, line


def checks(report: dict, line: int, code: str, layers: int, gpu: bool, status: int) -> dict:
    top = report["kernels"][0] if report["kernels"] else {}
    source = top.get("source") or {}
    found = {
        "added_on_top": top.get("name") == "aten::tanh"
        and top.get("change") == "new"
        and top.get("calls_after") == layers,
        "names_the_line": source.get("file") == "tinylm/model.py"
        and source.get("line") == line
        and source.get("code") == code,
        "changed_here": top.get("changed_here") is True,
        "exit_1": status == 1,
    }
    if gpu:
        found["kernel_under_op"] = any(
            "elementwise" in kernel["name"] for kernel in top.get("kernels", [])
        )
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = args.work or out / "work"
    started = time.monotonic()
    repo, config, line = build(work, args.case, args.device)
    code = (repo / "tinylm" / "model.py").read_text().splitlines()[line - 1].strip()
    layers = int(
        subprocess.run(
            [sys.executable, "-c", "from tinylm.config import Config; print(Config().num_layers)"],
            cwd=repo,
            capture_output=True,
            text=True,
        ).stdout.strip()
        or 0
    )
    case = args.case.partition("=")[0]
    base = [sys.executable, "-m", "fwdasv", "explain", "HEAD~1", "HEAD", SUITE, "--case", case]
    base += ["--config", str(config), "--rounds", str(args.rounds)]
    base += ["--profile-dir", str(out / "profiles")]
    env = {**os.environ}
    if args.device == "cpu":
        env |= {"CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    # asv resolves HEAD in its own clone of the repository: name the commits instead.
    head = git(repo, "rev-parse", "HEAD").strip()
    parent = git(repo, "rev-parse", "HEAD~1").strip()
    base[4:6] = [parent, head]
    proc = subprocess.run(
        [*base, "--format", "json"],
        cwd=config.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=args.timeout_s,
    )
    (out / "explain.json").write_text(proc.stdout)
    (out / "explain.err").write_text(proc.stderr)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        print(proc.stderr[-3000:])
        print(f"FAIL  explain gave no JSON (exit {proc.returncode})")
        return 2
    # The table, from the same profiles (no re-measuring): --files of one round a side
    # would lose the noise band, so render the JSON's diff instead.
    from fwdasv.analysis.explain import kernel_diff, kernel_diff_format
    from fwdasv.core.kernels import load_summary

    profiles = out / "profiles"
    goods = sorted(profiles.glob(f"good-*/{case}.rank0.kernels.json"))
    bads = sorted(profiles.glob(f"bad-*/{case}.rank0.kernels.json"))
    diff = kernel_diff.diff_rounds(
        [load_summary(p) for p in goods], [load_summary(p) for p in bads]
    )
    changed = git(repo, "diff", "--name-only", parent, head).split()
    diff = kernel_diff.mark_changed(diff, changed)
    table = kernel_diff_format.format_diff(diff, "table", top=12, good=parent[:8], bad=head[:8])
    (out / "explain.txt").write_text(table + "\n")
    print(table)
    gpu = report.get("unit") == "op (GPU)" or not load_summary(bads[0]).is_cpu
    found = checks(report, line, code, layers, gpu, proc.returncode)
    summary = {
        "device": "cuda" if gpu else "cpu",
        "case": args.case,
        "added_line": line,
        "added_code": code,
        "layers": layers,
        "explain_exit": proc.returncode,
        "attribution": load_summary(bads[0]).attribution,
        "times": next(
            (line for line in proc.stderr.splitlines() if line.startswith("time: ")), None
        ),
        "checks": found,
        "wall_s": round(time.monotonic() - started, 1),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for name, ok in found.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print(f"wall {summary['wall_s']} s; attribution: {summary['attribution']}")
    return 0 if all(found.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
