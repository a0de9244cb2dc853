"""Small helpers the test files share (imported as `from helpers import ...`: pyproject's
pytest `pythonpath` puts tests/ on the import path, from any folder below it).

Where things are (`ROOT`, `DATA`, `PROGRAMS`, `ARTIFACTS`); git as the tests' author
(`git`); the engine as a subprocess
(`engine`, with the `FAST` flags, and `one_thread_env`); the one-line error a user mistake prints
(`one_error_line`); asv's machine entry of the test box and the repository's suites
(`TESTBOX`, `benchmark_suites`); raised priority while timing (`measuring_priority`);
whether a process the test started has ended (`gone`);
the drawn histories' projects, findings and result files (`copy_project`, `invoke_cli`,
`finding_of`, `results_by_commit`, `result_file`, `truncate_half`, `confirmation_record`, `asv_config`);
simulated series (`simulated_history`, `with_commit_scaled`); a bench/ script as a module
(`bench_script`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from fwdasv.analysis import simulate as sim

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
DATA = TESTS / "data"  # recorded outputs (vLLM's bench on an H200) the tests read
PROGRAMS = TESTS / "programs"  # programs the tests launch (targets that misbehave, probes)
ARTIFACTS = TESTS / "artifacts"  # what a test leaves for a person to look at (git-ignored)

# --device cpu: the engine's CPU path, also on a machine with a GPU; short runs.
FAST = ["--device", "cpu", "--iters", "3", "--samples", "2", "--warmup-s", "0"]


def engine(
    args: list[str], env: dict[str, str], cwd: Path, timeout_s: float = 180
) -> subprocess.CompletedProcess[str]:
    """`python -m fwdasv.engine ARGS` as a real process, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "fwdasv.engine", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


# The author and committer of every commit a test makes.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(repo: str | os.PathLike[str], *args: str, env: dict[str, str] | None = None) -> str:
    """`git ARGS` in `repo` as the tests' author (`env` added: commit dates), its stdout
    stripped: fwdasv's one git helper."""
    from fwdasv.git import git as run_git

    return run_git(repo, *args, env={**os.environ, **GIT_IDENTITY, **(env or {})})


def gone(pid: int) -> bool:
    """No such process, or one that has finished (a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] in ("Z", "X")


def one_thread_env(**extra: str) -> dict[str, str]:
    """This environment without a torchrun's rank variables, one intra-op thread, the
    checkout first on PYTHONPATH, and `extra`."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    path = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(path), **extra}


def one_error_line(text: str, ignoring: tuple[str, ...] = ("Warning: ",)) -> str:
    """The one line a user mistake prints (`Error: ...`), no traceback; lines starting
    with `ignoring` (warnings, progress) may stand beside it."""
    lines = [line for line in text.strip().splitlines() if not line.startswith(ignoring)]
    assert len(lines) == 1 and lines[0].startswith("Error: "), text
    assert "Traceback" not in text
    return lines[0]


# asv's machine entry of the test box (the keys `asv machine --yes` writes).
TESTBOX = {
    "machine": "testbox",
    "os": "Linux",
    "arch": "x86_64",
    "cpu": "test cpu",
    "num_cpu": "2",
    "ram": "24GB",
}


def benchmark_suites(base: type, modules: Sequence[Any] | None = None) -> list[type]:
    """The concrete suites of benchmarks/ (or `modules`) that subclass `base`: defined there,
    or re-exported by its `__all__` (benchmarks/forward.py's vLLM suites, from
    fwdasv.vllm_suites; asv names them by the module that imports them)."""
    import inspect

    if modules is None:
        import benchmarks.forward
        import benchmarks.pipeline

        modules = (benchmarks.forward, benchmarks.pipeline)
    found = []
    for module in modules:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, base)
                and (
                    cls.__module__ == module.__name__
                    or cls.__name__ in getattr(module, "__all__", ())
                )
                and not inspect.isabstract(cls)
            ):
                found.append(cls)
    return found


@contextlib.contextmanager
def measuring_priority(niceness: int = -10) -> Iterator[None]:
    """Run the timed asv work ahead of the box's other jobs, then restore the priority.

    The CPU box is two vCPUs shared with other test runs: at equal priority a
    one-thread forward is preempted for whole seconds and a commit's samples
    can all come out several times slow. Children (asv, its benchmark
    processes) inherit the niceness. It cannot help with what the VM's
    neighbours do (whole processes 10-20% off, see `demo_history`). Without
    the privilege to raise priority this does nothing; timings are noisier.
    """
    try:
        before = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, niceness)
    except (OSError, AttributeError):
        before = None
    try:
        yield
    finally:
        if before is not None:
            os.setpriority(os.PRIO_PROCESS, 0, before)


# --- the drawn histories (conftest's `drawn_history`, `stepped`, ...) -----------------------

# `stepped`'s step: 12 commits, +2% from commit 6 on.
STEP_INDEX = 6


def copy_project(history, tmp_path: Path):
    """The history's asv project (configuration, benchmarks, results) in a directory of its own."""
    from fwdasv.asv.project import AsvProject

    root = Path(history.project.config_path).parent
    shutil.copytree(root, tmp_path / "asv", ignore=shutil.ignore_patterns("html", ".fwdasv-*"))
    return AsvProject.load(tmp_path / "asv" / "asv.conf.json")


def invoke_cli(project, *args: str, command: str = "regressions"):
    """`fwdasv COMMAND --config <project> ARGS` through click's runner."""
    from click.testing import CliRunner

    from fwdasv.cli import main

    return CliRunner().invoke(main, [command, "--config", str(project.config_path), *args])


def finding_of(project, benchmark: str):
    """The one finding of `benchmark` in the project's stored results."""
    from fwdasv.analysis.findings import findings

    (found,) = [f for f in findings.find(project) if f.key.benchmark == benchmark]
    return found


def results_by_commit(project, machine: str = "testbox") -> dict[str, dict[str, Any]]:
    """The result files asv stored for `machine`, read, by commit hash."""
    found = {}
    for path in (project.results_dir / machine).glob("*-*.json"):
        data = json.loads(path.read_text())
        found[data["commit_hash"]] = data
    return found


def result_file(project, commit: str) -> Path:
    """The one result file asv stored for `commit`."""
    (path,) = project.results_dir.glob(f"*/{commit[:8]}-*.json")
    return path


def truncate_half(path: Path) -> None:
    """The file cut in half, as a killed writer or a full disk leaves it."""
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def confirmation_record(b: list[float], finding):
    """An A/B re-measure of 3 processes a side (A at 1.0), as `fwdasv confirm` stores it."""
    from fwdasv.analysis.findings.verdict_file import ConfirmationRecord
    from fwdasv.analysis.rules.confirm import judge_ab
    from fwdasv.analysis.rules.noise import Noise

    figures = judge_ab([1.0, 1.0005, 0.9995], b, Noise(0.2, 0.2, 0.05, 60, "history", 35.0))
    return ConfirmationRecord.of(figures, finding.before_commit, finding.after_commit)


def asv_config(tmp_path: Path, **overrides):
    """An asv.conf.json in `tmp_path` (a virtualenv project of repo "."), loaded."""
    from fwdasv.asv.project import AsvProject

    config = {"version": 1, "repo": ".", "environment_type": "virtualenv", **overrides}
    (tmp_path / "asv.conf.json").write_text(json.dumps(config))
    return AsvProject.load(tmp_path / "asv.conf.json")


# --- simulated series -------------------------------------------------------------------


def simulated_history(
    seed: int,
    between_pct: float = 0.2,
    within_pct: float = 0.2,
    commits: int = 60,
    shifts: tuple[sim.Shift, ...] = (),
    outlier_rate: float = 0.0,
) -> sim.SimHistory:
    """A simulated series of `commits` commits with `shifts`, from `seed`: one seeded
    series from `fwdasv.analysis.simulate` with the noise fixed (no outliers unless asked)."""
    rng = np.random.default_rng(seed)
    spec = sim.random_spec(
        rng, between_pct=between_pct, within_pct=within_pct, outlier_rate=outlier_rate
    )
    return sim.simulate(spec, rng, commits, shifts)


def with_commit_scaled(
    samples: Sequence[Sequence[float]], index: int, pct: float
) -> list[list[float]]:
    """The history with commit `index`'s samples scaled by 1 + pct / 100: a slow (or fast)
    commit."""
    out = [list(s) for s in samples]
    out[index] = [v * (1 + pct / 100) for v in out[index]]
    return out


def scale_stored_case(
    result_file: Path, case: str, factor: float, benchmarks: Sequence[str]
) -> None:
    """Rewrite one asv result file as if `case` of each of `benchmarks` had read `factor`
    times what it did (its median, intervals, quartiles and samples): one odd process of
    that commit, a boundary the tests cannot make a real process cross at will."""
    doc = json.loads(result_file.read_text())
    columns = doc["result_columns"]
    for name in benchmarks:
        row = doc["results"][name]
        (cases,) = row[columns.index("params")]
        at = cases.index(repr(case))
        for column in ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75"):
            row[columns.index(column)][at] *= factor
        samples = row[columns.index("samples")]
        samples[at] = [v * factor for v in samples[at]]
    result_file.write_text(json.dumps(doc))


@contextlib.contextmanager
def bench_script(relative: str) -> Iterator[ModuleType]:
    """bench/RELATIVE (e.g. "fleet/schedule_sim.py") loaded as a module named after its file,
    in sys.modules while the block runs (dataclasses and pickling look their module up
    there) and taken out after it."""
    path = ROOT / "bench" / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]
