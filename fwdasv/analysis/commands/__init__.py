"""The analysis commands, one module each (`COMMANDS`, added to the root group by `fwdasv.cli`).

Exit statuses are part of the interface (CI gates on them; which statuses fail is
`fwdasv.analysis.rules.gate`): regressions and confirm 0 none, 1 a regression (or a
confirmed one), 2 bad input or an unreadable result file (without --skip-unreadable);
publish 0 published, 2 bad input or an unreadable result file (the site is still
written); compare 0 nothing worse, 1 something worse (or newly failing); explain 0
nothing slower stands out, 1 a slowdown stands out of the noise; bisect 0 found, 1
found but uncertain (a probe decided by the closer median, or an unmeasurable commit
next to the step), 2 cannot bisect; export 0 written, 1 a result file unreadable under
--strict, 2 bad input; triage 0 recorded, 1 fixed-by refused (the re-measure does not
show the old level back), 2 bad input; check 0 no slowdown beyond min_effect_pct, 1 one, 2
bad input. A user error is one `Error: ...` line and status 2
(`AnalysisCommand`), so "a regression was found" and "the command could not run"
never look alike to CI.
"""

from __future__ import annotations

from fwdasv.analysis.commands.bisect import bisect_command
from fwdasv.analysis.commands.check import check_command
from fwdasv.analysis.commands.compare import compare_command
from fwdasv.analysis.commands.confirm import confirm_command
from fwdasv.analysis.commands.explain import explain_command
from fwdasv.analysis.commands.export import export_command
from fwdasv.analysis.commands.publish import publish_command
from fwdasv.analysis.commands.regressions import regressions_command
from fwdasv.analysis.commands.triage import triage_command

COMMANDS = (
    regressions_command,
    confirm_command,
    compare_command,
    bisect_command,
    export_command,
    publish_command,
    explain_command,
    triage_command,
    check_command,
)
