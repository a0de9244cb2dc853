"""A commit's several bench processes judged as processes: a quiet pass outvotes a loaded one.

asv stores a commit's samples as one flat list, `samples` per bench process, one process
after another; `asv run --append-samples` adds a pass's processes at the end. On a
shared box one pass can run loaded (seen: +39-74% at commits that change nothing, where
a second pass at a third of the load showed no step): pooled, the loaded samples move
the commit's median. `quiet_history` keeps, at each commit with several processes, the
processes not both more than QUIET_SPREAD_FACTOR times as spread as the quietest (the
one whose samples spread least: robust sd of ln samples) and slower than it by more than
their own spread: interference slows a process and scatters its samples; a process as
steady as the quietest is kept, fast or slow. Input: a series' history (samples per commit) and the samples per process;
output: the kept history and one line per commit that lost processes. GPU processes,
alike in spread, are all kept.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

QUIET_SPREAD_FACTOR = 2.0  # a process this many times as spread as the quietest, and slower
MAD_TO_SD = 1.4826


@dataclass(frozen=True)
class QuietHistory:
    """A history with each commit's loaded processes left out, and why."""

    history: list[list[float]]
    notes: tuple[str, ...] = ()  # "commit 5: 1 of 2 processes kept (...)"

    def summary(self) -> str | None:
        """One line for the findings: how many commits were judged by their quiet processes."""
        if not self.notes:
            return None
        return (
            f"{len(self.notes)} commit(s) judged by their quietest processes (the others "
            f"over {QUIET_SPREAD_FACTOR:g}x as spread, and slower): " + "; ".join(self.notes)
        )


def _spread(logs: np.ndarray) -> float:
    return MAD_TO_SD * float(np.median(np.abs(logs - np.median(logs))))


def quiet_processes(samples: Sequence[float], size: int) -> tuple[list[float], str | None]:
    """The samples of one commit's kept processes, and a note when some were left out;
    all of them when they do not split into 2 or more processes of `size`."""
    values = [float(v) for v in samples]
    if size < 2 or len(values) < 2 * size or len(values) % size:
        return values, None
    chunks = [values[i : i + size] for i in range(0, len(values), size)]
    logs = [np.log(np.asarray([v for v in c if v > 0 and math.isfinite(v)])) for c in chunks]
    if any(c.size < 2 for c in logs):
        return values, None
    spreads = [_spread(c) for c in logs]
    medians = [float(np.median(c)) for c in logs]
    quiet = int(np.argmin(spreads))
    kept = [
        i
        for i in range(len(chunks))
        if not (
            spreads[i] > QUIET_SPREAD_FACTOR * max(spreads[quiet], 1e-12)
            and medians[i] - medians[quiet] > spreads[i]
        )
    ]
    if len(kept) == len(chunks):
        return values, None
    left = [i for i in range(len(chunks)) if i not in kept]
    note = (
        f"{len(kept)} of {len(chunks)} processes kept (in-run spread "
        f"{100 * spreads[quiet]:.2g}% against {100 * max(spreads[i] for i in left):.2g}%, "
        f"median {100 * math.expm1(max(medians[i] for i in left) - medians[quiet]):+.0f}%)"
    )
    return [v for i in kept for v in chunks[i]], note


def quiet_history(
    history: Sequence[Sequence[float]], size: int | None, commits: Sequence[str] = ()
) -> QuietHistory:
    """`history` with each commit's loaded processes left out (`quiet_processes`);
    unchanged without a process size. `commits` names the commits in the notes."""
    if not size:
        return QuietHistory([list(s) for s in history])
    out, notes = [], []
    for i, samples in enumerate(history):
        kept, note = quiet_processes(samples, size)
        out.append(kept)
        if note is not None:
            name = commits[i][:8] if i < len(commits) else f"#{i}"
            notes.append(f"{name}: {note}")
    return QuietHistory(out, tuple(notes))
