"""Two GPUs of one host on the same commits: each case's latency on one against the other.

    python bench/h200/gpu_agreement.py --results proj/results --machines M0 M1

For every commit both machines (one GPU each: `fwdasv shard`'s machines) measured, and
every case of a `track_latency` series, prints the second GPU's median over the first's
(in %) beside each side's in-run sample spread, then per case the median and the largest
difference over the commits. Whether the GPUs agree within their noise decides whether
their series could be merged; `fwdasv shard` keeps them apart either way.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from fwdasv.asv.history import History


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True, help="the asv results directory")
    parser.add_argument("--machines", nargs=2, required=True, metavar=("M0", "M1"))
    args = parser.parse_args()
    first, second = args.machines
    seen: dict[tuple[str, str, str], dict[str, tuple[float, float | None]]] = defaultdict(dict)
    history = History(args.results, machines=args.machines)
    for record in history.records():
        if record.metric != "track_latency" or record.median is None:
            continue
        spread = getattr(record, "spread_pct", None)
        key = (record.suite, record.case, record.commit_hash)
        seen[key][record.machine] = (float(record.median), spread)
    rows = [(key, sides) for key, sides in sorted(seen.items()) if len(sides) == 2]
    if not rows:
        print(f"no commit measured on both {first} and {second}")
        raise SystemExit(1)
    print(
        f"{'suite':<22} {'case':<18} {'commit':<8} {'GPU0 us':>10} {'GPU1 us':>10} "
        f"{'GPU1/GPU0':>10} {'spread0':>8} {'spread1':>8}"
    )
    by_case: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (suite, case, commit), sides in rows:
        (a, spread_a), (b, spread_b) = sides[first], sides[second]
        diff = 100 * (b / a - 1)
        by_case[suite, case].append(diff)
        print(
            f"{suite:<22} {case:<18} {commit[:8]:<8} {a * 1e6:>10.2f} {b * 1e6:>10.2f} "
            f"{diff:>+9.2f}% {pct(spread_a):>8} {pct(spread_b):>8}"
        )
    print()
    print_by_case(by_case, "GPU1 vs GPU0")


def print_by_case(by_case: dict[tuple[str, str], list[float]], label: str) -> None:
    """Per (suite, case): the median and the largest of its commits' differences (in %)."""
    for (suite, case), diffs in sorted(by_case.items()):
        worst = max(diffs, key=abs)
        print(
            f"{suite} {case}: {label} median {statistics.median(diffs):+.2f}%, "
            f"largest {worst:+.2f}% over {len(diffs)} commit(s)"
        )


def pct(value: float | None) -> str:
    """A percentage as the tables print it, `-` for none."""
    return "-" if value is None else f"{value:.2f}%"


if __name__ == "__main__":
    main()
