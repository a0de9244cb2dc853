"""Per-commit cost of an asv run over vLLM commits: install, startup phases, measuring.

    python bench/h200/vllm_cost_table.py --project DIR --logs LOGDIR [--suite Qwen3_0_6B] [--json OUT]

Reads what the run left: the install log of the compiled-base mode
(`DIR/.fwdasv-vllm/installs.jsonl`: tree build or cache hit, seconds), the
bench logs the suites kept (`LOGDIR/<suite>-<commit>-*/launch0.log`, with
`[phase]` lines when FWDASV_VLLM_ENTRY=phases) and asv's result files (the
setup_cache duration, i.e. the bench process as asv saw it, and the summed
durations of the benchmarks that read it: asv's own per-benchmark cost).
Prints a markdown table, one row per commit, oldest first; refused commits
show their status.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fwdasv.backends.vllm_phases import parse_phases

PHASES = ("import_torch", "import_vllm", "config", "engine_total", "warm_up", "bench_main")


def installs(project: Path) -> dict[str, dict]:
    path = project / ".fwdasv-vllm" / "installs.jsonl"
    found: dict[str, dict] = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        entry = json.loads(line)
        found.setdefault(entry["commit"], entry)  # the first install of each commit
    return found


def phases(logs: Path, suite: str, commit: str) -> dict[str, float]:
    runs = sorted(logs.glob(f"{suite}-{commit[:8]}-*/launch0.log"))
    if not runs:
        return {}
    got = parse_phases(runs[0].read_text(errors="replace").splitlines())
    got["measuring"] = sum(v for k, v in got.items() if k.startswith("case:"))
    return got


def results(project: Path, suite: str) -> dict[str, dict]:
    found = {}
    for path in (project / "results").glob("*/*.json"):
        if path.name in ("machine.json", "benchmarks.json"):
            continue
        data = json.loads(path.read_text())
        columns = data.get("result_columns", [])
        if "duration" not in columns:
            continue
        at = columns.index("duration")
        mine = {k: v for k, v in data["results"].items() if f".{suite}." in k}
        values = [v[0] if k.endswith("track_latency") else None for k, v in mine.items()]
        setup = sum(v for k, v in data.get("durations", {}).items() if "setup_cache" in k)
        benchmarks = sum(v[at] or 0 for v in mine.values() if len(v) > at)
        found[data["commit_hash"]] = {
            "date": data.get("date", 0),
            "setup_cache_s": setup,
            "benchmarks_s": benchmarks,
            "benchmarks": len(mine),
            "measured": any(x not in (None, [None]) for x in values),
        }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--logs", type=Path, required=True)
    parser.add_argument("--suite", default="Qwen3_0_6B")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    stored = results(args.project, args.suite)
    installed = installs(args.project)
    rows = []
    for commit, row in sorted(stored.items(), key=lambda item: item[1]["date"]):
        install = installed.get(commit, {})
        got = phases(args.logs, args.suite, commit)
        rows.append({"commit": commit, **row, "install": install, "phases": got})
    head = [
        "commit",
        "install s",
        "tree",
        *PHASES,
        "measuring",
        "setup_cache s",
        "asv benchmarks s",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        install = row["install"]
        tree = "refused" if not install else ("built" if install.get("built") else "cached")
        got = row["phases"]
        cells = [
            row["commit"][:8],
            f"{install.get('install_s', 0):.2f}" if install else "-",
            tree,
            *(f"{got[p]:.1f}" if p in got else "-" for p in PHASES),
            f"{got['measuring']:.1f}" if got.get("measuring") else "-",
            f"{row['setup_cache_s']:.1f}" if row["measured"] else "failed",
            f"{row['benchmarks_s']:.1f} ({row['benchmarks']})",
        ]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
