"""The one place a subprocess is started: a bench (one process or a torchrun group), or a
short helper command (git, a Python probe: `run_captured`).

A bench never runs in fwdasv's process: it owns the GPU, may need several ranks and may
hang in NCCL or crash. `launch` starts it from an argv list (never a shell) with a clean
environment, copies its output to a log file and, line by line, to `echo` (asv kills a
benchmark that stays silent too long), past the timeout kills every process it started
(`fwdasv.process_tree`), and returns the bench's results JSON parsed: a missing or partial
file is a failure even after exit status 0, and a failure names the rank and error its
output shows (`fwdasv.torchrun_output`). Every child runs with PYTHONSAFEPATH (`-P`,
Python >= 3.11; inherited by torchrun's workers and asv's benchmark processes): no import
comes from the caller's working directory, where a folder named `fwdasv/` (a clone's
parent) would stand in for the installed package.

    results = launch(LaunchSpec(["-m", "fwdasv.engine", ...]), out, log, cases=["d"])
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from fwdasv.core import results
from fwdasv.core.errors import UserError
from fwdasv.process_tree import ProcessTree, ended_by_signal, kill_tree
from fwdasv.torchrun_output import ErrorScanner, RankFailure

# Set by torchrun (or a parent torchrun) for its workers; inherited by a bench
# started from inside one, they would make it join the wrong group.
STRIPPED_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)
# Python's `-P` as an environment variable, so torchrun's workers and asv's benchmark
# processes inherit it: no working directory (or script's folder) first on sys.path.
SAFE_PATH_ENV = {"PYTHONSAFEPATH": "1"}
# TORCHELASTIC_* is set by torchrun for its workers; PET_* sets torchrun's own
# options (`--nnodes` ...), which must come from the spec alone.
STRIPPED_ENV_PREFIXES = ("TORCHELASTIC_", "PET_")
# Kept even though they are set in the parent: on H200 boxes NVLink multicast
# (NVLS) must stay off, and these are how an operator says so.
PASSED_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")

TAIL_LINES = 40

# gloo ranks on a CPU host: beyond one per CPU they share CPUs (a warning), beyond
# this many per CPU a run is refused before it starts (64 ranks of a 2-CPU box ran
# it out of memory).
MAX_RANKS_PER_CPU = 2


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), not the host's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class LaunchError(UserError, RuntimeError):
    """A bench subprocess that timed out, failed, or wrote no (or partial) results.

    `returncode` is None after a timeout (or before a start); `log_path`
    holds the whole output, `tail` its last lines; `pid` is the child's pid,
    which is also its process group id.
    """

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        log_path: Path | None = None,
        tail: str = "",
        pid: int | None = None,
        timed_out: bool = False,
        summary: str | None = None,
        failed_rank: RankFailure | None = None,
        rank_error: str | None = None,
    ):
        super().__init__(message)
        self.returncode = returncode
        self.log_path = log_path
        self.tail = tail
        self.pid = pid
        self.timed_out = timed_out
        # One line for a results entry: why it failed, and the rank's error if seen.
        self.summary = summary or message.splitlines()[0]
        self.failed_rank = failed_rank
        self.rank_error = rank_error

    def headline(self, what: str = "the bench") -> str:
        """One line for a terminal: the rank that failed first and its exit status (when
        torchrun names it) or why the launch failed, then the log."""
        if self.failed_rank is not None and not self.timed_out:
            text = f"{what}: {self.failed_rank.describe()}"
            if self.rank_error:
                text += f" ({self.rank_error})"
        else:
            text = self.summary
        return f"{text}; full log: {self.log_path}"


@dataclass(frozen=True)
class LaunchSpec:
    """What to run: `python ARGS`, or `python -m torch.distributed.run ... ARGS`.

    `args` is what follows the interpreter (`["-m", "fwdasv.engine", ...]` or
    `["script.py", ...]`). One process when `nproc_per_node == nnodes == 1`;
    otherwise torchrun, `--standalone` (a free port on this host) for one node
    without an endpoint, torchrun's c10d rendezvous (`--nnodes`, `--node-rank`,
    `--rdzv-endpoint`, `--rdzv-id`) for several hosts, where every host runs
    the same spec but its own `node_rank`. `env` is added to the inherited
    environment after torchrun's variables are stripped from it.
    """

    args: Sequence[str]
    python: str = sys.executable
    nproc_per_node: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_id: str = "fwdasv"
    env: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 3600.0
    # Between SIGTERM and SIGKILL on timeout.
    kill_grace_s: float = 5.0
    cwd: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.args, str):
            raise TypeError("LaunchSpec.args is an argv list, not a command string")
        if self.nproc_per_node < 1 or self.nnodes < 1:
            raise ValueError(
                f"nproc_per_node ({self.nproc_per_node}) and nnodes ({self.nnodes}) must be >= 1"
            )
        if not 0 <= self.node_rank < self.nnodes:
            raise ValueError(f"node_rank {self.node_rank} is not in [0, {self.nnodes})")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise LaunchError(
                f"{self.nnodes} nodes need a rendezvous endpoint (host:port of one of them); "
                "set rdzv_endpoint"
            )
        if self.timeout_s <= 0 or self.kill_grace_s < 0:
            raise ValueError(
                f"timeout_s ({self.timeout_s}) must be > 0 and kill_grace_s "
                f"({self.kill_grace_s}) >= 0"
            )

    @property
    def distributed(self) -> bool:
        return self.nproc_per_node > 1 or self.nnodes > 1

    def argv(self) -> list[str]:
        if not self.distributed:
            return [self.python, *self.args]
        torchrun = [
            self.python,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            str(self.nproc_per_node),
        ]
        if self.nnodes == 1 and not self.rdzv_endpoint:
            torchrun.append("--standalone")
        else:
            torchrun += [
                "--nnodes",
                str(self.nnodes),
                "--node-rank",
                str(self.node_rank),
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                str(self.rdzv_endpoint),
                "--rdzv-id",
                self.rdzv_id,
            ]
        return [*torchrun, *self.args]

    def environ(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The child's environment: `base` (default os.environ) cleaned, plus `env`."""
        base = os.environ if base is None else base
        env = {
            name: value
            for name, value in base.items()
            if name not in STRIPPED_ENV and not name.startswith(STRIPPED_ENV_PREFIXES)
        }
        for name in PASSED_ENV:
            if name in base:
                env[name] = base[name]
        # Progress must reach `echo` as it happens, not when a buffer fills.
        env["PYTHONUNBUFFERED"] = "1"
        env.update(SAFE_PATH_ENV)
        env.update(self.env)
        return env

    def describe(self) -> str:
        return " ".join(self.argv())


def launch(
    spec: LaunchSpec,
    output_json: str | os.PathLike[str],
    log_path: str | os.PathLike[str],
    echo: Callable[[str], None] | None = None,
    *,
    cases: Sequence[str] | None = None,
) -> list[results.CaseResult]:
    """Run `spec`, which writes `output_json`; return its parsed results.

    A stale `output_json` is removed first, so an old result is never read as
    new. `cases`, when given, are the case names the results must hold. A
    non-zero exit is a failure unless the results hold every case (fwdasv's
    engine exits 3 when some cases failed and recorded their errors); a
    missing, unreadable or partial results file is always one.
    """
    output_json = Path(output_json)
    log_path = Path(log_path)
    with contextlib.suppress(FileNotFoundError):
        output_json.unlink()
    completed = run_process(spec, log_path, echo)
    try:
        parsed = results.load(output_json)
        missing = [name for name in cases or () if name not in results.by_case(parsed)]
        problem = f"its results miss case(s) {missing}" if missing else None
    except results.ResultsError as error:
        parsed, problem = [], str(error)
    # After a non-zero exit only a complete, known case list is trusted.
    if problem is None and (completed.returncode == 0 or cases is not None):
        return parsed
    reason = f"exited with status {completed.returncode}"
    raise completed.error(f"{reason}; {problem}" if problem else reason)


@dataclass(frozen=True)
class Completed:
    """A child that exited by itself (`run_process` raises on timeout)."""

    spec: LaunchSpec
    returncode: int
    pid: int
    log_path: Path
    lines: tuple[str, ...]  # the last TAIL_LINES lines
    rank_error: str | None
    failed_rank: RankFailure | None = None
    first_error: str | None = None

    def error(self, reason: str) -> LaunchError:
        if self.failed_rank is not None:
            reason = f"{reason} ({self.failed_rank.describe()})"
        return _error(
            self.spec,
            reason,
            self.returncode,
            self.log_path,
            self.lines,
            self.pid,
            self.rank_error,
            failed_rank=self.failed_rank,
            first_error=self.first_error,
        )


# A helper command (git, an import probe) that takes longer than this is stuck.
HELPER_TIMEOUT_S = 120.0


def run_captured(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = HELPER_TIMEOUT_S,
    text: bool = True,
) -> subprocess.CompletedProcess:
    """A short helper command: an argv list (no shell), output captured, a timeout.

    Raises OSError when it cannot start (no such program or directory) and
    subprocess.TimeoutExpired past `timeout_s`; the caller words both for its user.
    """
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env={**(os.environ if env is None else env), **SAFE_PATH_ENV},
        capture_output=True,
        text=text,
        timeout=timeout_s,
    )


def run_process(
    spec: LaunchSpec,
    log_path: str | os.PathLike[str],
    echo: Callable[[str], None] | None = None,
    *,
    stop: threading.Event | None = None,
) -> Completed:
    """Start `spec`, stream its output to `log_path` and `echo`, wait for it.

    Returns how it exited; raises LaunchError when it cannot start, runs past
    `spec.timeout_s` or is told to `stop` (by another thread: several processes at once),
    after killing every process it started. SIGTERM or SIGHUP meanwhile (`timeout`, a
    cancelled CI job) kills them too before this process ends (`ended_by_signal`): the
    child is in a session of its own, out of reach of a signal to this one's group.
    """
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started: list[tuple[subprocess.Popen[bytes], ProcessTree]] = []

    def end_started() -> None:
        for child, tree in started:
            running = child.returncode is None  # not reaped yet: it may still run
            kill_tree(child, tree, spec.kill_grace_s)
            if running:
                print(
                    f"fwdasv: stopped {spec.argv()[0]} (process group {child.pid} and every "
                    "descendant): this process was told to end",
                    file=sys.stderr,
                    flush=True,
                )

    with ended_by_signal(end_started):
        return _run_process(spec, log_path, echo, stop, started)


def _run_process(
    spec: LaunchSpec,
    log_path: Path,
    echo: Callable[[str], None] | None,
    stop: threading.Event | None,
    started: list[tuple[subprocess.Popen[bytes], ProcessTree]],
) -> Completed:
    argv = spec.argv()
    log = open(log_path, "wb")  # noqa: SIM115 (the reader thread closes it)
    log.write(f"$ {spec.describe()}\n".encode())
    log.flush()
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=spec.environ(),
            cwd=spec.cwd,
            start_new_session=True,
        )
    except OSError as error:
        log.close()
        raise LaunchError(f"cannot start {argv[0]!r}: {error}", log_path=log_path) from None
    reader = _Reader(child, log, echo)
    reader.start()
    tree = ProcessTree(child.pid)
    started.append((child, tree))
    deadline = time.monotonic() + spec.timeout_s
    try:
        while True:
            try:
                returncode = child.wait(timeout=min(1.0, max(deadline - time.monotonic(), 0)))
                break
            except subprocess.TimeoutExpired:
                if stop is not None and stop.is_set():
                    raise LaunchError(f"stopped: {spec.describe()}", log_path=log_path) from None
                if time.monotonic() >= deadline:
                    raise
                tree.refresh()
    except subprocess.TimeoutExpired:
        kill_tree(child, tree, spec.kill_grace_s)
        reader.join(timeout=5.0)
        raise _error(
            spec,
            f"timed out after {spec.timeout_s:g} s and was killed (process group "
            f"{child.pid} and every descendant)",
            None,
            log_path,
            reader.tail,
            child.pid,
            reader.rank_error,
            timed_out=True,
            first_error=reader.first_error,
        ) from None
    except BaseException:
        # Interrupted (Ctrl-C, asv's own kill; SIGTERM and SIGHUP end it in `run_process`):
        # never leave ranks behind.
        kill_tree(child, tree, spec.kill_grace_s)
        raise
    # Whatever outlived the child (a rank torchrun failed to stop) is ended
    # too, and then nothing holds the pipe open.
    if tree.alive():
        kill_tree(child, tree, spec.kill_grace_s)
    reader.join(timeout=10.0)
    return Completed(
        spec,
        returncode,
        child.pid,
        log_path,
        reader.tail,
        reader.rank_error,
        reader.failed_rank,
        reader.first_error,
    )


class _Reader(threading.Thread):
    """Copies the child's output to the log and to `echo`, keeping the tail."""

    def __init__(
        self,
        child: subprocess.Popen[bytes],
        log: BinaryIO,
        echo: Callable[[str], None] | None,
    ):
        super().__init__(name=f"fwdasv-launch-{child.pid}", daemon=True)
        self.child = child
        self.log = log
        self.echo = echo
        self.recent: deque[str] = deque(maxlen=TAIL_LINES)
        self.errors = ErrorScanner()
        self.lock = threading.Lock()

    def run(self) -> None:
        stdout = self.child.stdout
        assert stdout is not None
        with self.log, stdout:
            for raw in iter(stdout.readline, b""):
                self.log.write(raw)
                self.log.flush()
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                with self.lock:
                    self.recent.append(line)
                    self.errors.feed(line)
                if self.echo is not None:
                    # A failing echo (a closed terminal) must not stop the log.
                    with contextlib.suppress(Exception):
                        self.echo(line)

    @property
    def tail(self) -> tuple[str, ...]:
        with self.lock:
            return tuple(self.recent)

    @property
    def rank_error(self) -> str | None:
        with self.lock:
            return self.errors.error_of(self.errors.root_cause)

    @property
    def failed_rank(self) -> RankFailure | None:
        with self.lock:
            return self.errors.root_cause

    @property
    def first_error(self) -> str | None:
        with self.lock:
            return self.errors.first_labelled


def _error(
    spec: LaunchSpec,
    reason: str,
    returncode: int | None,
    log_path: Path,
    lines: Iterable[str],
    pid: int | None,
    rank_error: str | None,
    timed_out: bool = False,
    failed_rank: RankFailure | None = None,
    first_error: str | None = None,
) -> LaunchError:
    """`rank_error` is the failed rank's own error (or the first, when the output does
    not say whose); `first_error` the first in the output, labelled with its rank (set
    whenever any error was seen)."""
    tail = "\n".join(lines)
    what = "torchrun group" if spec.distributed else "bench"
    message = f"The {what} `{spec.describe()}` {reason}."
    if first_error:
        message += f"\nFirst error in its output: {first_error}"
    message += f"\nFull log: {log_path}\nLast lines:\n{tail}"
    summary = f"the {what} {reason}" + (f": {rank_error}" if rank_error else "")
    return LaunchError(
        message,
        summary=summary,
        returncode=returncode,
        log_path=log_path,
        tail=tail,
        pid=pid,
        timed_out=timed_out,
        failed_rank=failed_rank,
        rank_error=rank_error,
    )
