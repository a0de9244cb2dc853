"""fwdasv: forward-latency regression tracking on airspeed velocity (asv).

Importing the package is cheap (no torch): asv imports benchmark suites that
build on it in every benchmark process.
"""

__version__ = "0.1.0"
