#!/usr/bin/env python
"""Bisect trials on a 16-commit CPU repository with one commit 13-17% slower.

The repository (`mlpstack`, built here): 16 commits, the 10th slower by about 14% with
outputs bit-identical to its parent's (two layers compute their down projection twice and
keep the elementwise minimum of the two equal results), every other commit changing no
forward code. The suite times it with one thread, 2 launches x 10 samples a commit. Each
trial is a fresh asv project (nothing stored, each commit bisect measures installed into an
environment of its own) and one `fwdasv bisect` over the whole range (GOOD the first
commit, BAD the last; by hand: the step's size from the ends' re-measure). The tally:
trials that named the right commit, a wrong one, or none ("not reproducible" or
"undecided"), with the bench runs and processes each took; exit 0 at >= 90% right, none
wrong.

    python bench/verdicts/bisect_trials.py --trials 10 --dir /tmp/bisect-trials [--json FILE]

Run it with nothing else on the box ("load about 1": the bench itself is that load); the
load average is printed with each trial. `--calibrate` times the slow commit alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from fwdasv.analysis.bisect.driver import bisect
from fwdasv.asv.scaffold import write_torch_project
from fwdasv.asv.suitespec import SuiteSpec
from fwdasv.core.cases import parse_case
from fwdasv.engine.argv import EngineArgs, engine_argv
from fwdasv.launch import run_captured

PACKAGE = "mlpstack"
TARGET = "mlpstack.bench:target"
CASE = "tokens_64=64"
COMMITS = 16
SLOW_INDEX = 9  # the 10th commit
SLOW_SUBJECT = "Check the down projection against a recomputation"
MACHINE = "trialbox"

_PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "mlpstack"
version = "0.1.{n}"
requires-python = ">=3.10"

[tool.setuptools]
packages = ["mlpstack"]
"""

_MODEL = '''"""mlpstack: a stack of ReLU MLP blocks with residuals."""

import torch

HIDDEN = 384
LAYERS = 7
CHECKED_LAYERS = {checked}  # layers whose down projection is recomputed (same values)


def weights(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(HIDDEN, HIDDEN, generator=g) * 0.05, torch.randn(HIDDEN, HIDDEN, generator=g) * 0.05)
        for _ in range(LAYERS)
    ]


def forward(x, layers):
    for index, (w_up, w_down) in enumerate(layers):
        h = torch.relu(x @ w_up)
        y = h @ w_down
        if index in CHECKED_LAYERS:
            y = torch.minimum(y, h @ w_down)
        x = x + y
    return x
'''

_BENCH = '''"""fwdasv target for mlpstack."""

import torch

from fwdasv.targets.base import PreparedForward
from mlpstack.model import HIDDEN, forward, weights


class Target:
    name = "mlpstack"

    def __init__(self, device="cpu", dtype="float32", seed=0):
        self.layers = weights(seed)

    def prepare(self, case, seed):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(case.num_tokens, HIDDEN, generator=g)
        return PreparedForward(
            forward=lambda: {"hidden_states": forward(x, self.layers)},
            state=[],
            num_tokens=case.num_tokens,
        )


def target(device="cpu", dtype="float32", seed=0):
    return Target(device=device, dtype=dtype, seed=seed)
'''


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = run_captured(["git", *args], cwd=repo, env=env)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def build_repo(repo: Path) -> list[str]:
    """The 16 commits (reused when already built); returns their hashes, oldest first."""
    if (repo / ".git").is_dir():
        return git(repo, "rev-list", "--reverse", "main").splitlines()
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    for n in range(COMMITS):
        checked = "{1, 4}" if n >= SLOW_INDEX else "set()"
        files = {
            "pyproject.toml": _PYPROJECT.format(n=n),
            "mlpstack/__init__.py": f'"""mlpstack."""\n\n__version__ = "0.1.{n}"\n',
            "mlpstack/model.py": _MODEL.format(checked=checked),
            "mlpstack/bench.py": _BENCH,
            "NOTES.md": "".join(f"- note {i}\n" for i in range(n + 1)),
        }
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        stamp = f"2026-10-{n + 1:02d}T12:00:00+00:00"
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "dev",
            "GIT_AUTHOR_EMAIL": "dev@example.com",
            "GIT_COMMITTER_NAME": "dev",
            "GIT_COMMITTER_EMAIL": "dev@example.com",
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
        }
        subject = SLOW_SUBJECT if n == SLOW_INDEX else f"Notes: item {n}"
        git(repo, "add", "-A", env=env)
        git(repo, "commit", "-q", "--no-gpg-sign", "-m", subject, env=env)
    return git(repo, "rev-list", "--reverse", "main").splitlines()


# How a trial's suite times the model, and `processes` its bare bench processes.
SUITE = SuiteSpec(
    TARGET,
    (CASE,),
    class_name="MLPStack",
    # A CPU model: on a GPU host `auto` would pick CUDA and its graph timer.
    device="cpu",
    timer="host",
    iters=5,
    samples=10,
    warmup_s=0.1,
    launches=2,
    env={"OMP_NUM_THREADS": "1"},
    # fwdasv's fixed workload beside each replay: `track_relative`, the forward's time over
    # it, which the machine's own changes of speed do not move (fwdasv.engine.yardstick).
    reference=True,
)
BENCHMARKS = ("track_relative", "track_latency")


def machine_home(home: Path) -> Path:
    """`home` made a HOME with an asv machine file naming MACHINE (asv reads
    ~/.asv-machine.json); returns it."""
    home.mkdir(parents=True, exist_ok=True)
    entry = {"machine": MACHINE, "os": "linux", "arch": "x86_64", "cpu": "cpu", "num_cpu": "2"}
    entry["ram"] = "1"
    (home / ".asv-machine.json").write_text(json.dumps({MACHINE: entry, "version": 1}))
    return home


def trial(
    root: Path,
    repo: Path,
    hashes: list[str],
    index: int,
    slot: int | None = None,
    log_dir: Path | None = None,
    benchmark: str = BENCHMARKS[0],
) -> dict:
    """One bisect in a fresh project; `slot`: pinned to that CPU, with an asv environment
    directory and a HOME of its own (trials run side by side, one core each); `log_dir`:
    bisect's progress lines (the ends, each probe and its processes) in trialNN.log there."""
    from fwdasv.analysis.bisect.environment import BisectError

    if slot is not None:
        os.sched_setaffinity(0, {slot})
        # A HOME of its own: asv rewrites ~/.asv-machine.json, and trials side by side
        # read each other's half-written file (seen on the H200 host: "Error parsing JSON").
        os.environ["HOME"] = str(machine_home(root / f"home{index:02d}"))
    env_dir = root / ("env" if slot is None else f"env{slot}")
    # A fresh project each time: another run's stored results would be this trial's start.
    shutil.rmtree(root / f"trial{index:02d}", ignore_errors=True)
    project = write_torch_project(
        root / f"trial{index:02d}", repo, PACKAGE, [SUITE.source()], env_dir=env_dir
    )
    started = time.monotonic()
    log_path = log_dir / f"trial{index + 1:02d}.log" if log_dir else None

    def say(line: str) -> None:
        assert log_path is not None
        with open(log_path, "a") as log:
            log.write(line + "\n")

    try:
        result = bisect(
            project,
            hashes[0],
            hashes[-1],
            benchmark,
            MACHINE,
            case=CASE.split("=")[0],
            echo=say if log_path else None,
        )
    except BisectError as error:  # e.g. GOOD and BAD did not differ: no commit named
        out = {"first_bad": None, "certain": False, "percent": float("nan"), "bench_runs": -1}
        out["error"] = str(error)
    else:
        out = {**result.to_json(), "certain": result.found}
    out["wall_s"] = time.monotonic() - started
    out["load"] = os.getloadavg()[0]
    out["cpu"] = sorted(os.sched_getaffinity(0)) if slot is not None else None
    return out


def one_cpu_per_core(count: int) -> list[int]:
    """`count` logical CPUs on distinct physical cores, leaving CPU 0's core to the machine:
    two trials on the two hyperthreads of one core time each other's work."""
    cores: dict[tuple[str, str], list[int]] = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            key = (
                (topology / "physical_package_id").read_text().strip(),
                (topology / "core_id").read_text().strip(),
            )
        except OSError:
            key = ("?", str(cpu))
        cores.setdefault(key, []).append(cpu)
    firsts = [cpus[0] for cpus in cores.values() if 0 not in cpus] or [
        cpus[0] for cpus in cores.values()
    ]
    return firsts[:count]


def processes(root: Path, hashes: list[str], count: int = 8, cpu: int | None = None) -> None:
    """Process-level variation at the range's ends: `count` fresh bench processes of the first
    and of the last commit, alternating, each timing the case as a trial's suite does,
    on one CPU with nothing else of ours running. Prints each process's median."""
    import statistics
    import subprocess
    import tempfile

    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    trees = {}
    for name, commit in (("first", hashes[0]), ("last", hashes[-1])):
        tree = root / f"tree-{name}"
        if not tree.exists():
            git(root / PACKAGE, "worktree", "add", "-f", "--detach", str(tree), commit)
        trees[name] = tree
    medians: dict[str, list[float]] = {"first": [], "last": []}
    for _ in range(count):
        for name, tree in trees.items():
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "out.json"
                args = EngineArgs(
                    TARGET,
                    (parse_case(CASE),),
                    output_json=out,
                    device=SUITE.device,
                    timer=SUITE.timer,
                    iters=SUITE.iters,
                    samples=SUITE.samples,
                    warmup_s=SUITE.warmup_s,
                )
                argv = [sys.executable, *engine_argv(args)]
                env = {**os.environ, **SUITE.env, "PYTHONPATH": str(tree)}
                subprocess.run(argv, env=env, capture_output=True, check=True, timeout=300)
                data = json.loads(out.read_text())
            (case,) = data  # one record per case
            medians[name].append(float(case["median_us"]) / 1e3)
    for name, values in medians.items():
        shown = " ".join(f"{v:.3f}" for v in values)
        print(f"processes at the {name} commit (ms): {shown}", flush=True)
    first, last = (statistics.median(v) for v in medians.values())
    print(
        f"processes: median of medians {first:.3f} -> {last:.3f} ms "
        f"({100 * (last / first - 1):+.1f}%), {count} processes a side, CPU {cpu}",
        flush=True,
    )


def calibrate(rounds: int = 30, calls: int = 20) -> None:
    """The slow commit's step, timed interleaved in this process (1 thread): the model's code
    at the commit before it and at it, and whether their outputs are bit-identical."""
    import statistics

    import torch

    torch.set_num_threads(1)
    models = []
    for checked in ("set()", "{1, 4}"):
        namespace: dict = {}
        exec(_MODEL.format(checked=checked), namespace)  # the file each commit holds
        models.append(namespace)
    layers = models[0]["weights"](0)
    x = torch.randn(64, models[0]["HIDDEN"], generator=torch.Generator().manual_seed(0))
    times: list[list[float]] = [[], []]
    for _ in range(rounds):
        for side, model in enumerate(models):
            started = time.perf_counter()
            for _ in range(calls):
                model["forward"](x, layers)
            times[side].append((time.perf_counter() - started) / calls)
    before, after = (statistics.median(t) * 1e3 for t in times)
    same = torch.equal(models[0]["forward"](x, layers), models[1]["forward"](x, layers))
    print(
        f"calibration: {before:.2f} ms -> {after:.2f} ms ({100 * (after / before - 1):+.1f}%), "
        f"outputs bit-identical: {same}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="bisects to run (default 10)")
    parser.add_argument(
        "--dir", type=Path, default=Path("bisect-trials"), help="work directory (reused)"
    )
    parser.add_argument("--json", type=Path, help="write every trial's bisect JSON here")
    parser.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="trials at once, each pinned to a CPU of its own with its own asv environment "
        "(for a many-core box: 5 on 16 cores keeps each trial's core to itself)",
    )
    parser.add_argument(
        "--log-dir", type=Path, help="each trial's bisect progress in trialNN.log here"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="first: this many fresh bench processes at each end of the range, alternating "
        "(process-level variation, on one core of its own)",
    )
    parser.add_argument(
        "--benchmark",
        choices=BENCHMARKS,
        default=BENCHMARKS[0],
        help="the series bisected: the forward's time over fwdasv's fixed workload beside it "
        "(track_relative), or its absolute time (track_latency)",
    )
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="only time the slow commit against its parent, interleaved in one process",
    )
    args = parser.parse_args()
    if args.calibrate:
        calibrate()
        return 0
    root = args.dir.resolve()
    root.mkdir(parents=True, exist_ok=True)
    os.environ["HOME"] = str(machine_home(root / "home"))
    hashes = build_repo(root / PACKAGE)
    culprit = hashes[SLOW_INDEX]
    print(f"repository {root / PACKAGE}: {len(hashes)} commits, culprit {culprit[:8]}")
    if args.log_dir:
        args.log_dir.mkdir(parents=True, exist_ok=True)
    cpus = one_cpu_per_core(max(args.parallel, 1))
    if args.processes:
        processes(root, hashes, args.processes, cpus[0] if cpus else None)
    tally = {"right": 0, "wrong": 0, "none": 0, "uncertain": 0}
    trials: list[dict] = []

    def report(index: int, got: dict) -> None:
        # Each trial's line as it ends, and the JSON rewritten: a run stopped by a time
        # limit keeps every trial that finished.
        got["trial"] = index + 1
        trials.append(got)
        named = got["first_bad"]
        verdict = "none" if named is None else ("right" if named == culprit else "wrong")
        # "none": not reproducible or undecided (with its reason in the JSON)
        tally[verdict] += 1
        tally["uncertain"] += 0 if got["certain"] else 1
        print(
            f"trial {index + 1}: {verdict} ({(named or '-')[:8]}, {got['percent']:+.1f}%, "
            f"{got.get('answer', 'error')}), {got['bench_runs']} bench runs, "
            f"{got.get('bench_processes', -1)} processes, {got['wall_s']:.0f} s, "
            f"load {got['load']:.1f}" + (f"; {got['error']}" if "error" in got else ""),
            flush=True,
        )
        if args.json:
            args.json.write_text(json.dumps(trials, indent=2) + "\n")

    if args.parallel > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        if len(cpus) < args.parallel:
            print(f"{len(cpus)} physical cores beside CPU 0's: {len(cpus)} trials at a time")
        with ProcessPoolExecutor(len(cpus)) as pool:
            # In waves of one trial a core: trials running together never share a CPU or
            # an env.
            for wave in range(0, args.trials, len(cpus)):
                indices = range(wave, min(wave + len(cpus), args.trials))
                futures = {
                    pool.submit(
                        trial,
                        root,
                        root / PACKAGE,
                        hashes,
                        i,
                        cpus[k],
                        args.log_dir,
                        args.benchmark,
                    ): i
                    for k, i in enumerate(indices)
                }
                for future in as_completed(futures):
                    try:
                        got = future.result()
                    except Exception as error:  # a trial that crashed: said, not hidden
                        got = {"first_bad": None, "certain": False, "percent": float("nan")}
                        got.update(bench_runs=-1, wall_s=float("nan"), load=float("nan"))
                        got["error"] = f"{type(error).__name__}: {error}"
                    report(futures[future], got)
    else:
        for i in range(args.trials):
            report(
                i,
                trial(
                    root, root / PACKAGE, hashes, i, log_dir=args.log_dir, benchmark=args.benchmark
                ),
            )
    print(
        f"tally over {len(trials)} of {args.trials} trials: {tally['right']} right, "
        f"{tally['wrong']} wrong, {tally['none']} not reproducible; "
        f"{tally['uncertain']} uncertain",
        flush=True,
    )
    return 0 if tally["wrong"] == 0 and tally["right"] >= 0.9 * args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
