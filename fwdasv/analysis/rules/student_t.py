"""Student's t tail and quantile, for statistics scaled by an estimated noise.

`t_sf` through the regularized incomplete beta function (Abramowitz & Stegun
26.7.1, 26.5.2; Numerical Recipes 6.4's continued fraction), `t_isf` by bisection
on it; the normal distribution for infinite degrees of freedom. numpy has no t
distribution and scipy is not a dependency.
"""

from __future__ import annotations

import functools
import math


def t_sf(t: float, dof: float) -> float:
    """P(T > t) for Student's t with `dof` degrees of freedom (normal for dof = inf).

    Through the regularized incomplete beta function,
    P(|T| > t) = I_x(dof / 2, 1 / 2) with x = dof / (dof + t^2)
    (Abramowitz & Stegun 26.7.1, 26.5.2), evaluated by its continued fraction.
    """
    if not math.isfinite(dof) or dof > 1e7:
        return 0.5 * math.erfc(t / math.sqrt(2))
    if dof <= 0:
        raise ValueError(f"dof {dof} must be positive")
    x = dof / (dof + t * t)
    tail = 0.5 * _betainc(dof / 2, 0.5, x)
    return tail if t >= 0 else 1 - tail


@functools.lru_cache(maxsize=4096)
def t_isf(p: float, dof: float) -> float:
    """The t with P(T > t) = p (0 < p < 1/2), by bisection on `t_sf`."""
    if not 0 < p < 0.5:
        raise ValueError(f"p {p} must be in (0, 0.5)")
    low, high = 0.0, 1.0
    while t_sf(high, dof) > p:
        high *= 2
        if high > 1e12:
            return math.inf
    for _ in range(200):
        mid = (low + high) / 2
        if t_sf(mid, dof) > p:
            low = mid
        else:
            high = mid
        if high - low < 1e-10 * high:
            break
    return (low + high) / 2


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) (Numerical Recipes 6.4, modified Lentz)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1 - math.exp(log_front) * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1)),
        ):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h
