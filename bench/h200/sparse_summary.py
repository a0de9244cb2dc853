"""summary.json of bench/h200/sparse_bisect.sh: each step's seconds and what it showed.

    python bench/h200/sparse_summary.py OUT/sparse --slow HASH --csrc HASH [--started T]

Reads the step outputs sparse_bisect.sh leaves in OUT/sparse (seconds.tsv, measured.txt,
regressions_before.json, confirm.txt, bisect.json, regressions_after.json, and
bisect_cold.json with COLD=1) and checks what the issue asks of the run: `asv run
--steps` left the slow commit unmeasured, a finding's range spans it, one confirm judged
every finding of the pair (its processes and seconds), bisect skipped the csrc commit
unmeasured and named the slow one, recorded as `culprit.commit` on each finding of the
range. Prints the JSON; exits 0 when every check holds, 1 otherwise (`checks` names the
failing ones). A missing output is a failed check,
never an exception: the lead reads what came back.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def steps(out: Path) -> list[dict[str, Any]]:
    """seconds.tsv: one line per step run (a step cut short and run again has two)."""
    rows = []
    for line in _text(out / "seconds.tsv").splitlines():
        name, seconds, code = [*line.split("\t"), "", ""][:3]
        try:
            rows.append({"step": name, "seconds": float(seconds), "exit": int(code)})
        except ValueError:
            continue
    return rows


def findings_spanning(document: Any, commit: str) -> list[dict[str, Any]]:
    """The findings of a regressions JSON whose range holds `commit`."""
    listed = document.get("regressions", []) if isinstance(document, dict) else []
    return [f for f in listed if commit in [c.get("hash") for c in f.get("commits", [])]]


def confirm_figures(text: str) -> dict[str, Any]:
    """confirm's own lines: each pair's findings and bench processes, and its finding lines."""
    judged = re.findall(r"pair (\w+)\.\.(\w+): (\d+) finding\(s\) judged from (\d+) bench", text)
    return {
        "pairs": [
            {"a": a, "b": b, "findings": int(n), "bench_processes": int(p)} for a, b, n, p in judged
        ],
        "lines": [
            line.strip()
            for line in text.splitlines()
            if line.startswith(("pair ", "["))
            or line.strip().startswith(("cost:", "confirmed", "not"))
        ],
    }


def summarize(
    out: Path, slow: str, csrc: str, started: float | None, cold_only: bool = False
) -> dict[str, Any]:
    measured = _text(out / "measured.txt").split()
    before = _json(out / "regressions_before.json")
    after = _json(out / "regressions_after.json")
    bisected = _json(out / "bisect.json") or []
    ran = steps(out)
    spanning = findings_spanning(before, slow)
    named = findings_spanning(after, slow)
    culprits = [(f.get("culprit") or {}) for f in named]
    probes = [p for r in bisected for p in r.get("probes", [])]
    csrc_probes = [p for p in probes if p.get("commit") == csrc]
    results = [
        {
            "benchmark": r.get("benchmark"),
            "case": r.get("case"),
            "answer": r.get("answer"),
            "first_bad": r.get("first_bad"),
            "percent": r.get("percent"),
            "ends": r.get("ends"),
            "bench_runs": r.get("bench_runs"),
            "bench_processes": r.get("bench_processes"),
            "probes": [
                {k: p.get(k) for k in ("commit", "verdict", "processes", "decided_by", "text")}
                for p in r.get("probes", [])
            ],
        }
        for r in bisected
    ]
    # ONLY=cold: the main project's steps did not run, so only the cold bisect is checked.
    checks = (
        {}
        if cold_only
        else {
            "slow commit not measured by asv run --steps": bool(measured)
            and slow[:8] not in measured,
            "a finding's range spans the slow commit": bool(spanning),
            "every finding of the range confirmed": bool(named)
            and all(f.get("status") == "confirmed" for f in named),
            "bisect skipped the csrc commit unmeasured": bool(csrc_probes)
            and all(
                p.get("decided_by") == "untestable" and not p.get("processes") for p in csrc_probes
            ),
            "bisect named the slow commit": bool(results)
            and all(r["first_bad"] == slow for r in results),
            "culprit.commit is the slow commit on every finding of the range": bool(culprits)
            and all(c.get("commit") == slow for c in culprits),
        }
    )
    cold = _json(out / "bisect_cold.json")
    if isinstance(cold, dict) or cold_only:
        checks["by hand from no stored samples (COLD=1): the slow commit"] = (
            isinstance(cold, dict) and cold.get("first_bad") == slow
        )
    seconds: dict[str, float] = {}
    for row in ran:
        seconds[row["step"]] = seconds.get(row["step"], 0.0) + row["seconds"]
    return {
        "ok": all(checks.values()),
        "checks": checks,
        "slow": slow,
        "csrc": csrc,
        "measured": measured,
        "seconds": seconds,
        "steps": ran,
        "this_call_s": None if started is None else round(time.time() - started, 1),
        "findings_before": [
            {k: f.get(k) for k in ("case", "status", "before_commit", "after_commit", "percent")}
            for f in (before or {}).get("regressions", [])
        ]
        if isinstance(before, dict)
        else None,
        "confirm": confirm_figures(_text(out / "confirm.txt")),
        "bisect": results,
        "cold": None
        if not isinstance(cold, dict)
        else {
            k: cold.get(k)
            for k in ("answer", "first_bad", "reason", "ends", "bench_runs", "bench_processes")
        },
        "culprits": [
            {"case": f.get("case"), "status": f.get("status"), **(f.get("culprit") or {})}
            for f in named
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--slow", required=True)
    parser.add_argument("--csrc", required=True)
    parser.add_argument("--started", type=float, default=None)
    parser.add_argument(
        "--cold-only", action="store_true", help="check only the by-hand bisect (ONLY=cold)"
    )
    args = parser.parse_args()
    summary = summarize(args.out, args.slow, args.csrc, args.started, args.cold_only)
    json.dump(summary, sys.stdout, indent=2)
    print()
    sys.exit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
