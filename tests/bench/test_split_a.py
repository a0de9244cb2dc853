"""bench/h200/split_a.sh: part a of the vLLM bundle split here, joined over two device calls."""

from __future__ import annotations

import lzma
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "h200" / "split_a.sh"
SO = "_C_stable_libtorch.abi3.so"


def _run(cwd: Path, mode: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), mode],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("device_keeps_a1", [False, True])
def test_split_here_then_join_over_two_calls_gives_the_library_back(
    tmp_path: Path, device_keeps_a1: bool
) -> None:
    # The device keeps a folder carried by an earlier call (seen on the H200: a1 was still
    # there when a2 came, and join kept a1 a second time instead of joining).
    library = os.urandom(300_000)
    here, there = tmp_path / "here", tmp_path / "there"
    (here / ".vllm-offline" / "a").mkdir(parents=True)
    (here / ".vllm-offline" / "a" / f"{SO}.xz").write_bytes(lzma.compress(library))
    split = _run(here, "split", SPLIT_BYTES="100000")
    assert split.returncode == 0, split.stderr
    env = {"VLLM_SITE": str(tmp_path / "vsite"), "SPLIT_KEPT": str(tmp_path / "kept")}
    for half in ("a1", "a2"):  # each call carries one half and the checkout, not the other
        if not device_keeps_a1:
            shutil.rmtree(there, ignore_errors=True)
        (there / ".vllm-offline").mkdir(parents=True, exist_ok=True)
        shutil.copytree(here / ".vllm-offline" / half, there / ".vllm-offline" / half)
        joined = _run(there, "join", **env)
        assert joined.returncode == 0, joined.stderr
    assert (tmp_path / "vsite" / "vllm" / SO).read_bytes() == library
    assert not (tmp_path / "kept").exists(), "the kept half removed once joined"
    again = _run(there, "join", **env)
    assert again.returncode == 0 and "already unpacked" in again.stdout


def test_the_second_half_without_the_first_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".vllm-offline" / "a2").mkdir(parents=True)
    (tmp_path / ".vllm-offline" / "a2" / "part").write_bytes(b"x")
    done = _run(tmp_path, "join", VLLM_SITE=str(tmp_path / "v"), SPLIT_KEPT=str(tmp_path / "k"))
    assert done.returncode == 2 and "carry a1 first" in done.stderr


def test_staging_keeps_the_callers_own_variables(tmp_path: Path) -> None:
    # The bundle's stage.sh sets S (and B) at its top level; sparse_bisect.sh's S is its
    # output folder, and with it overwritten its summary went to the bundle's site.
    part = tmp_path / ".vllm-offline" / "c"
    part.mkdir(parents=True)
    (part / "stage.sh").write_text(
        'B=bundle\nS=/tmp/vsite\nmissing=""\nexport VLLM_OFFLINE_HOME=/tmp/vsite/offline\n'
    )
    stage = ROOT / "bench" / "h200" / "stage.sh"
    done = subprocess.run(
        ["bash", "-c", f'. "{stage}"; S=mine B=ours; stage_vllm; echo "$S $B $VLLM_OFFLINE_HOME"'],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "VLLM_OFFLINE_HOME"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-3:] == ["mine", "ours", "/tmp/vsite/offline"]
