"""bench/verdicts/sparse_quality.py and sparse_false.py at small scale: the doubled forward
is a `regression` of its size, confirm's re-measure only ever removes false findings, and a
step-free history's false findings are put down to odd processes or noise, never to a step."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
from helpers import ROOT


@pytest.fixture
def load() -> Iterator[object]:
    loaded: list[str] = []

    def load_script(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "bench" / "verdicts" / f"{name}.py"
        )
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        loaded.append(name)
        spec.loader.exec_module(module)
        return module

    yield load_script
    for name in [*loaded, "sparse_quality"]:
        sys.modules.pop(name, None)


def test_the_doubled_forward_is_a_regression_and_confirm_only_removes_false_findings(
    load,
) -> None:
    quality = load("sparse_quality")
    families = ("2+3 x2 at 0.2%", "gpu 6-12, none")
    outcomes = quality.evaluate(seed=1, histories=20, workers=1, only=families)
    doubled = [o for o in outcomes if o.family == "2+3 x2 at 0.2%"]
    assert len(doubled) == 20 and all(o.regression == (True,) for o in doubled)
    # The size told is the doubling's (ln 2) within a few percent of it, asv's too.
    errors = [o.size_error[0] for o in doubled] + [o.asv_size_error[0] for o in doubled]
    assert all(e is not None and e < 0.05 for e in errors), errors
    assert all(o.false_any or not o.false_after_confirm for o in outcomes)


def test_a_step_free_history_owes_its_false_findings_to_odd_processes_or_noise(load) -> None:
    breakdown = load("sparse_false")
    tallies = [breakdown.classify(("gpu 6-12, none", 1, i)) for i in range(40)]
    classes = {kind for t in tallies for kind, _, _ in t.false}
    assert "odd head" in classes, classes  # a slow newest commit, listed `suspected`
    assert classes <= {"odd start", "odd head", "odd pair", "odd inside", "noise"}, classes
    assert not any(t.missed or t.large for t in tallies)


def test_re_measuring_both_signs_sets_aside_the_false_speed_ups_of_step_free_histories(
    load,
) -> None:
    """On step-free histories some false findings are speed-ups (a slow first commit, two
    odd commits coming back); nightly re-measures them too, and none is left after."""
    quality = load("sparse_quality")
    families = ("gpu 6-12, none", "cpu 6-12, none")
    outcomes = quality.evaluate(seed=1, histories=40, workers=1, only=families)
    faster = [o for o in outcomes if o.false_any and not o.false_slower]
    assert faster, "no step-free history listed a false speed-up: the test shows nothing"
    assert not any(o.false_after_confirm for o in outcomes)
    # What is left after the night is what confirm left, less what bisect placed.
    assert all(o.false_after_confirm or not o.false_after_night for o in outcomes)


def test_the_nights_bisect_names_the_step_of_a_slowdown_confirmed_a_commit_off(load) -> None:
    """A slower finding placed a commit off is confirmed (its A..B spans the real step);
    the real Bisector, searching that A..B on the series' simulated processes, names the
    step's commit, so after the night it is no longer a false finding."""
    quality = load("sparse_quality")
    outcomes = quality.evaluate(seed=1, histories=150, workers=1, only=("gpu 6-8, 2 steps",))
    placed = [o for o in outcomes if o.false_after_confirm and not o.false_after_night]
    assert placed, "no confirmed finding a commit off was placed by bisect"
