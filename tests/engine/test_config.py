"""`fwdasv.engine.config`: bench options that cannot be timed, and the reference workload
where it cannot pace the forward, are refused.
"""

from __future__ import annotations

import pytest

# --- the bench itself, in process ----------------------------------------------------------


def test_bench_options_refuse_what_cannot_be_timed():
    from fwdasv.engine.config import BenchOptions

    for bad in [{"iters": 0}, {"samples": 0}, {"warmup_s": -1.0}, {"timer": "gpu"}]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            BenchOptions(**bad)


def test_the_reference_workload_is_refused_where_it_cannot_pace_the_forward():
    from fwdasv.engine.config import BenchOptions, EngineConfig, EngineOptionError

    with pytest.raises(ValueError, match="host timer"):
        BenchOptions(timer="graph", reference=True)
    options = dict(
        target="fwdasv.targets.decoder:tiny",
        target_options={},
        dtype="auto",
        timer="host",
        protocol="auto",
        iters=1,
        samples=1,
        seed=0,
        warmup_s=0,
        reference=True,
    )
    with pytest.raises(EngineOptionError, match=r"--reference .* in one stage"):
        EngineConfig.from_options(device="cpu", pipeline=True, **options)
    config = EngineConfig.from_options(device="cpu", pipeline=False, **options)
    assert config.options.reference and config.options.timer == "host"
