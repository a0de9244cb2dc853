"""The suite base classes, where users' benchmarks have always imported them from.

    from fwdasv import asvsuite

    class MyModel(asvsuite.TorchSuite):
        model = "mypkg.bench:target"
        cases = ("decode=8*1@1024",)

The classes live in `fwdasv.asv.suite`; this module is their stable name.
"""

from fwdasv.asv.suite import (  # noqa: F401
    ForwardSuite,
    PipelineSuite,
    RefusedLatency,
    TorchSuite,
    VllmSuite,
)
