"""A local vLLM git history built from an installed vLLM's Python sources.

    python bench/h200/make_vllm_history.py --base /tmp/vsite --out /tmp/vllm-repo

`--base` holds an installed `vllm/` package (a site-packages, or the offline bundle's
unpacked tree); its Python files (no compiled extensions, no `__pycache__`) become the first
commit, tagged `v<version>`, with a stand-in `csrc/`, `CMakeLists.txt` and `setup.py` (a
wheel carries none). Then, one commit each, oldest first: 1-4 Python-only changes off the
forward; 5 Qwen3's attention output kept in float32 across the head merge and cast back (two
more elementwise kernels per layer: about 1% slower on a decode); 6 Python-only; 7 a comment
in csrc/ (compiled sources differ from the base's: not measurable over it); 8 the comment
taken out again; 9-12 Python-only. Prints one line per commit (`HASH SUBJECT`) and writes
them to `<out>/../<name>.commits` too. The compiled files stay out of git (`.gitignore`):
per-commit installs take them from the base.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

AUTHOR = ["-c", "user.name=fwdasv", "-c", "user.email=fwdasv@localhost"]
SLOW_SUBJECT = "Qwen3: keep the attention output in float32 across the head merge"
CSRC_SUBJECT = "csrc: note on the cache kernels' block layout"
CSRC_UNDO_SUBJECT = "csrc: the block layout note moves to the docs"
SLOW_OLD = (
    "        attn_output = self.attn(q, k, v)\n        output, _ = self.o_proj(attn_output)\n"
)
SLOW_NEW = (
    "        attn_output = self.attn(q, k, v)\n"
    "        # Keep the attention output in float32 across the head merge (numerics).\n"
    "        attn_output = attn_output.float().to(q.dtype)\n"
    "        output, _ = self.o_proj(attn_output)\n"
)
SETUP_PY = '''"""Stand-in for vLLM's setup.py: the extension list the compiled-code guard reads."""
from setuptools import setup

ext_modules = [
    CMakeExtension(name="vllm._C_stable_libtorch"),  # noqa: F821
    CMakeExtension(name="vllm.vllm_flash_attn._vllm_fa3_C"),  # noqa: F821
]

setup(name="vllm", ext_modules=ext_modules)
'''
CMAKE = "cmake_minimum_required(VERSION 3.26)\nproject(vllm_extensions LANGUAGES CXX CUDA)\n"
CSRC = (
    "// Stand-in for vLLM's csrc/: the offline bundle carries the compiled extensions,\n"
    "// not their sources. A change here is a change of compiled code.\n"
    "#include <cstdint>\n"
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *AUTHOR, *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout.strip()


def base_version(vllm_dir: Path) -> str:
    text = (vllm_dir / "_version.py").read_text()
    found = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", text)
    if not found:
        sys.exit(f"{vllm_dir / '_version.py'}: no __version__ found")
    return found.group(1)


def copy_python(base: Path, repo: Path) -> None:
    def ignore(_directory: str, names: list[str]) -> set[str]:
        return {n for n in names if n == "__pycache__" or n.endswith((".so", ".pyc"))}

    shutil.copytree(base / "vllm", repo / "vllm", ignore=ignore)


def append(path: Path, text: str) -> None:
    with path.open("a") as handle:
        handle.write(text)


def commit(repo: Path, subject: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", subject)
    return git(repo, "rev-parse", "HEAD")


def start_repo(base: Path, repo: Path) -> list[tuple[str, str]]:
    """A new repository at `repo` whose first commit (tagged with the version) is the
    installed vLLM's Python under `base`, with a csrc/ and build files of its own; that
    commit, as `[(hash, "base")]`."""
    if not (base / "vllm" / "__init__.py").is_file():
        sys.exit(f"{base}: no installed vllm/ package here (give the directory that holds vllm/)")
    if repo.exists():
        sys.exit(f"{repo}: exists; give a new directory")
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    copy_python(base, repo)
    (repo / ".gitignore").write_text("*.so\n__pycache__/\n*.pyc\n")
    (repo / "csrc").mkdir()
    (repo / "csrc" / "cache_kernels.cu").write_text(CSRC)
    (repo / "CMakeLists.txt").write_text(CMAKE)
    (repo / "setup.py").write_text(SETUP_PY)
    version = base_version(base / "vllm")
    made = [(commit(repo, f"vLLM {version} (Python sources of an installed vLLM)"), "base")]
    git(repo, "tag", f"v{version}")
    return made


def build(base: Path, repo: Path) -> list[tuple[str, str]]:
    made = start_repo(base, repo)
    docs = repo / "docs.md"
    qwen3 = repo / "vllm" / "model_executor" / "models" / "qwen3.py"
    envs = repo / "vllm" / "envs.py"
    steps = [
        ("docs: how to track forward latency", lambda: docs.write_text("# Notes\n")),
        (
            "envs: say what VLLM_CACHE_ROOT holds",
            lambda: append(envs, "\n# Cache root: compile and model-info caches.\n"),
        ),
        (
            "docs: a line on dummy weights",
            lambda: append(docs, "Dummy weights need a config only.\n"),
        ),
        (
            "qwen3: a comment on the layer's norms",
            lambda: append(qwen3, "\n# Qwen3 normalizes q and k per head.\n"),
        ),
        (SLOW_SUBJECT, lambda: _slow(qwen3)),
        ("docs: the attention backends", lambda: append(docs, "FA3 on Hopper.\n")),
        (
            CSRC_SUBJECT,
            lambda: append(
                repo / "csrc" / "cache_kernels.cu",
                "// Blocks are [num_blocks, block_size, heads, dim].\n",
            ),
        ),
        (
            CSRC_UNDO_SUBJECT,
            lambda: (repo / "csrc" / "cache_kernels.cu").write_text(CSRC),
        ),
        (
            "envs: a comment on logging",
            lambda: append(envs, "# Logging goes to stdout by default.\n"),
        ),
        ("docs: CUDA graphs", lambda: append(docs, "One graph per exact batch.\n")),
        ("docs: prefix caching is off in the bench", lambda: append(docs, "No prefix caching.\n")),
        ("docs: the end", lambda: append(docs, "That is all.\n")),
    ]
    for subject, change in steps:
        change()
        made.append((commit(repo, subject), subject))
    return made


def _slow(qwen3: Path) -> None:
    text = qwen3.read_text()
    if text.count(SLOW_OLD) != 1:
        sys.exit(f"{qwen3}: the attention block is not where vLLM 0.33 has it")
    qwen3.write_text(text.replace(SLOW_OLD, SLOW_NEW))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, type=Path, help="directory holding vllm/")
    parser.add_argument("--out", required=True, type=Path, help="the new repository")
    args = parser.parse_args()
    made = build(args.base.resolve(), args.out.resolve())
    lines = [f"{commit_hash} {subject}" for commit_hash, subject in made]
    listing = args.out.resolve().parent / f"{args.out.name}.commits"
    listing.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"{len(made)} commits in {args.out} (listed in {listing})", file=sys.stderr)
    os.sync()


if __name__ == "__main__":
    main()
