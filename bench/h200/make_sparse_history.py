"""A 16-commit local vLLM history for the sparse workflow: --steps, confirm, bisect.

    python bench/h200/make_sparse_history.py --base /tmp/vsite --out /tmp/vllm-sparse

The first commit is an installed vLLM's Python sources (make_vllm_history.py's base:
tagged `v<version>`, with stand-in csrc/, CMakeLists.txt and setup.py). Then 15 commits,
oldest first, every one a comment or a docs line except three:

- commit 8 (`SLOW_SUBJECT`), this script's own ~1% Python-only slowdown: every 7th of
  Qwen3's decoder layers (4 of Qwen3-0.6B's 28) rounds its MLP output through float32
  before the residual (two more elementwise kernels there; in all 28 layers it read
  +6.7% on decode_bs8_1k on the H200, 2026-12-04);
- commit 9 (`CSRC_SUBJECT`) adds a comment to csrc/: compiled sources differ from the
  base's, so the guard refuses it (untestable: bisect skips it unmeasured); commit 10
  takes it out again (measurable).

`asv run --steps 4 ALL` measures commits 3 7 11 15 (asv's pick_n on the newest-first
list): the step lies between 7 and 11 (2 measured commits a side), and bisect's first
probe of 7..11 falls on the csrc commit, its second on the slow one. Prints `HASH SUBJECT`
per commit and writes them to `<out>/../<name>.commits`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_vllm_history import CSRC, append, commit, start_repo

COMMITS = 16
STEPS = 4  # asv run --steps: commits 3 7 11 15
SLOW_INDEX = 8
CSRC_INDEX = 9  # and CSRC_INDEX + 1 takes it out again (measurable again)
SLOW_SUBJECT = "Qwen3: round the MLP output through float32 before the residual"
CSRC_SUBJECT = "csrc: a note on the cache kernels' strides"
CSRC_UNDO_SUBJECT = "csrc: the strides note moves to the docs"
SLOW_INIT_OLD = "        self.hidden_size = config.hidden_size\n"
SLOW_INIT_NEW = (
    "        self.hidden_size = config.hidden_size\n"
    "        self.round_mlp = extract_layer_index(prefix) % 7 == 0\n"
)
SLOW_OLD = (
    "        hidden_states = self.mlp(hidden_states)\n        return hidden_states, residual\n"
)
SLOW_NEW = (
    "        hidden_states = self.mlp(hidden_states)\n"
    "        if self.round_mlp:\n"
    "            # Round the MLP output through float32 before the residual add (numerics).\n"
    "            hidden_states = hidden_states.float().to(residual.dtype)\n"
    "        return hidden_states, residual\n"
)


def _slow(qwen3: Path) -> None:
    text = qwen3.read_text()
    for old, new, what in (
        (SLOW_INIT_OLD, SLOW_INIT_NEW, "__init__'s hidden_size"),
        (SLOW_OLD, SLOW_NEW, "MLP step"),
    ):
        if text.count(old) != 1:
            sys.exit(f"{qwen3}: Qwen3DecoderLayer's {what} is not where vLLM 0.33 has it")
        text = text.replace(old, new)
    qwen3.write_text(text)


def build(base: Path, repo: Path) -> list[tuple[str, str]]:
    made = start_repo(base, repo)
    docs = repo / "docs.md"
    docs.write_text("# Notes\n")
    envs = repo / "vllm" / "envs.py"
    qwen3 = repo / "vllm" / "model_executor" / "models" / "qwen3.py"
    for index in range(1, COMMITS):
        if index == SLOW_INDEX:
            _slow(qwen3)
            subject = SLOW_SUBJECT
        elif index == CSRC_INDEX:
            append(repo / "csrc" / "cache_kernels.cu", "// Strides follow the block layout.\n")
            subject = CSRC_SUBJECT
        elif index == CSRC_INDEX + 1:
            (repo / "csrc" / "cache_kernels.cu").write_text(CSRC)
            subject = CSRC_UNDO_SUBJECT
        elif index % 3 == 0:
            append(envs, f"\n# Note {index}: environment variables are read once.\n")
            subject = f"envs: note {index}"
        else:
            append(docs, f"Note {index}.\n")
            subject = f"docs: note {index}"
        made.append((commit(repo, subject), subject))
    return made


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
