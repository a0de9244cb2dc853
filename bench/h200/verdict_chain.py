"""A small real regression through asv, found and confirmed; a no-op after it stays clean.

Builds `gpulm`, a git repository of a model package whose target is fwdasv's
decoder with Llama-3-8B-sized layers, with a history where one commit makes
the forward slower the way real code does (an extra elementwise kernel per
layer: a per-head gain on the attention output, about 1% of a batch-1
decode) and the commits after it change nothing measurable. Then, as a user
would: `fwdasv init`, `fwdasv hw machine`, `asv run --record-samples ALL`,
`fwdasv regressions --format json` (findings from the stored results), and
`fwdasv confirm` on what it found. Writes summary.json and the logs to --out.

    python bench/h200/verdict_chain.py --out /tmp/chain            # GPU: CUDA graphs
    python bench/h200/verdict_chain.py --out /tmp/chain --device cpu --quick   # dry run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PACKAGE = "gpulm"

BENCH = '''"""fwdasv target of gpulm: the decoder with Llama-3-8B-sized layers."""

from fwdasv.targets.decoder import SIZES, DecoderTarget
from dataclasses import replace

ATTENTION_GAIN = {gain}
NUM_LAYERS = {num_layers}


class GpuLM(DecoderTarget):
    def _attention(self, *args, **kwargs):
        out = super()._attention(*args, **kwargs)
        if ATTENTION_GAIN:
            # A per-head gain on the attention output (ones: the same numbers, one more kernel).
            out = out * self.gain
        return out


def target(device="cpu", dtype="float32", stage=0, num_stages=1, seed=0, num_layers=None):
    config = replace(SIZES["{size}"], num_layers=num_layers or NUM_LAYERS)
    model = GpuLM(config, device, dtype, stage, num_stages, seed, name="gpulm")
    import torch

    model.gain = torch.ones((), device=model.device, dtype=model.dtype)
    return model
'''


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def build_repo(
    repo: Path, size: str, num_layers: int, before: int, after: int
) -> tuple[list[str], int]:
    """The history; returns its hashes and the index of the slower commit."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / PACKAGE).mkdir()
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{PACKAGE}"\nversion = "0.1.0"\ndependencies = []\n\n'
        f'[tool.setuptools]\npackages = ["{PACKAGE}"]\n'
    )
    (repo / PACKAGE / "__init__.py").write_text('"""gpulm."""\n')
    steps = [("Initial model package", False)]
    steps += [(f"Docs: section {i}", False) for i in range(1, before)]
    steps += [("Scale attention output by a per-head gain", True)]
    steps += [(f"Tests: case {i}", True) for i in range(1, after + 1)]
    hashes = []
    for index, (subject, gain) in enumerate(steps):
        (repo / PACKAGE / "bench.py").write_text(
            BENCH.format(gain=gain, size=size, num_layers=num_layers)
        )
        (repo / "README.md").write_text(f"# gpulm\n\n{subject}\n" * (index + 1))
        stamp = f"2026-11-{index + 1:02d}T12:00:00+00:00"
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "gpulm",
            "GIT_AUTHOR_EMAIL": "gpulm@example.com",
            "GIT_COMMITTER_NAME": "gpulm",
            "GIT_COMMITTER_EMAIL": "gpulm@example.com",
            "GIT_AUTHOR_DATE": stamp,
            "GIT_COMMITTER_DATE": stamp,
        }
        git(repo, "add", "-A", env=env)
        git(repo, "commit", "-q", "--no-gpg-sign", "-m", subject, env=env)
        hashes.append(git(repo, "rev-parse", "HEAD"))
    return hashes, before


def run(out: Path, name: str, argv: list[str], timeout: float) -> tuple[int, str]:
    started = time.perf_counter()
    with open(out / f"{name}.log", "w") as log:
        try:
            done = subprocess.run(
                argv, stdout=subprocess.PIPE, stderr=log, text=True, timeout=timeout
            )
            code, text = done.returncode, done.stdout
        except subprocess.TimeoutExpired:
            code, text = 124, ""
    (out / f"{name}.out").write_text(text)
    print(f"[chain] {name}: exit {code} in {time.perf_counter() - started:.0f} s", flush=True)
    return code, text


def save(out: Path, summary: dict) -> None:
    """summary.json as it stands: a run cut short keeps what it measured."""
    (out / "summary.json").write_text(json.dumps(summary, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a CPU dry run)")
    parser.add_argument("--before", type=int, default=6, help="commits before the slower one")
    # 4 after: a level must hold 4 commits before fwdasv's detector reports it.
    parser.add_argument("--after", type=int, default=4, help="commits after it (no-ops)")
    parser.add_argument(
        "--num-layers", type=int, default=4, help="decoder layers (8B-sized; 4: ~1.5%% step)"
    )
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("CHAIN_WORK", "/tmp/fwdasv-chain"))
    if work.exists():
        subprocess.run(["rm", "-rf", str(work)], check=True)
    size = "tiny" if args.quick else "llama3-8b-layers"
    case = "decode_bs8=8*1@256" if args.quick else "decode_bs1_1k=1*1@1024"
    hashes, slow = build_repo(work / "gpulm", size, args.num_layers, args.before, args.after)
    summary: dict = {
        "hashes": hashes,
        "slow_index": slow,
        "slow_commit": hashes[slow],
        "case": case,
        "num_layers": args.num_layers,
    }
    fwdasv = [sys.executable, "-m", "fwdasv"]
    code, _ = run(
        out,
        "init",
        [
            *fwdasv,
            "init",
            "--repo",
            str(work / "gpulm"),
            "--target",
            f"{PACKAGE}.bench:target",
            "--case",
            case,
            "--dir",
            str(work / "asv"),
        ],
        300,
    )
    summary["init_exit"] = code
    config = str(work / "asv" / "asv.conf.json")
    code, text = run(out, "machine", [*fwdasv, "hw", "machine", "--name", "chainbox"], 120)
    summary["machine_exit"] = code
    started = time.perf_counter()
    code, _ = run(
        out,
        "asv_run",
        [
            sys.executable,
            "-m",
            "asv",
            "run",
            "--config",
            config,
            "--record-samples",
            "--launch-method",
            "spawn",
            "--machine",
            "chainbox",
            "--show-stderr",
            "ALL",
        ],
        float(os.environ.get("CHAIN_ASV_TIMEOUT_S", 900)),
    )
    summary.update(asv_run_exit=code, asv_run_s=round(time.perf_counter() - started, 1))
    save(out, summary)
    code, text = run(
        out, "regressions", [*fwdasv, "regressions", "--config", config, "--format", "json"], 300
    )
    summary["regressions_exit"] = code
    try:
        found = json.loads(text)["regressions"]
    except (ValueError, KeyError):
        found = []
    summary["findings"] = found
    summary["found_at_slow_commit"] = [f for f in found if f.get("after_commit") == hashes[slow]]
    later = set(hashes[slow + 1 :])
    summary["findings_after_slow_commit"] = [f for f in found if f.get("after_commit") in later]
    save(out, summary)
    started = time.perf_counter()
    code, text = run(
        out, "confirm", [*fwdasv, "confirm", "--config", config, "--format", "json"], 900
    )
    summary.update(confirm_exit=code, confirm_s=round(time.perf_counter() - started, 1))
    try:
        summary["confirmed"] = json.loads(text)
    except ValueError:
        summary["confirmed"] = None
    save(out, summary)
    print(json.dumps({k: v for k, v in summary.items() if k != "hashes"}, indent=2)[:4000])


if __name__ == "__main__":
    main()
