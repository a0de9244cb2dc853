"""Running a shard plan: one `asv run` per GPU of this host at once, each on its own GPU.

Each GPU's run (`run_shards`) starts through `fwdasv.launch`, asv under `locked_machine`
(each asv run rewrites its machine file; `write_machines` puts every GPU's entry there
first), with CUDA_VISIBLE_DEVICES the GPU's UUID, `--machine` its own machine and a
HASHFILE of its commits (`fwdasv.hw.shard.ShardPlan`); its output goes to a log of its
own and to `echo`, each line marked with its GPU. Two asv runs must not share an
environment (one would install its commit under the other's benchmarks): each reads a
copy of asv.conf.json written beside it (relative paths and the vLLM cache resolve alike)
that differs only in env_dir, .fwdasv-shard-envs/<machine>/ (kept: that GPU's next run
reuses it). They share results/ (results/<machine>/ apart; both write benchmarks.json)
and the vLLM trees (one directory per commit, renamed into place when built; the base is
unpacked once, before they start). The plan, each run's exit status, seconds and log go
to .fwdasv-shards/<run>/plan.json; the first run that failed is named; the others run on.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fwdasv.asv.locked_machine import MODULE as LOCKED_ASV
from fwdasv.asv.locked_machine import machine_file_locked
from fwdasv.asv.project import ASV_TIMEOUT_S, RUN_OK, AsvError, AsvProject, run_args
from fwdasv.asv.vllm_base import compiled_guard
from fwdasv.core.files import NotRegularFileError, read_regular, write_atomic
from fwdasv.hw.devices import VISIBLE_DEVICES
from fwdasv.hw.machine import write_machine_file
from fwdasv.hw.shard import GpuMachine, Shard, ShardPlan
from fwdasv.launch import LaunchError, LaunchSpec, run_process
from fwdasv.process_tree import ended_by_signal

SHARDS_DIR = ".fwdasv-shards"  # beside asv.conf.json: one folder per run
SHARD_ENVS = ".fwdasv-shard-envs"  # beside asv.conf.json: one env_dir per machine


def range_commits(project: AsvProject, spec: str) -> list[str]:
    """The commits of `A..B` as `asv run` takes them (first parent, A excluded) or of
    `HASHFILE:F` (one per line), oldest first, as full hashes."""
    if spec.startswith("HASHFILE:"):
        path = Path(spec.removeprefix("HASHFILE:")).expanduser()
        try:  # read_regular: a FIFO with no writer would hold the run until killed
            text = read_regular(path).decode("utf-8", "replace")
        except NotRegularFileError as error:
            raise AsvError(f"{spec}: it is {error}; give a file of one commit a line") from None
        except OSError as error:
            raise AsvError(f"{spec}: cannot read it ({error.strerror})") from None
        names = [line.strip() for line in text.splitlines() if line.strip()]
        return [project.resolve(name) for name in names]
    good, sep, bad = spec.partition("..")
    if not sep or not good or not bad or bad.startswith("."):
        raise AsvError(
            f"range {spec!r}: give A..B (the commits after A up to B, as asv run takes them) "
            "or HASHFILE:FILE"
        )
    return project.first_parent_range(good, bad)


def write_machines(gpus: Sequence[GpuMachine]) -> Path:
    """Every GPU's machine entry into asv's machine file (~/.asv-machine.json); its path."""
    path = Path()
    with machine_file_locked():  # an asv run loading its machine must not lose these
        for gpu in gpus:
            path = write_machine_file(dict(gpu.entry))
    return path


@dataclass(frozen=True)
class ShardRun:
    """How one GPU's asv run ended."""

    shard: Shard
    status: int | None  # asv's exit status; None: it could not run to its end
    seconds: float
    log: Path
    ended: float  # time.monotonic() at its end: which failed first
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in RUN_OK

    def line(self) -> str:
        what = f"GPU {self.shard.gpu.index} (machine {self.shard.machine})"
        if self.status is None:
            return f"{what}: could not run to its end ({self.error}); log {self.log}"
        said = {0: "measured", 2: "measured; some benchmark failed (asv's status 2)"}
        done = said.get(self.status, f"asv exited with status {self.status}")
        return (
            f"{what}: {len(self.shard.commits)} commit(s) {done} in {self.seconds:.1f} s; "
            f"log {self.log}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "machine": self.shard.machine,
            "gpu_uuid": self.shard.gpu.uuid,
            "status": self.status,
            "seconds": round(self.seconds, 3),
            "log": str(self.log),
            "error": self.error,
        }


@dataclass(frozen=True)
class ShardOutcome:
    plan: ShardPlan
    runs: tuple[ShardRun, ...]
    seconds: float  # wall time of the whole plan
    record: Path  # plan.json

    def first_failure(self) -> ShardRun | None:
        failed = [run for run in self.runs if not run.ok]
        return min(failed, key=lambda run: run.ended) if failed else None


def run_folder(project: AsvProject, plan: ShardPlan) -> Path:
    """.fwdasv-shards/<UTC time>-<first>..<last>/ for this run's logs and plan.json."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    span = f"{plan.commits[0][:8]}..{plan.commits[-1][:8]}"
    return project.config_path.parent / SHARDS_DIR / f"{stamp}-{span}"


def write_record(
    folder: Path, plan: ShardPlan, spec: str, runs: Sequence[ShardRun] = (), seconds: float = 0.0
) -> Path:
    """plan.json: the split (which GPU measures which commit) and, once run, each run's end."""
    record = {**plan.to_json(), "range": spec, "runs": [r.to_json() for r in runs]}
    if runs:
        record["wall_s"] = round(seconds, 3)
    path = folder / "plan.json"
    write_atomic(path, json.dumps(record, indent=2) + "\n", what="shard plan")
    return path


def shard_config(project: AsvProject, shard: Shard) -> Path:
    """asv.conf.json's copy for `shard`'s run, beside it, with an env_dir of its own."""
    config = dict(project.raw)
    config["env_dir"] = f"{SHARD_ENVS}/{shard.machine}"
    path = project.config_path.with_name(f".fwdasv-shard-{shard.machine}.asv.conf.json")
    write_atomic(path, json.dumps(config, indent=2) + "\n", what="shard configuration")
    return path


def _prepare(project: AsvProject) -> list[str]:
    """What every run shares, done once before they start; asv's extra arguments."""
    compiled_guard(project)  # a wheel base unpacked now, not by two runs at once
    if project.local_repo != Path(project.repo):
        # A URL's mirror: two runs must not fetch into it at once (resolving the range
        # needed it cloned already).
        return ["--no-pull"]
    return []


def run_shards(
    project: AsvProject,
    plan: ShardPlan,
    spec: str,
    *,
    bench: Sequence[str] = (),
    python: str = sys.executable,
    echo: Callable[[str], None] | None = print,
    timeout_s: float = ASV_TIMEOUT_S,
) -> ShardOutcome:
    """Every shard's `asv run` at once, each on its GPU; waits for all of them.

    Ctrl-C, SIGTERM, SIGHUP (or any error here) stop every run, killing what it started.
    """
    extra = _prepare(project)
    folder = run_folder(project, plan)
    write_record(folder, plan, spec)
    stop = threading.Event()
    ended: dict[str, ShardRun] = {}
    configs: list[Path] = []

    def run(shard: Shard, config: Path) -> None:
        hashfile = folder / f"{shard.machine}.commits"
        hashfile.write_text("\n".join(shard.commits) + "\n")
        args = run_args(f"HASHFILE:{hashfile}", shard.machine, bench=bench)
        launch_spec = LaunchSpec(
            args=["-m", LOCKED_ASV, "run", "--config", str(config), *args, *extra],
            python=python,
            env={VISIBLE_DEVICES: shard.gpu.uuid},
            timeout_s=timeout_s,
            cwd=str(project.config_path.parent),
        )
        log = folder / f"{shard.machine}.log"

        def marked(line: str) -> None:
            if echo is not None:
                echo(f"[GPU {shard.gpu.index}] {line}")

        started = time.perf_counter()
        try:
            completed = run_process(launch_spec, log, marked, stop=stop)
            status, error = completed.returncode, None
        except LaunchError as failed:
            status, error = None, failed.summary
        except Exception as failed:  # a bug here must not leave the others waiting on it
            status, error = None, f"{type(failed).__name__}: {failed}"
        seconds = time.perf_counter() - started
        ended[shard.machine] = ShardRun(shard, status, seconds, log, time.monotonic(), error)

    started = time.perf_counter()
    threads: list[threading.Thread] = []

    def stop_all() -> None:  # each run kills what it started within a second of `stop`
        stop.set()
        for thread in threads:
            thread.join()

    try:
        with ended_by_signal(stop_all):  # SIGTERM, SIGHUP: the runs are sessions of their own
            for shard in plan.shards:
                if not shard.commits:
                    continue
                config = shard_config(project, shard)
                configs.append(config)
                thread = threading.Thread(target=run, args=(shard, config), name=shard.machine)
                threads.append(thread)
                thread.start()
            for thread in threads:
                while thread.is_alive():
                    thread.join(timeout=0.5)
    except BaseException:
        stop_all()
        raise
    finally:
        for config in configs:
            config.unlink(missing_ok=True)
    seconds = time.perf_counter() - started
    runs = tuple(ended[s.machine] for s in plan.shards if s.machine in ended)
    record = write_record(folder, plan, spec, runs, seconds)
    return ShardOutcome(plan, runs, seconds, record)
