"""What fwdasv's engine can time: the target protocol and its resolution.

A target is built once per process by a factory named `package.module:callable`
(the project under test exposes one) and then, for each case, prepares one exact
batch: the inputs, a forward closure over them, and the state tensors the
forward writes, which the engine restores before every timed replay. A pipeline
run builds the same target once per rank as one stage of N.

A factory may also tell how many stages its target splits into, without
building it: a `max_stages(**options) -> int` attribute (the bundled decoder's
is its layer count). `fwdasv forward --pipeline-stages N` checks it before any
rank starts.
"""

from __future__ import annotations

import importlib
import inspect
import json
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import torch

    from fwdasv.core.cases import BenchCase

from fwdasv.core.errors import UserError, describe_error

DEFAULT_TARGET = "fwdasv.targets.decoder:tiny"


class TargetError(UserError, ValueError):
    """A target string that does not name a usable factory, or a target that refuses a case."""


@dataclass
class PreparedForward:
    """One case, ready to run: `forward()` computes the step from fixed inputs.

    `state` lists the views the forward writes in place (KV slots, sequence
    counters); restoring them makes every run start from the same state.
    `received` (pipeline stages after the first) are the buffers the engine
    fills with the previous stage's outputs before each run. `forward()`
    returns named tensors: the first is the output compared against eager; a
    stage that is not last returns what it sends on.
    """

    forward: Callable[[], dict[str, torch.Tensor]]
    state: list[torch.Tensor]
    num_tokens: int
    received: dict[str, torch.Tensor] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Target(Protocol):
    """Built by `factory(device=..., dtype=..., stage=0, num_stages=1, **options)`."""

    name: str

    def prepare(self, case: BenchCase, seed: int) -> PreparedForward: ...


class Staged(Protocol):
    """Stage `stage` of a pipeline of `num_stages` (0 is the first)."""

    @property
    def stage(self) -> int: ...

    @property
    def num_stages(self) -> int: ...


class StageEnds:
    """`first` and `last` of a `Staged` class: a rank's place (`fwdasv.engine.ranks.Topology`)
    and a target's stage (the bundled decoder) say it the same way."""

    @property
    def first(self: Staged) -> bool:
        return self.stage == 0

    @property
    def last(self: Staged) -> bool:
        return self.stage == self.num_stages - 1


@dataclass(frozen=True)
class TargetSpec:
    """A parsed `package.module:callable` string with its keyword options."""

    factory: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str, options: Mapping[str, Any] | None = None) -> TargetSpec:
        module, sep, attr = text.partition(":")
        if (
            not sep
            or not module
            or not attr
            or not all(part.isidentifier() for part in [*module.split("."), *attr.split(".")])
        ):
            raise TargetError(
                f"Target {text!r} is not of the form package.module:callable "
                f"(e.g. {DEFAULT_TARGET})"
            )
        return cls(text, dict(options or {}))

    def resolve(self) -> Callable[..., Target]:
        module_name, _, attr = self.factory.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            raise TargetError(
                f"Target {self.factory!r}: module {module_name!r} cannot be imported ({error}); "
                "install the project that provides it in this environment"
            ) from None
        obj: Any = module
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise TargetError(
                    f"Target {self.factory!r}: {module_name} has no attribute {attr!r}"
                ) from None
        if not callable(obj):
            raise TargetError(f"Target {self.factory!r} is not callable")
        return obj

    def max_stages(self) -> int | None:
        """The factory's `max_stages(**options)`, or None when it does not say."""
        limit = getattr(self.resolve(), "max_stages", None)
        if limit is None:
            return None
        try:
            return int(limit(**self.options))
        except TargetError:
            raise
        except Exception as error:
            raise TargetError(
                f"Target {self.factory!r}: its max_stages failed: {describe_error(error)}"
            ) from None

    def check_stages(self, stages: int) -> None:
        """Refuse `stages` beyond what the target splits into, before any rank starts."""
        limit = self.max_stages()
        if limit is not None and stages > limit:
            raise TargetError(
                f"--pipeline-stages {stages}: target {self.factory!r} splits into at most "
                f"{limit} stage(s) (one per layer); use at most {limit}"
            )

    def build(self, device: str, dtype: str, stage: int = 0, num_stages: int = 1) -> Target:
        factory = self.resolve()
        kwargs = {"device": device, "dtype": dtype, "stage": stage, "num_stages": num_stages}
        reserved = sorted(set(kwargs) & set(self.options))
        if reserved:
            raise TargetError(
                f"Target option(s) {reserved} are set by the engine; use --device, --dtype "
                "or --pipeline-stages instead"
            )
        parameters: Mapping[str, inspect.Parameter]
        try:
            parameters = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            parameters = {}
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        if num_stages > 1 and not accepts_any and "num_stages" not in parameters:
            raise TargetError(f"Target {self.factory!r} does not support pipeline stages")
        if not accepts_any:
            kwargs = {k: v for k, v in kwargs.items() if k in parameters}
            unknown = [k for k in self.options if k not in parameters]
            if unknown:
                raise TargetError(
                    f"Target {self.factory!r} takes no option(s) {unknown}; "
                    f"it accepts {sorted(set(parameters) - {'device', 'dtype', 'stage', 'num_stages'})}"
                )
        try:
            target = factory(**kwargs, **self.options)
        except TargetError:
            raise
        except Exception as error:
            # The project's own code failed: one line, with where it failed.
            raise TargetError(
                f"Target {self.factory!r} failed to build: {describe_error(error)}{_where(error)}"
            ) from error
        if not isinstance(target, Target):
            raise TargetError(
                f"Target {self.factory!r} returned {type(target).__name__}, which has no "
                "`name` and `prepare(case, seed)`"
            )
        return target


def _where(error: BaseException) -> str:
    """` (at file:line)` of the innermost frame of the traceback, when there is one."""
    frames = traceback.extract_tb(error.__traceback__)
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def parse_options(pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """`KEY=VALUE` pairs; VALUE is read as JSON when it parses, else kept as a string."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise TargetError(f"Target option {pair!r} is not KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options
