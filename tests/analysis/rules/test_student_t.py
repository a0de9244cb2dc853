"""`fwdasv.analysis.rules.student_t`: Student's t tail and quantile against printed tables."""

from __future__ import annotations

import math

import pytest

from fwdasv.analysis.rules.student_t import t_isf, t_sf


def test_student_t_matches_tables() -> None:
    assert t_isf(0.025, 4) == pytest.approx(2.7764, abs=1e-4)
    assert t_isf(0.005, 10) == pytest.approx(3.1693, abs=1e-4)
    assert t_isf(0.005, math.inf) == pytest.approx(2.5758, abs=1e-4)
    assert t_sf(0.0, 3) == pytest.approx(0.5)
    assert t_sf(-1.0, 3) == pytest.approx(1 - t_sf(1.0, 3))
