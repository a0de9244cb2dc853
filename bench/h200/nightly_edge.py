"""The night a ~1% regression lands: `fwdasv nightly` reports it confirmed and exits 1.

`gpulm` (verdict_chain.py's model package: fwdasv's decoder with Llama-3-8B-sized layers)
gets a history of `--before` commits that change nothing measurable; `fwdasv init`, `fwdasv
hw machine` and `asv run ALL` measure it (the nights before). Then the newest commit lands:
one more elementwise kernel per layer (a per-head gain on the attention output, by ones),
about +1% of a batch-1 decode. `fwdasv nightly` (no clock locking, no hardware setup)
measures that one commit, finds the step at the head of the history, confirms it by the
interleaved A/B re-measure the same night, and must exit 1 with the finding `confirmed` at
the newest commit. Writes summary.json (exit statuses, the finding before and after the
night, timings, and `ok`) and the commands' logs to --out.

    python bench/h200/nightly_edge.py --out $OUT/edge                # H200: CUDA graphs
    python bench/h200/nightly_edge.py --out /tmp/edge --quick        # CPU dry run (tiny)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MACHINE = "edgebox"
SLOW_SUBJECT = "Scale attention output by a per-head gain"


def _chain():
    """verdict_chain.py beside this file (the model package and its bench file), as a module."""
    spec = importlib.util.spec_from_file_location("verdict_chain", HERE / "verdict_chain.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _env(index: int) -> dict[str, str]:
    stamp = f"2026-11-{index + 1:02d}T12:00:00+00:00"
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": "gpulm",
        "GIT_AUTHOR_EMAIL": "gpulm@example.com",
        "GIT_COMMITTER_NAME": "gpulm",
        "GIT_COMMITTER_EMAIL": "gpulm@example.com",
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
    }


def land_slow_commit(chain, repo: Path, size: str, num_layers: int, index: int) -> str:
    """The newest commit: the gain on (one more elementwise kernel per layer)."""
    (repo / chain.PACKAGE / "bench.py").write_text(
        chain.BENCH.format(gain=True, size=size, num_layers=num_layers)
    )
    chain.git(repo, "add", "-A", env=_env(index))
    chain.git(repo, "commit", "-q", "--no-gpg-sign", "-m", SLOW_SUBJECT, env=_env(index))
    return chain.git(repo, "rev-parse", "HEAD")


def build_history(chain, repo: Path, size: str, num_layers: int, before: int) -> list[str]:
    """`before` commits without the gain; returns their hashes."""
    repo.mkdir(parents=True)
    chain.git(repo, "init", "-q", "-b", "main")
    (repo / chain.PACKAGE).mkdir()
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{chain.PACKAGE}"\nversion = "0.1.0"\ndependencies = []\n\n'
        f'[tool.setuptools]\npackages = ["{chain.PACKAGE}"]\n'
    )
    (repo / chain.PACKAGE / "__init__.py").write_text('"""gpulm."""\n')
    hashes = []
    for index in range(before):
        subject = "Initial model package" if index == 0 else f"Docs: section {index}"
        (repo / chain.PACKAGE / "bench.py").write_text(
            chain.BENCH.format(gain=False, size=size, num_layers=num_layers)
        )
        (repo / "README.md").write_text(f"# gpulm\n\n{subject}\n" * (index + 1))
        chain.git(repo, "add", "-A", env=_env(index))
        chain.git(repo, "commit", "-q", "--no-gpg-sign", "-m", subject, env=_env(index))
        hashes.append(chain.git(repo, "rev-parse", "HEAD"))
    return hashes


def at_newest(found: list[dict], newest: str) -> list[dict]:
    """The latency findings whose first new commit is the newest."""
    return [
        f
        for f in found
        if f.get("after_commit") == newest and str(f.get("benchmark", "")).endswith("_latency")
    ]


def verdict(summary: dict) -> bool:
    """The must-show: nightly exited 1 and the newest commit's finding is confirmed."""
    after = summary.get("after_night") or []
    return summary.get("nightly_exit") == 1 and any(f["status"] == "confirmed" for f in after)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a CPU dry run)")
    parser.add_argument(
        "--before",
        type=int,
        default=8,
        help="commits measured on the nights before (the noise estimate's history; a one-"
        "commit edge needs z >= 15 at 9 commits, 13 at 11)",
    )
    parser.add_argument("--num-layers", type=int, default=4, help="decoder layers (8B-sized)")
    parser.add_argument(
        "--explain", action="store_true", help="let nightly explain the confirmed one (slower)"
    )
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    chain = _chain()
    work = Path(os.environ.get("EDGE_WORK", "/tmp/fwdasv-edge"))
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    size = "tiny" if args.quick else "llama3-8b-layers"
    case = "decode_bs8=8*1@256" if args.quick else "decode_bs1_1k=1*1@1024"
    repo = work / "gpulm"
    started = time.perf_counter()
    hashes = build_history(chain, repo, size, args.num_layers, args.before)
    summary: dict = {"history": hashes, "case": case, "num_layers": args.num_layers}
    fwdasv = [sys.executable, "-m", "fwdasv"]
    target = f"{chain.PACKAGE}.bench:target"
    # --no-check: the target's import at HEAD is what asv's first commit does anyway, and
    # the device call's 5 minutes are short.
    init = [*fwdasv, "init", "--repo", str(repo), "--target", target, "--case", case, "--no-check"]
    code, _ = chain.run(out, "init", [*init, "--dir", str(work / "asv")], 300)
    summary["init_exit"] = code
    config = str(work / "asv" / "asv.conf.json")
    code, _ = chain.run(out, "machine", [*fwdasv, "hw", "machine", "--name", MACHINE], 120)
    summary["machine_exit"] = code
    asv_run = [sys.executable, "-m", "asv", "run", "--config", config, "--record-samples"]
    asv_run += ["--launch-method", "spawn", "--machine", MACHINE, "--show-stderr", "ALL"]
    history_started = time.perf_counter()
    code, _ = chain.run(out, "asv_run_history", asv_run, 600)
    summary.update(history_exit=code, history_s=round(time.perf_counter() - history_started, 1))
    chain.save(out, summary)

    newest = land_slow_commit(chain, repo, size, args.num_layers, args.before)
    summary["newest"] = newest
    night = [*fwdasv, "nightly", "--config", config, "--machine", MACHINE]
    night += [] if args.explain else ["--no-explain"]
    night_started = time.perf_counter()
    code, text = chain.run(out, "nightly", night, 600)
    summary.update(nightly_exit=code, nightly_s=round(time.perf_counter() - night_started, 1))
    summary["nightly_tail"] = text.splitlines()[-25:]
    code, text = chain.run(
        out,
        "regressions_after",
        [*fwdasv, "regressions", "--config", config, "--format", "json"],
        120,
    )
    summary["after_night_exit"] = code
    try:
        found = json.loads(text)["regressions"]
    except (ValueError, KeyError):
        found = []
    summary["after_night"] = at_newest(found, newest)
    summary["other_findings"] = [f for f in found if f not in summary["after_night"]]
    summary["total_s"] = round(time.perf_counter() - started, 1)
    summary["ok"] = verdict(summary)
    chain.save(out, summary)
    brief = {
        k: summary[k]
        for k in ("init_exit", "history_exit", "history_s", "nightly_exit", "nightly_s", "ok")
    }
    for f in summary["after_night"]:
        confirmation = (f.get("verdict") or {}).get("confirmation") or {}
        brief.setdefault("newest_commit", []).append(
            {
                "status": f["status"],
                "percent": round(f["percent"], 3),
                "noise_pct": round(f["noise_pct"], 4),
                "z": round(f["z"], 1),
                "z_threshold": round(f["z_threshold"], 1),
                "edge": f.get("edge"),
                "re_measured": f.get("re_measured"),
                "confirmation": confirmation.get("summary"),
            }
        )
    brief["total_s"] = summary["total_s"]
    print(json.dumps(brief, indent=2))
    print("[edge] OK: the night it landed, confirmed, exit 1" if summary["ok"] else "[edge] MISSED")


if __name__ == "__main__":
    main()
