#!/usr/bin/env python3
"""Nightly run on a benchmark box: setup, machine file, asv run, publish, regressions, reset.

The same command as `fwdasv nightly` (see fwdasv/nightly.py); operators can run
this file directly, e.g. from cron:

    python scripts/nightly.py --config asv.conf.json --lock-clocks base
"""

from fwdasv.cli import nightly_command

if __name__ == "__main__":
    nightly_command(prog_name="nightly.py")
