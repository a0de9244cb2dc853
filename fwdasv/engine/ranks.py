"""Where a rank sits in a pipeline, its process groups, and how ranks agree on failures.

Ranks agree on every failure they can detect (a case the target refuses, an
error in the eager pass, a capture that fails) before moving on, so a failed
case is recorded on all ranks and the next case runs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from fwdasv.core.errors import UserError
from fwdasv.engine.config import EngineConfig
from fwdasv.targets.base import StageEnds

# Microbatches dropped at each end of the stream, per stage (the seed's 4 x PP).
MARGIN_PER_STAGE = 4


class PipelineError(UserError, ValueError):
    """A pipeline run set up wrongly (world size, stages, devices)."""


class CaseFailed(Exception):
    """A case every rank agreed has failed; the message names the ranks and errors."""


# --- topology ---------------------------------------------------------------------


@dataclass(frozen=True)
class Topology(StageEnds):
    """Where a rank sits: stage `rank % num_stages` of replica `rank // num_stages`.

    Every replica runs the whole pipeline on the same case (as vLLM's DP ranks
    do); a microbatch's latency is the worst replica's.
    """

    rank: int
    world_size: int
    local_rank: int
    num_stages: int

    def __post_init__(self) -> None:
        if self.num_stages < 1 or self.world_size % self.num_stages:
            raise PipelineError(
                f"world size {self.world_size} is not a multiple of {self.num_stages} "
                "pipeline stages; run torchrun with --nproc-per-node equal to "
                "--pipeline-stages (times the number of replicas)"
            )

    @classmethod
    def from_env(cls, num_stages: int) -> Topology:
        try:
            rank = int(os.environ["RANK"])
            world_size = int(os.environ["WORLD_SIZE"])
            local_rank = int(os.environ.get("LOCAL_RANK", rank))
        except (KeyError, ValueError):
            raise PipelineError(
                "RANK and WORLD_SIZE are not set: run the pipeline under torchrun "
                "(or `fwdasv forward --pipeline-stages N`, which starts it)"
            ) from None
        return cls(rank, world_size, local_rank, num_stages)

    @property
    def stage(self) -> int:
        return self.rank % self.num_stages

    @property
    def replica(self) -> int:
        return self.rank // self.num_stages

    @property
    def first_rank(self) -> int:
        """The first stage of this rank's replica."""
        return self.replica * self.num_stages

    @property
    def last_rank(self) -> int:
        """The last stage of this rank's replica."""
        return self.first_rank + self.num_stages - 1

    @property
    def previous(self) -> int:
        return self.rank - 1

    @property
    def next(self) -> int:
        return self.rank + 1

    @property
    def margin(self) -> int:
        return MARGIN_PER_STAGE * self.num_stages


@dataclass(frozen=True)
class Groups:
    """`control`: gloo, for objects, agreement and the clock; `data`: the stage tensors;
    `credits`: the last stage's "done" tokens back to the first (its own communicator,
    so they never queue behind the stage tensors)."""

    control: dist.ProcessGroup
    data: dist.ProcessGroup
    credits: dist.ProcessGroup


# --- agreement and transfers ------------------------------------------------------


def agree(group: dist.ProcessGroup, error: str | None, what: str) -> None:
    """Every rank says whether it failed; raise CaseFailed on all ranks if any did."""
    errors: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(errors, error, group=group)
    raise_failures(errors, what)


def raise_failures(errors: Sequence[str | None], what: str) -> None:
    """CaseFailed naming each distinct error once, with the ranks that had it."""
    by_error: dict[str, list[int]] = {}
    for rank, error in enumerate(errors):
        if error is not None:
            by_error.setdefault(error, []).append(rank)
    if by_error:
        raise CaseFailed(
            "; ".join(
                f"rank{'s' if len(ranks) > 1 else ''} {','.join(map(str, ranks))} ({what}): {error}"
                for error, ranks in by_error.items()
            )
        )


def send_object(obj: Any, dst: int, group: dist.ProcessGroup) -> None:
    dist.send_object_list([obj], dst=dst, group=group)


def recv_object(src: int, group: dist.ProcessGroup) -> Any:
    box: list[Any] = [None]
    dist.recv_object_list(box, src=src, group=group)
    return box[0]


def init_groups(device: torch.device) -> Groups:
    """NCCL for the stage tensors on GPUs (gloo on CPU); always a gloo group for control.

    Objects, agreements and clock pings stay on the host, off the GPU streams
    and apart from the stage tensors' traffic.
    """
    if device.type == "cuda":
        dist.init_process_group(backend="nccl", device_id=device)
        credits = dist.new_group(backend="nccl")
    else:
        dist.init_process_group(backend="gloo")
        credits = dist.new_group(backend="gloo")
    return Groups(
        control=member(dist.new_group(backend="gloo")),
        data=member(dist.group.WORLD),
        credits=member(credits),
    )


def member(group: object) -> dist.ProcessGroup:
    """A group this rank is in: torch types a new group as possibly NON_GROUP_MEMBER and
    the world group as None before init; every rank joins fwdasv's groups."""
    assert isinstance(group, dist.ProcessGroup), group
    return group


def started(work: dist.Work | None) -> dist.Work:
    """A point-to-point op this rank takes part in: torch returns None only to a rank
    outside the group."""
    assert work is not None
    return work


def rank_device(config: EngineConfig, topology: Topology) -> torch.device:
    if not config.device.startswith("cuda"):
        return torch.device("cpu")
    count = torch.cuda.device_count()
    if topology.local_rank >= count:
        raise PipelineError(
            f"local rank {topology.local_rank} has no GPU: {count} visible on this host; "
            "start at most one rank per GPU"
        )
    return torch.device("cuda", topology.local_rank)
