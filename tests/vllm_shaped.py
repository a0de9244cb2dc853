"""A vLLM-shaped package in a real git repository, and its compiled base (issue 18's tests).

The package is `vllm/` (a real vLLM's layout in miniature): Python under git, a
stand-in compiled extension `vllm/_C.abi3.so` and a generated `_version.py`
that only the base (an "installed" copy) holds, a `csrc/`, `CMakeLists.txt`
and a `setup.py` with an extension list. `vllm.speed.step()` sleeps STEP_S, or
SLOW_S from the slow commit on; `vllm.compiled()` reads the stand-in extension.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

AUTHOR = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
VERSION = "0.9.0"
STEP_S = 0.002
SLOW_S = 0.008
COMPILED = "stand-in compiled extension\n"
INIT = '''from pathlib import Path


def compiled() -> str:
    """The stand-in extension: only the base has it."""
    return (Path(__file__).parent / "_C.abi3.so").read_text()
'''
SPEED = "import time\n\nDELAY_S = {delay}\n\n\ndef step():\n    time.sleep(DELAY_S)\n"
SETUP = (
    "from setuptools import setup\n\next_modules = [\n"
    '    CMakeExtension(name="vllm._C"),  # noqa: F821\n]\n\n'
    'setup(name="vllm", ext_modules=ext_modules)\n'
)
BENCHMARK = """import vllm
import vllm.speed


class Vllm:
    number = 1
    repeat = 12
    warmup_time = 0
    min_run_count = 1

    def time_step(self):
        vllm.speed.step()

    def track_compiled_chars(self):
        return len(vllm.compiled())
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *AUTHOR, *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()


@dataclass(frozen=True)
class VllmHistory:
    repo: Path
    base: Path  # holds vllm/ with the compiled stand-in
    commits: tuple[str, ...]  # oldest first; [0] is tagged v<VERSION>
    subjects: tuple[str, ...]

    def index(self, subject: str) -> int:
        return self.subjects.index(subject)


SLOW = "speed: a slower step"
CSRC = "csrc: a comment"
UNDO = "csrc: the comment taken out again"  # compiled sources equal the base's again
STEPS = (
    ("docs: a note", lambda r: (r / "docs.md").write_text("notes\n")),
    ("speed: a comment", lambda r: _append(r / "vllm" / "speed.py", "# the step\n")),
    (CSRC, lambda r: _append(r / "csrc" / "kernels.cu", "// a comment\n")),
    (UNDO, lambda r: (r / "csrc" / "kernels.cu").write_text("// kernels\n")),
    (SLOW, lambda r: (r / "vllm" / "speed.py").write_text(SPEED.format(delay=SLOW_S))),
    ("docs: more", lambda r: _append(r / "docs.md", "more\n")),
    ("docs: the end", lambda r: _append(r / "docs.md", "end\n")),
)


def _append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def build(root: Path, steps=STEPS) -> VllmHistory:
    """The repository (root/vllm-repo) and the base (root/base/vllm, as installed)."""
    repo = root / "vllm-repo"
    (repo / "vllm").mkdir(parents=True)
    (repo / "csrc").mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / ".gitignore").write_text("*.so\n_version.py\n__pycache__/\n")
    (repo / "vllm" / "__init__.py").write_text(INIT)
    (repo / "vllm" / "speed.py").write_text(SPEED.format(delay=STEP_S))
    (repo / "csrc" / "kernels.cu").write_text("// kernels\n")
    (repo / "CMakeLists.txt").write_text("project(vllm_extensions)\n")
    (repo / "setup.py").write_text(SETUP)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"vLLM {VERSION}")
    git(repo, "tag", f"v{VERSION}")
    commits, subjects = [git(repo, "rev-parse", "HEAD")], [f"vLLM {VERSION}"]
    base = root / "base"
    (base / "vllm").mkdir(parents=True)
    for name in ("__init__.py", "speed.py"):
        (base / "vllm" / name).write_text((repo / "vllm" / name).read_text())
    (base / "vllm" / "_C.abi3.so").write_text(COMPILED)
    (base / "vllm" / "_version.py").write_text(f"__version__ = version = '{VERSION}'\n")
    info = base / f"vllm-{VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n")
    for subject, change in steps:
        change(repo)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject)
        commits.append(git(repo, "rev-parse", "HEAD"))
        subjects.append(subject)
    return VllmHistory(repo, base, tuple(commits), tuple(subjects))


def write_project(root: Path, history: VllmHistory, **fwdasv: object) -> Path:
    """An asv project over the history in the new mode; its asv.conf.json."""
    import json

    from fwdasv.asv.scaffold import project_config

    project = root / "project"
    (project / "benchmarks").mkdir(parents=True)
    (project / "benchmarks" / "__init__.py").write_text("")
    (project / "benchmarks" / "vllm_bench.py").write_text(BENCHMARK)
    config = project_config(str(history.repo), "vllm")
    config["fwdasv"].update({"vllm_base": str(history.base), **fwdasv})
    config["launch_method"] = "spawn"
    path = project / "asv.conf.json"
    path.write_text(json.dumps(config, indent=2))
    return path
