"""`python -m fwdasv.fleet.envsetup CONFIG`: asv's environments of CONFIG built; status 0.

`asv setup` from the command line exits with status 1 even when it built every
environment (asv 0.6.6 returns the environments' list as the exit status), so a node
could not tell a failed build from a good one. This builds them through asv's own
`Setup.run` and exits 0 when it did, 1 (with asv's error) when it could not or when no
environment fits this host (none of asv.conf.json's `pythons` is here).
"""

from __future__ import annotations

import sys

from asv import util
from asv.commands.setup import Setup
from asv.config import Config
from asv.console import log
from asv.plugin_manager import plugin_manager


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m fwdasv.fleet.envsetup ASV_CONF_JSON", file=sys.stderr)
        return 2

    log.enable()
    try:
        conf = Config.load(argv[0])
        for plugin in conf.plugins:  # as asv's commands load them (fwdasv's environment type)
            plugin_manager.import_plugin(plugin)
        built = Setup.run(conf=conf, parallel=1)
    except util.UserError as error:
        print(f"environment build failed: {error}", file=sys.stderr)
        return 1
    if not built:
        pythons = ", ".join(conf.pythons) or "none named"
        print(f"no environment can be built here for pythons {pythons}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
