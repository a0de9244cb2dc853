"""When the timed replays run: the timing protocol, and telemetry at block boundaries.

A case's timed replays are `samples` blocks of `iters` replays; the block medians are
the samples asv gets, their spread the stability figure. How the blocks are laid out in
time decides how much a power-capped GPU moves them:
- `steady` (vLLM's): about `warmup_s` of back-to-back replays, then every block back to
  back. On the shared H200 at the 700 W cap the sample spread is 2-5.7%.
- `duty-cycled`: bursts of at most `burst_s` (50 ms) of busy time, each followed by
  `gap_ratio` (3) times its length of idle GPU, warmup included: the GPU stays at its top
  clock instead of cycling through the cap (decode_bs32_8k: 3.2% -> 1.6%, 0.29% at the
  top clocks), at (1 + gap_ratio) times the timed wall time.
- `long-blocks`: blocks of at least `block_s` (1 s), each median averaging many cycles
  of the power controller. `auto`: duty-cycled for CUDA graphs, steady for the host timer
  (a CPU has no power cap). Telemetry is read after each block, outside the timed replays.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fwdasv.core.results import ProtocolRun

if TYPE_CHECKING:
    from fwdasv.hw.telemetry import Reading

STEADY, DUTY_CYCLED, LONG_BLOCKS = "steady", "duty-cycled", "long-blocks"
PROTOCOLS = (STEADY, DUTY_CYCLED, LONG_BLOCKS)
AUTO = "auto"
# The protocol `auto` gives CUDA-graph timing.
DEFAULT_GPU_PROTOCOL = DUTY_CYCLED


@dataclass(frozen=True)
class Protocol:
    """A named layout of the timed replays in time (see the module docstring)."""

    name: str = STEADY
    # duty-cycled: idle time per busy time, and the longest busy stretch.
    gap_ratio: float = 0.0
    burst_s: float = math.inf
    # long-blocks: the shortest block.
    block_s: float = 0.0

    def __post_init__(self) -> None:
        if self.name not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {self.name!r}")
        if self.gap_ratio < 0 or self.burst_s <= 0 or self.block_s < 0:
            raise ValueError(f"bad protocol parameters: {self}")

    @classmethod
    def named(cls, name: str) -> Protocol:
        if name == DUTY_CYCLED:
            return cls(DUTY_CYCLED, gap_ratio=3.0, burst_s=0.05)
        if name == LONG_BLOCKS:
            return cls(LONG_BLOCKS, block_s=1.0)
        return cls(name)


def resolve_protocol(name: str, timer: str) -> str:
    """`auto` -> the protocol for this timer; a named one as is."""
    if name == AUTO:
        return DEFAULT_GPU_PROTOCOL if timer == "graph" else STEADY
    if name not in PROTOCOLS:
        raise ValueError(f"--protocol must be auto or one of {', '.join(PROTOCOLS)}, got {name!r}")
    return name


@dataclass(frozen=True)
class Replayer:
    """How the protocol drives one prepared forward.

    `timed()` runs one replay and waits for it, returning its time in µs (the
    timer's: CUDA events inside the graph, or the host clock); `launch()` runs
    one without waiting; `wait()` waits for the device.
    """

    timed: Callable[[], float]
    launch: Callable[[], object]  # what it returns is not read
    wait: Callable[[], None]


@dataclass
class BlockRun:
    """The timed replays of one case and what the protocol did around them."""

    times_us: list[float]
    iters: int  # replays per block (long-blocks may raise it)
    readings: list[Reading] = field(default_factory=list)  # one per block, when read
    busy_s: float = 0.0
    idle_s: float = 0.0
    warmup_replays: int = 0

    def record(self, protocol: Protocol) -> ProtocolRun:
        """What a rank's result keeps of the protocol and this run (times to 0.1 ms)."""
        return ProtocolRun(
            name=protocol.name,
            gap_ratio=protocol.gap_ratio,
            burst_s=None if math.isinf(protocol.burst_s) else protocol.burst_s,
            block_s=protocol.block_s,
            iters_per_block=self.iters,
            warmup_replays=self.warmup_replays,
            timed_busy_s=round(self.busy_s, 4),
            timed_idle_s=round(self.idle_s, 4),
        )


def run_protocol(
    replayer: Replayer,
    iters: int,
    samples: int,
    warmup_s: float,
    protocol: Protocol,
    read_telemetry: Callable[[], Reading] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> BlockRun:
    """Warm up and time `samples` blocks of `iters` replays the protocol's way."""
    run = BlockRun(times_us=[], iters=iters)
    if protocol.name == DUTY_CYCLED:
        # No sizing probe: its replays would make a burst longer than `burst_s`.
        _duty_cycled_warmup(replayer, warmup_s, protocol, run, clock, sleep)
    else:
        per_replay_s = _replay_wall_s(replayer, clock)
        if protocol.name == LONG_BLOCKS:
            run.iters = max(iters, math.ceil(protocol.block_s / per_replay_s))
    if protocol.name != DUTY_CYCLED and warmup_s > 0:
        # The seed's warmup: ~warmup_s of replays queued back to back (at least a block).
        count = max(iters, int(warmup_s / per_replay_s))
        for _ in range(count):
            replayer.launch()
        replayer.wait()
        run.warmup_replays = count
    for _ in range(samples):
        if protocol.name == DUTY_CYCLED:
            _duty_cycled_block(replayer, run, protocol, clock, sleep, read_telemetry)
        else:
            begin = clock()
            run.times_us.extend(replayer.timed() for _ in range(run.iters))
            run.busy_s += clock() - begin
            if read_telemetry is not None:
                run.readings.append(read_telemetry())
    return run


def _replay_wall_s(replayer: Replayer, clock: Callable[[], float], probes: int = 5) -> float:
    """The median wall time of a few waited replays (up to `probes`, ~50 ms at most):
    it sizes the warmup and long blocks; one replay alone can be an outlier."""
    walls: list[float] = []
    start = clock()
    while len(walls) < probes and (not walls or clock() - start < 0.05):
        begin = clock()
        replayer.timed()
        walls.append(clock() - begin)
    return max(statistics.median(walls), 1e-6)


def _burst(
    replayer: Replayer, limit: int, burst_s: float, clock: Callable[[], float]
) -> tuple[list[float], float]:
    """Waited replays until `burst_s` of wall time has passed or `limit` ran."""
    times: list[float] = []
    begin = clock()
    while len(times) < limit:
        times.append(replayer.timed())
        if clock() - begin >= burst_s:
            break
    return times, clock() - begin


def _duty_cycled_block(
    replayer: Replayer,
    run: BlockRun,
    protocol: Protocol,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    read_telemetry: Callable[[], Reading] | None,
) -> None:
    done = 0
    while done < run.iters:
        times, busy = _burst(replayer, run.iters - done, protocol.burst_s, clock)
        run.times_us.extend(times)
        done += len(times)
        run.busy_s += busy
        if done == run.iters and read_telemetry is not None:
            # At the end of the block's last burst: the loaded state, before the gap.
            run.readings.append(read_telemetry())
        sleep(protocol.gap_ratio * busy)
        run.idle_s += protocol.gap_ratio * busy


def _duty_cycled_warmup(
    replayer: Replayer,
    warmup_s: float,
    protocol: Protocol,
    run: BlockRun,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> None:
    """The timed pattern itself for `warmup_s` of wall time: the periodic state is reached."""
    begin = clock()
    while clock() - begin < warmup_s:
        times, busy = _burst(replayer, 1 << 30, protocol.burst_s, clock)
        run.warmup_replays += len(times)
        sleep(protocol.gap_ratio * busy)
