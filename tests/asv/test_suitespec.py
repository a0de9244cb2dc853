"""`fwdasv.asv.suitespec`: the suite `fwdasv init` writes names its device, and the reference
workload needs the CPU and the host timer.
"""

from __future__ import annotations

import pytest
from toy_model import TARGET


def test_a_suite_spec_names_its_device_and_refuses_an_unknown_one() -> None:
    """A CPU model on a GPU host: `device = 'cpu'` in the suite's source (asv's `auto`
    would take CUDA and its graph timer); a misspelt device is refused before any file."""
    from fwdasv.asv.suitespec import InitError, SuiteSpec

    source = SuiteSpec(TARGET, ("prefill_64=64",), device="cpu", timer="host").source()
    assert "    device = 'cpu'\n" in source and "    timer = 'host'\n" in source
    assert "device" not in SuiteSpec(TARGET, ("prefill_64=64",)).source()  # auto: unsaid
    with pytest.raises(InitError, match="device 'gpu': use auto, cpu, cuda or cuda:N"):
        SuiteSpec(TARGET, ("prefill_64=64",), device="gpu")


def test_a_suite_spec_with_the_reference_workload_says_so_and_needs_a_cpu() -> None:
    from fwdasv.asv.suitespec import InitError, SuiteSpec

    source = SuiteSpec(TARGET, ("prefill_64=64",), device="cpu", reference=True).source()
    assert "    reference = True\n" in source
    assert "reference" not in SuiteSpec(TARGET, ("prefill_64=64",), device="cpu").source()
    with pytest.raises(InitError, match="needs device 'cpu' and the host timer"):
        SuiteSpec(TARGET, ("prefill_64=64",), reference=True)
    with pytest.raises(InitError, match="got device 'cpu', timer 'graph'"):
        SuiteSpec(TARGET, ("prefill_64=64",), device="cpu", timer="graph", reference=True)
