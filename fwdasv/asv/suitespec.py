"""The suite `fwdasv init` writes: one class timing a target on cases, and the canary beside it.

`SuiteSpec` refuses a bad target, case list or device before anything is written
and renders the class asv imports (`source`). `canary_suite` is the environment
canary every project gets: fwdasv's own tiny decoder, no code of the project, so
a step in it is the machine (load, a driver, torch), not a commit; `fwdasv
regressions` labels a finding that steps with it `drift`. `paced_by_default`: a
suite that will time on the CPU (no NVIDIA GPU here) is paced (`reference`), since a
shared CPU box's speed moves 10-30% between processes and the paced ratio 2-3%
(docs/timing.md, "The host's pace"). InitError is what `fwdasv init` refuses, with
the fix in its message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fwdasv import backends
from fwdasv.core.cases import parse_case, unique_cases
from fwdasv.core.errors import UserError
from fwdasv.engine.config import EngineOptionError, check_device_name
from fwdasv.targets.base import TargetSpec

# Decode at two batch sizes and contexts, and a prefill: the steps that move
# independently when attention, the MLP or the KV cache code changes.
DEFAULT_CASES = ("decode_bs1_1k=1*1@1024", "decode_bs16_4k=16*1@4096", "prefill_1k=1024")
CANARY_CLASS = "CanaryDecoder"  # a `Canary*` suite: fwdasv.analysis.findings.series.CANARY_PREFIX
CANARY_TARGET = "fwdasv.targets.decoder:tiny"
CANARY_CASES = ("decode_bs4=4*1@256", "prefill_64=64")


def paced_by_default() -> bool:
    """Whether a suite written here is paced unless told otherwise: no NVIDIA GPU is visible
    (NVML and CUDA_VISIBLE_DEVICES, no CUDA initialised), so its forward times on the CPU."""
    return backends.visible_gpus() == 0


class InitError(UserError):
    """The repository, target or directory cannot make an asv project (the fix in the message)."""


@dataclass(frozen=True)
class SuiteSpec:
    """One suite class timing `target` on `cases` (the source asv imports)."""

    target: str
    cases: tuple[str, ...] = DEFAULT_CASES
    class_name: str | None = None  # default: from the target's package, e.g. Mymodel
    iters: int = 20
    samples: int = 10
    warmup_s: float = 1.0
    timer: str = "auto"
    device: str = "auto"
    env: Mapping[str, str] = field(default_factory=dict)
    launches: int = 1
    doc: str = ""
    # Directories outside the repository the target is imported from (`--target-path`):
    # on the bench's PYTHONPATH in every process (fwdasv.asv.suite.ForwardSuite.target_path).
    target_path: tuple[str, ...] = ()
    # The host timer on a CPU: fwdasv's fixed workload beside each replay, and the suite's
    # `track_relative` (fwdasv.asv.suite.ForwardSuite.reference).
    reference: bool = False

    def __post_init__(self) -> None:
        # Refuse bad input before anything is written or asv sees it.
        TargetSpec.parse(self.target)
        if not self.cases:
            raise InitError("no cases: give at least one --case (or none for the defaults)")
        unique_cases(parse_case(text) for text in self.cases)
        try:
            check_device_name(self.device)
        except EngineOptionError as error:
            raise InitError(str(error).replace("--device", "device", 1)) from None
        if self.class_name is not None and not self.class_name.isidentifier():
            raise InitError(f"suite class name {self.class_name!r} is not a Python identifier")
        if self.reference and (self.device != "cpu" or self.timer not in ("auto", "host")):
            raise InitError(
                f"reference times a CPU workload beside a CPU forward: it needs device 'cpu' "
                f"and the host timer (got device {self.device!r}, timer {self.timer!r})"
            )

    @property
    def package(self) -> str:
        """The top-level package of the target (what the repository must contain)."""
        return self.target.partition(":")[0].split(".")[0]

    @property
    def name(self) -> str:
        if self.class_name:
            return self.class_name
        words = [w for w in re.split(r"[^A-Za-z0-9]+", self.package) if w]
        name = "".join(w[:1].upper() + w[1:] for w in words) or "Model"
        return name if name[0].isalpha() else f"Model{name}"

    def source(self) -> str:
        lines = [
            f"class {self.name}(asvsuite.TorchSuite):",
            f'    """{self.doc or f"Forward latency of {self.target}."}"""',
            "",
            f"    model = {self.target!r}",
            f"    iters = {self.iters}",
            f"    samples = {self.samples}",
            f"    warmup_s = {self.warmup_s}",
            f"    timer = {self.timer!r}",
            f"    env = {dict(self.env)!r}",
            f"    launches = {self.launches}",
            f"    cases = {tuple(self.cases)!r}",
            '    version = "1"',
        ]
        if self.device != "auto":
            lines.insert(-2, f"    device = {self.device!r}")
        if self.target_path:
            lines.insert(-2, f"    target_path = {tuple(self.target_path)!r}")
        if self.reference:
            lines.insert(-2, "    reference = True")
        return "\n".join(lines) + "\n"


def canary_suite(suite: SuiteSpec) -> SuiteSpec:
    """The environment canary beside `suite`: the same timer and thread settings, so the
    machine's load reaches it as it reaches the suite, at the same commits (asv runs every
    suite at each commit it measures). One launch: only its commit medians are read (for
    drift), and each launch costs a process start at every commit. Paced with the suite
    (`reference`): a paced series' drift is told by the canary's own ratio."""
    return SuiteSpec(
        CANARY_TARGET,
        CANARY_CASES,
        class_name=CANARY_CLASS,
        iters=20,  # its forward is tiny: longer blocks, steadier samples
        samples=suite.samples,
        warmup_s=min(suite.warmup_s, 0.2),
        timer=suite.timer,
        device=suite.device,
        env=dict(suite.env),
        launches=1,
        reference=suite.reference,
        doc=(
            "The environment canary: fwdasv's tiny decoder, no code of the project. A step "
            "here is the machine (its load, torch, a driver), not a commit."
        ),
    )


def torch_suite_source(class_name: str, target: str, cases: Sequence[str], **options: Any) -> str:
    """The source of one suite class (see `SuiteSpec`)."""
    return SuiteSpec(target, tuple(cases), class_name=class_name, **options).source()
