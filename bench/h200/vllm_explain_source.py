"""The checks and figures of bench/h200/vllm_explain_source.sh (vLLM on an H200), from its files.

    python bench/h200/vllm_explain_source.py commits vllm-repo.commits    # prints GOOD BAD
    python bench/h200/vllm_explain_source.py summarize --res DIR --repo REPO --good G --bad B --status N

`commits`: the slow commit of make_vllm_history.py's history (by its subject) and its parent.
`summarize`: reads what `fwdasv explain --format json --profile-dir DIR/profiles` left in DIR
(explain.json, explain.err, the profiles), renders the table from the same profiles (each row
marked where the commit changed its file: `git diff --name-only` in REPO), copies each
profile's kernels.json to DIR/kernels/, and writes DIR/summary.json: the checks (exit_1,
kernel_has_op, names_qwen3_line: the top slower row's line is the added cast in qwen3.py,
changed_here, eager_pass_under_20pct: the eager passes' share of explain's time), the top row
(kernel, op, line), every standing row as `kernel <- op <- line`, explain's time line, each
profile's attribution and eager-pass seconds. Exit 0 when every check passes.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
QWEN3 = "vllm/model_executor/models/qwen3.py"


def pick_commits(listing: Path) -> tuple[str, str]:
    sys.path.insert(0, str(ROOT / "bench" / "h200"))
    from make_vllm_history import SLOW_SUBJECT

    lines = [line.split(" ", 1) for line in listing.read_text().splitlines() if line.strip()]
    at = next(i for i, (_, subject) in enumerate(lines) if subject == SLOW_SUBJECT)
    return lines[at - 1][0], lines[at][0]


def eager_share(times: str) -> float | None:
    """The eager passes' share of explain (`..., 2.1% of explain), ...`), or None."""
    found = re.search(r"([0-9.]+)% of explain", times)
    return float(found.group(1)) if found else None


def summarize(res: Path, repo: Path, good: str, bad: str, status: int) -> dict[str, Any]:
    from fwdasv.analysis.explain import kernel_diff
    from fwdasv.analysis.explain.kernel_diff_format import format_diff, where
    from fwdasv.core.kernels import load_summary

    err = (res / "explain.err").read_text() if (res / "explain.err").exists() else ""
    report = json.loads((res / "explain.json").read_text())
    profiles = sorted((res / "profiles").glob("*/*.rank0.kernels.json"))
    (res / "kernels").mkdir(exist_ok=True)
    for path in profiles:  # the traces stay behind: tens of MB each
        (res / "kernels" / f"{path.parent.name}.{path.name}").write_text(path.read_text())

    def side(label: str) -> list[Any]:
        return [load_summary(p) for p in profiles if p.parent.name.startswith(label)]

    changed = subprocess.run(
        ["git", "-C", str(repo), "diff", "--name-only", good, bad],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    diff = kernel_diff.mark_changed(kernel_diff.diff_rounds(side("good"), side("bad")), changed)
    table = format_diff(diff, "table", top=15, good=good[:8], bad=bad[:8])
    (res / "explain.txt").write_text(table + "\n")
    print(table)
    standing = [row for row in report["kernels"] if row["stands_out"] and row["delta_us"] > 0]
    top = standing[0] if standing else {}
    source = top.get("source") or {}
    times = next((line for line in err.splitlines() if line.startswith("time: ")), "")
    share = eager_share(times)
    checks = {
        "exit_1": status == 1,
        "kernel_has_op": bool(top.get("op")),
        "names_qwen3_line": source.get("file") == QWEN3 and "float()" in source.get("code", ""),
        "changed_here": top.get("changed_here") is True,
        "eager_pass_under_20pct": share is not None and share <= 20,
    }
    summary = {
        "good": good,
        "bad": bad,
        "explain_exit": status,
        "checks": checks,
        "top": {
            "kernel": top.get("name"),
            "op": top.get("op"),
            "source": source,
            "change": top.get("change"),
            "delta_us": top.get("delta_us"),
            "changed_here": top.get("changed_here"),
        },
        "rows": [where(row) for row in diff.stands_out],
        "times": times,
        "eager_pct": share,
        "attribution": {p.parent.name: load_summary(p).attribution for p in profiles},
        "attribution_s": {p.parent.name: load_summary(p).attribution_s for p in profiles},
        "notes": report.get("notes"),
    }
    (res / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    print(times)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    commits = sub.add_parser("commits")
    commits.add_argument("listing", type=Path)
    run = sub.add_parser("summarize")
    run.add_argument("--res", type=Path, required=True)
    run.add_argument("--repo", type=Path, required=True)
    run.add_argument("--good", required=True)
    run.add_argument("--bad", required=True)
    run.add_argument("--status", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "commits":
        print(*pick_commits(args.listing))
        return 0
    try:
        summary = summarize(args.res, args.repo, args.good, args.bad, args.status)
    except (OSError, ValueError, subprocess.CalledProcessError) as error:
        print(f"FAIL  no summary: {error}")
        return 2
    return 0 if all(summary["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
