"""The same commits measured through the fleet (`fwdasv shard --ray`) and on the host
(`fwdasv shard`): each case's median on one path against the other, beside their noise.

    python bench/h200/fleet_agreement.py --ray PROJ_RAY/results --host PROJ_HOST/results

Both projects measure one GPU, so both name the same machine (its UUID's digest): the two
results directories are read apart. For every commit and `track_latency` case both paths
measured, prints each side's median and 99% interval, and the Ray path's median over the
host's (in %); a difference inside the wider of the two intervals (relative to the median)
is `within`. Then per case the median and the largest difference over the commits.
Exit status 1 when no commit was measured on both paths.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from gpu_agreement import pct, print_by_case  # type: ignore[import-not-found]  # this folder

from fwdasv.asv.history import History, Record

Key = tuple[str, str, str]


def _read(results: Path) -> dict[Key, Record]:
    out: dict[Key, Record] = {}
    for record in History(str(results)).records():
        if record.metric == "track_latency" and record.median is not None:
            out[record.suite, record.case, record.commit_hash] = record
    return out


def _half_widthpct(record: Record) -> float | None:
    if record.ci_99_a is None or record.ci_99_b is None or not record.median:
        return None
    return 100 * (record.ci_99_b - record.ci_99_a) / 2 / record.median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ray", required=True, type=Path, help="the Ray path's results/")
    parser.add_argument("--host", required=True, type=Path, help="the host path's results/")
    args = parser.parse_args()
    ray, host = _read(args.ray), _read(args.host)
    both = sorted(set(ray) & set(host))
    if not both:
        print(f"no commit measured on both paths ({len(ray)} Ray rows, {len(host)} host rows)")
        raise SystemExit(1)
    print(
        f"{'suite':<20} {'case':<18} {'commit':<8} {'host us':>9} {'±99%':>7} "
        f"{'Ray us':>9} {'±99%':>7} {'Ray/host':>9}  verdict"
    )
    by_case: dict[tuple[str, str], list[float]] = defaultdict(list)
    inside = 0
    for key in both:
        suite, case, commit = key
        a, b = host[key], ray[key]
        assert a.median is not None and b.median is not None
        diff = 100 * (b.median / a.median - 1)
        wa, wb = _half_widthpct(a), _half_widthpct(b)
        widest = max((w for w in (wa, wb) if w is not None), default=None)
        within = widest is not None and abs(diff) <= widest
        inside += within
        by_case[suite, case].append(diff)
        print(
            f"{suite:<20} {case:<18} {commit[:8]:<8} {a.median * 1e6:>9.2f} {pct(wa):>7} "
            f"{b.median * 1e6:>9.2f} {pct(wb):>7} {diff:>+8.2f}%  "
            f"{'within' if within else 'outside'}"
        )
    print()
    print_by_case(by_case, "Ray vs host")
    print(f"{inside} of {len(both)} rows within the wider 99% interval")


if __name__ == "__main__":
    main()
