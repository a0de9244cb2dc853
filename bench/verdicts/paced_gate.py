#!/usr/bin/env python
"""The gate on a busy box, judged by the latency or by the paced ratio, on the same histories.

bisect_trials.py's `mlpstack` (16 commits, the 10th about 14% slower, outputs bit-identical)
in the project `fwdasv init --reference` writes: the paced suite (one thread, 2 launches x 10
samples a commit, fwdasv's fixed workload beside each replay) and the environment canary.
Each history is a fresh project measured by real asv, one commit at a time, while a
CPU-bound neighbour (`while True: pass`) runs during the commits the scenario names: `burst`
3-6 (away from the slow commit), `late` 12-15 (after it), `onset` 9-15 (from it), `quiet`
none, `stream` every commit with busy_demo.py's memory streamer instead. The gates, judged on
the same stored results (`fwdasv.analysis.findings.findings`): `latency` (the paced suite's
track_latency), `paced` (its track_relative), and `asv` (`asv publish`'s own detector).
Prints what each found (series, commit, status, size) and whether it gates, then a tally.
Run it with nothing else on the box: the neighbour is the only load it means.

    python bench/verdicts/paced_gate.py --dir /tmp/paced-gate --repeats 2 [--rejudge]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bisect_trials as trials

from fwdasv.analysis.findings import findings
from fwdasv.analysis.findings.series import (
    CANARY_PREFIX,
    LATENCY_METRIC,
    RELATIVE_METRIC,
    load_series,
)
from fwdasv.analysis.rules.noise import estimate_noise
from fwdasv.asv.project import run_commits
from fwdasv.asv.scaffold import init_project

SCENARIOS = {
    "burst": range(3, 7),
    "late": range(12, 16),
    "onset": range(9, 16),
    "quiet": range(0),
    "stream": range(16),
}
STREAMING = {"stream"}  # scenarios whose neighbour streams memory instead of spinning


class Streamer:
    """busy_demo.py's memory streamer as a neighbour with Popen's kill/wait."""

    def __init__(self, seed: int) -> None:
        import multiprocessing

        import busy_demo

        self.stop = multiprocessing.Event()
        self.process = multiprocessing.Process(
            target=busy_demo.stream_memory, args=(seed, self.stop), daemon=True
        )
        self.process.start()

    def kill(self) -> None:
        self.stop.set()

    def wait(self) -> None:
        self.process.join(timeout=30)


def measure(
    root: Path, repo: Path, hashes: list[str], name: str, busy: range, stream: bool = False
) -> Path:
    """A fresh project; each commit measured by its own asv run, the neighbour running
    during the `busy` ones (a memory streamer with `stream`, else a spinning process)."""
    project = init_project(
        root / name,
        repo,
        trials.SUITE,
        project=trials.PACKAGE,
        env_dir=root / "env",
        check=False,
    ).project
    neighbour = None
    try:
        for index, commit in enumerate(hashes):
            if index in busy and neighbour is None:
                neighbour = (
                    Streamer(seed=index)
                    if stream
                    else subprocess.Popen([sys.executable, "-c", "while True: pass"])
                )
            if index not in busy and neighbour is not None:
                neighbour.kill()
                neighbour.wait()
                neighbour = None
            run_commits(project, [commit], trials.MACHINE, echo=None)
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    return project.config_path


def judge(config: Path, hashes: list[str]) -> dict[str, list[dict]]:
    from fwdasv.asv.project import AsvProject

    project = AsvProject.load(config)
    order, every = load_series(project)
    as_before = {k: s for k, s in every.items() if k.metric != RELATIVE_METRIC}
    # Each series' run-to-run noise (% of a commit's median, from its own history).
    out: dict = {
        "noise_pct": {
            f"{k.suite_class}.{k.metric}({k.case})": round(estimate_noise(s.history).noise_pct, 1)
            for k, s in sorted(every.items(), key=lambda item: item[0].name)
            if k.metric in (LATENCY_METRIC, RELATIVE_METRIC)
        }
    }
    for gate, series in (("latency", as_before), ("paced", every)):
        out[gate] = [
            {
                "series": f.key.metric,
                "commit": hashes.index(f.after_commit),
                "status": str(f.status),
                "percent": round(f.percent, 1),
                "gating": f.gating,
            }
            for f in findings.judge_series(order, series)
        ]
    out["asv"] = asv_regressions(project, hashes)
    return out


def asv_regressions(project, hashes: list[str]) -> list[dict]:
    """asv's own detector on the same results: `asv publish`'s regressions.json (its
    step detection at the project's thresholds: 5% for track_relative, asv's default),
    the suite's series only. A jump's revisions are commit indices here (one branch,
    linear history)."""
    import json as json_module

    from fwdasv.asv.project import run_asv

    run_asv(project, "publish", echo=None)
    document = json_module.loads((project.html_dir / "regressions.json").read_text())
    out = []
    for entry in document.get("regressions", []):
        benchmark, jumps = entry[0], entry[-1]
        if benchmark.split(".")[-2].startswith(CANARY_PREFIX):
            continue
        for jump in jumps or []:
            after = int(jump[1])
            out.append(
                {
                    "series": benchmark.rpartition(".")[2],
                    "commit": after if after < len(hashes) else -1,
                    "status": "regression",
                    "percent": round(100 * (jump[3] / jump[2] - 1), 1),
                    "gating": True,
                }
            )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/paced-gate"))
    parser.add_argument("--repeats", type=int, default=2, help="histories per scenario")
    parser.add_argument(
        "--scenarios", default=",".join(SCENARIOS), help=f"of {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--json", type=Path, help="write every history's findings here")
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="measure nothing: judge the histories an earlier run left in --dir again "
        "(after a change of the rules)",
    )
    args = parser.parse_args()
    root = args.dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(trials.machine_home(root / "home"))
    repo = root / trials.PACKAGE
    hashes = trials.build_repo(repo)
    slow = trials.SLOW_INDEX
    print(f"{len(hashes)} commits, the slow one is commit {slow} ({hashes[slow][:8]})", flush=True)
    kept, tally = [], {}
    for repeat in range(args.repeats):
        for scenario in args.scenarios.split(","):
            busy = SCENARIOS[scenario]
            name = f"{scenario}{repeat + 1}"
            started = time.monotonic()
            if args.rejudge:
                config = root / name / "asv.conf.json"
                if not config.exists():
                    print(f"{name}: no history in {root / name}, skipped")
                    continue
            else:
                config = measure(root, repo, hashes, name, busy, scenario in STREAMING)
            got = judge(config, hashes)
            wall = time.monotonic() - started
            load = os.getloadavg()[0]
            what = "judged again" if args.rejudge else f"{wall:.0f} s, load {load:.1f}"
            print(f"{name}: neighbour at commits {list(busy)}, {what}")
            noise = got.pop("noise_pct")
            print("  noise: " + ", ".join(f"{k} {v:.1f}%" for k, v in noise.items()))
            for gate, found in got.items():
                right = any(f["gating"] and f["commit"] == slow for f in found)
                wrong = [f for f in found if f["gating"] and f["commit"] != slow]
                shown = (
                    "; ".join(
                        f"{f['series']} @{f['commit']} {f['status']} {f['percent']:+.1f}%"
                        for f in found
                    )
                    or "nothing"
                )
                print(f"  {gate:8s} gate {'exit 1' if right or wrong else 'exit 0'}: {shown}")
                t = tally.setdefault((scenario, gate), {"right": 0, "wrong": 0, "histories": 0})
                t["histories"] += 1
                t["right"] += int(right)
                t["wrong"] += int(bool(wrong))
            kept.append(
                {"history": name, "busy": list(busy), "wall_s": wall, "noise_pct": noise, **got}
            )
            sys.stdout.flush()
    print("\nscenario  gate     histories  slow commit gated  another commit gated")
    for (scenario, gate), t in tally.items():
        print(f"{scenario:8s}  {gate:8s} {t['histories']:9d}  {t['right']:17d}  {t['wrong']:20d}")
    if args.json:
        args.json.write_text(json.dumps(kept, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
