#!/usr/bin/env python
"""Export an asv results directory as CSV / JSON lines / Markdown.

The same command as `fwdasv export` (fwdasv.analysis.commands.export.export_command), for
operators who run scripts rather than the installed entry point:

    python scripts/export_results.py results/ --format csv -o history.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    import fwdasv  # noqa: F401
except ImportError:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fwdasv.analysis.commands.export import export_command

if __name__ == "__main__":
    export_command.main(prog_name="export_results.py")
