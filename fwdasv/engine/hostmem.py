"""Host memory settings for steady CPU timings of a forward.

glibc serves allocations above its mmap threshold (128 KiB, raised only as
big blocks are freed) with fresh mappings: every forward then maps, page-faults
and unmaps its large temporaries, and how often depends on the process's
history. On a 2-core VM the same decode of the demo model took 6 ms in some
processes and 20 ms in others; with both thresholds raised, 6.0-6.7 ms in all
(2026-11-30, docs/measurements.md). GPU runs are unaffected either way.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

# 4 GiB: no temporary of a benchmarked forward is mapped on its own, and freed
# heap memory is kept for the next forward instead of being returned.
STEADY_MALLOC_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(4 << 30),
    "MALLOC_TRIM_THRESHOLD_": str(4 << 30),
}
# Set to 1 to keep glibc's defaults.
OPT_OUT = "FWDASV_DEFAULT_MALLOC"


def wants_steady_malloc(environ: Mapping[str, str]) -> bool:
    """True when the settings apply (glibc on Linux) and are not in place yet."""
    if not sys.platform.startswith("linux") or environ.get(OPT_OUT) == "1":
        return False
    return any(environ.get(name) != value for name, value in STEADY_MALLOC_ENV.items())
