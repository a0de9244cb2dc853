#!/usr/bin/env python3
"""Operator script: GPU pre-flight checks, clock lock/unlock and asv's machine file.

The same commands as `fwdasv hw` (the same click group, nothing duplicated):

    python scripts/setup_hardware.py check --format json
    sudo python scripts/setup_hardware.py setup --lock-clocks base --persistence
    sudo python scripts/setup_hardware.py reset
    python scripts/setup_hardware.py machine
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from fwdasv.hw.cli import hw
except ImportError:  # run from a checkout without fwdasv installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from fwdasv.hw.cli import hw

if __name__ == "__main__":
    hw.main(prog_name="setup_hardware.py")
