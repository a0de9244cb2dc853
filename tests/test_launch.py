"""fwdasv.launch: argv, environment, results, failures, timeouts and the process tree."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import PROGRAMS, gone

from fwdasv.core import results
from fwdasv.launch import LaunchError, LaunchSpec, launch

FAKE_BENCH = str(PROGRAMS / "fake_bench.py")


def fake(tmp_path: Path, mode: str, *extra: str, cases: str = "a,b", **spec) -> LaunchSpec:
    args = [FAKE_BENCH, "--output-json", str(tmp_path / "out.json"), "--cases", cases]
    return LaunchSpec([*args, "--mode", mode, *extra], **spec)


def test_single_process_returns_results_and_streams_output(tmp_path: Path, clean_env) -> None:
    lines: list[str] = []
    spec = fake(tmp_path, "ok", timeout_s=60)
    assert spec.argv()[1:] == spec.args  # one process, no torchrun
    outcome = launch(
        spec, tmp_path / "out.json", tmp_path / "log", echo=lines.append, cases=["a", "b"]
    )
    assert [r.case for r in outcome] == ["a", "b"]
    assert all(isinstance(r, results.CaseResult) and r.ok for r in outcome)
    assert any("fake bench rank 0" in line for line in lines)
    assert "fake bench rank 0" in (tmp_path / "log").read_text()


def test_stale_results_file_is_never_returned(tmp_path: Path, clean_env) -> None:
    out = tmp_path / "out.json"
    launch(fake(tmp_path, "ok", timeout_s=60), out, tmp_path / "log", cases=["a", "b"])
    assert out.exists()
    # The next run exits 0 but writes nothing: the old file must not pass as its result.
    with pytest.raises(LaunchError, match="no results file") as error:
        launch(fake(tmp_path, "nowrite", timeout_s=60), out, tmp_path / "log", cases=["a", "b"])
    assert error.value.returncode == 0
    assert not out.exists()


def test_partial_results_are_a_failure(tmp_path: Path, clean_env) -> None:
    with pytest.raises(LaunchError, match=r"miss case\(s\) \['b'\]"):
        launch(
            fake(tmp_path, "partial", timeout_s=60),
            tmp_path / "out.json",
            tmp_path / "log",
            cases=["a", "b"],
        )


def test_nonzero_exit_with_every_case_recorded_returns_results(tmp_path: Path, clean_env) -> None:
    spec = fake(tmp_path, "exit3", timeout_s=60)
    outcome = launch(spec, tmp_path / "out.json", tmp_path / "log", cases=["a", "b"])
    assert [r.case for r in outcome] == ["a", "b"]
    # Without the expected case list a non-zero exit cannot be judged complete.
    with pytest.raises(LaunchError, match="exited with status 3"):
        launch(spec, tmp_path / "out.json", tmp_path / "log")


def test_environment_is_stripped_of_torchrun_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stray = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "GROUP_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "TORCHELASTIC_RUN_ID": "old",
        "PET_NNODES": "2",
    }
    kept = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "KEEP_ME": "yes"}
    for name, value in {**stray, **kept}.items():
        monkeypatch.setenv(name, value)
    env_out = tmp_path / "env.json"
    spec = fake(tmp_path, "ok", "--env-out", str(env_out), timeout_s=60, env={"GIVEN": "1"})
    launch(spec, tmp_path / "out.json", tmp_path / "log", cases=["a", "b"])
    child = json.loads(env_out.read_text())
    assert not set(stray) & set(child), sorted(set(stray) & set(child))
    assert {k: child.get(k) for k in kept} == kept
    assert child["GIVEN"] == "1"
    assert child["PYTHONUNBUFFERED"] == "1"


def test_torchrun_argv_for_one_node_and_for_a_rendezvous() -> None:
    one = LaunchSpec(["-m", "x"], python="py", nproc_per_node=2)
    assert one.argv() == [
        "py", "-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone", "-m", "x",
    ]  # fmt: skip
    multi = LaunchSpec(
        ["s.py"], python="py", nproc_per_node=8, nnodes=2, node_rank=1, rdzv_endpoint="h0:29400"
    )
    assert multi.argv() == [
        "py", "-m", "torch.distributed.run", "--nproc-per-node", "8", "--nnodes", "2",
        "--node-rank", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h0:29400",
        "--rdzv-id", "fwdasv", "s.py",
    ]  # fmt: skip
    with pytest.raises(LaunchError, match="rendezvous endpoint"):
        LaunchSpec(["s.py"], nnodes=2)
    with pytest.raises(TypeError, match="argv list"):
        LaunchSpec("python s.py")  # type: ignore[arg-type]


@pytest.mark.slow
def test_rank_that_raises_fails_fast_with_its_error(tmp_path: Path, clean_env) -> None:
    spec = fake(tmp_path, "raise-rank1", nproc_per_node=2, timeout_s=120)
    begin = time.monotonic()
    with pytest.raises(LaunchError) as error:
        launch(spec, tmp_path / "out.json", tmp_path / "log", cases=["a", "b"])
    elapsed = time.monotonic() - begin
    # Rank 0 would wait 120 s; torchrun stops it as soon as rank 1 dies.
    assert elapsed < 60, elapsed
    assert not error.value.timed_out
    assert error.value.returncode not in (0, None)
    assert "First error in its output: RuntimeError: boom from rank 1" in str(error.value)
    assert error.value.log_path == tmp_path / "log"


@pytest.mark.slow
def test_a_peers_error_is_not_given_to_the_rank_that_died_first(tmp_path: Path, clean_env) -> None:
    # Rank 1 dies with no traceback; rank 0 prints the error losing it raised. The
    # headline names rank 1 alone; the full message keeps rank 0's error as rank 0's.
    spec = fake(tmp_path, "peer-error", nproc_per_node=2, timeout_s=120)
    with pytest.raises(LaunchError) as error:
        launch(spec, tmp_path / "out.json", tmp_path / "log", cases=["a", "b"])
    assert error.value.failed_rank is not None
    assert (error.value.failed_rank.rank, error.value.failed_rank.exitcode) == (1, 7)
    assert error.value.rank_error is None
    assert error.value.headline("2 ranks") == (
        f"2 ranks: rank 1 exited with status 7; full log: {tmp_path / 'log'}"
    )
    assert (
        "First error in its output: (rank 0) RuntimeError: [gloo/transport/tcp/pair.cc:534] "
        "Connection closed by peer"
    ) in str(error.value)


@pytest.mark.slow
def test_hanging_rank_is_killed_at_the_timeout_with_the_whole_group(
    tmp_path: Path, clean_env
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    spec = fake(
        tmp_path, "hang", "--pid-dir", str(pids), nproc_per_node=2, timeout_s=8, kill_grace_s=1
    )
    begin = time.monotonic()
    with pytest.raises(LaunchError, match="timed out after 8 s") as error:
        launch(spec, tmp_path / "out.json", tmp_path / "log", cases=["a", "b"])
    assert error.value.timed_out and error.value.returncode is None
    assert time.monotonic() - begin < 30
    rank_pids = [int(p.read_text()) for p in sorted(pids.glob("rank*.pid"))]
    assert len(rank_pids) == 2, "the ranks did not start before the timeout"
    # torchrun's own group is empty, and each rank (in a session of its own,
    # rank 1 ignoring SIGTERM) is gone.
    with pytest.raises(ProcessLookupError):
        os.killpg(error.value.pid, 0)
    for pid in [error.value.pid, *rank_pids]:
        assert gone(pid), f"pid {pid} survived the timeout"


def test_a_killed_tree_is_waited_for_until_it_is_gone() -> None:
    """SIGKILL ends a process only when the kernel next runs it: in CI's nice-19 lane a
    bench's sleeper still ran when its caller had gone on (hw setup's reset beside it; a
    test saw it outlive the run). kill_tree returns once every descendant is gone. The
    kernel's lateness is drawn at the /proc boundary: a descendant that reads as running
    for a few polls after SIGKILL."""
    from fwdasv.process_tree import ProcessTree, kill_tree

    class LateTree(ProcessTree):
        polls_after_kill = 0
        killed = False

        def signal(self, sig: signal.Signals, root_group: bool) -> None:
            self.killed = self.killed or sig == signal.SIGKILL

        def alive(self) -> list[int]:
            if not self.killed:
                return [4242]  # ignores SIGTERM: the grace runs out
            self.polls_after_kill += 1
            return [4242] if self.polls_after_kill <= 3 else []

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    tree = LateTree(child.pid)
    tree.refresh = lambda from_root=True: None  # type: ignore[method-assign]
    kill_tree(child, tree, grace_s=0.1)
    assert tree.killed and tree.polls_after_kill == 4  # polled until it read as gone


def test_timeout_reaches_a_descendant_in_another_session(tmp_path: Path, clean_env) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    spec = fake(tmp_path, "orphan", "--pid-dir", str(pids), timeout_s=3, kill_grace_s=1)
    with pytest.raises(LaunchError, match="timed out"):
        launch(spec, tmp_path / "out.json", tmp_path / "log")
    sleeper = int((pids / "sleeper.pid").read_text())
    try:
        assert gone(sleeper), f"the sleeper {sleeper} survived"
    finally:
        if not gone(sleeper):
            os.kill(sleeper, signal.SIGKILL)


PARENT = """
import sys
from fwdasv.launch import LaunchSpec, launch
spec = LaunchSpec(sys.argv[1:-1], timeout_s=300, kill_grace_s=1)
launch(spec, sys.argv[sys.argv.index("--output-json") + 1], sys.argv[-1])
"""


def _pid_in(path: Path, parent: subprocess.Popen[str]) -> int:
    """The pid the fake bench writes to `path`, once written whole. The bounds are
    generous: test.sh runs these tests niced, and a neighbour at normal priority can
    starve them (a bench starts in about a second on a quiet box)."""
    deadline = time.monotonic() + 300
    while True:
        with contextlib.suppress(OSError, ValueError):
            return int(path.read_text())
        assert parent.poll() is None, f"the caller ended ({parent.returncode}) before {path}"
        assert time.monotonic() < deadline, f"no pid in {path} within 300 s"
        time.sleep(0.1)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_that_ends_the_caller_ends_its_bench_first(
    tmp_path: Path, clean_env, signum: signal.Signals
) -> None:
    """`timeout fwdasv check ...` on an H100 (measurements, section 35): SIGTERM ended the
    check and left its vLLM process (a session of its own) holding 73 GiB of the GPU, and
    the next check's first process failed for memory. The caller now ends the bench and
    every descendant first, then exits 128 + the signal, as the signal would have."""
    pids = tmp_path / "pids"
    pids.mkdir()
    argv = [FAKE_BENCH, "--output-json", str(tmp_path / "out.json"), "--cases", "a"]
    argv += ["--mode", "orphan", "--pid-dir", str(pids), str(tmp_path / "bench.log")]
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, *argv],
        env=os.environ,
        stderr=subprocess.PIPE,
        text=True,
        # As from a shell where the signal ends a process: run under `nohup`, the tests
        # would hand on SIGHUP ignored, and an ignored signal stays ignored (by design).
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    try:
        bench = _pid_in(pids / "rank0.pid", parent)
        sleeper = _pid_in(pids / "sleeper.pid", parent)
        parent.send_signal(signum)
        _, stderr = parent.communicate(timeout=300)
        assert parent.returncode == 128 + signum, stderr
        assert "fwdasv: stopped " in stderr and "this process was told to end" in stderr
        assert gone(bench), f"the bench {bench} outlived its caller"
        assert gone(sleeper), f"the bench's child {sleeper} outlived its caller"
    finally:
        parent.kill()
        for name in ("rank0.pid", "sleeper.pid"):
            with contextlib.suppress(OSError, ValueError):
                pid = int((pids / name).read_text())
                if not gone(pid):
                    os.kill(pid, signal.SIGKILL)


def test_a_bench_never_imports_from_the_callers_working_directory(
    tmp_path: Path, clean_env, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a folder that holds a `fwdasv/` (a clone's parent, another checkout), a
    bench process still imports the installed fwdasv, as every re-measure starts it."""
    shadow = tmp_path / "fwdasv"
    shadow.mkdir()
    (shadow / "__init__.py").write_text(
        "raise ImportError('imported from the working directory')\n"
    )
    monkeypatch.chdir(tmp_path)
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "out" / "bench.json"
    out.parent.mkdir()
    bench = ["--case", "p=4", "--device", "cpu", "--iters", "3", "--samples", "2"]
    spec = LaunchSpec(
        ["-m", "fwdasv.engine", *bench, "--warmup-s", "0", "--output-json", str(out)],
        env={"PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"},
        timeout_s=300,
    )
    (measured,) = launch(spec, out, tmp_path / "out" / "log", cases=["p"])
    assert measured.ok, measured.error
