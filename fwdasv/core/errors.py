"""The errors a user can cause and fix, and the exit statuses they map to.

Every fwdasv module raises a subclass of `UserError` for bad input (a malformed
case, a missing file, no GPU, a timeout); the command line prints its message
as one line and exits with the error's `exit_code`, or, when the error has
none, with the command's own status for user errors (`fwdasv.core.clitools`
reads it, in one place). Anything else escaping is a fwdasv bug and stays loud.

Exit statuses are part of the interface (CI gates on them):

    0  done, nothing found
    1  a finding (a regression, a slower commit) or, for measuring commands, bad input
    2  bad usage; for the analysis commands, whose 1 means a finding, any user error,
       and a gate (regressions, confirm, publish, nightly) that could not read every
       result file (`--skip-unreadable` to pass anyway)
    3  some cases failed (`fwdasv forward`), a required pre-flight check failed (`fwdasv hw`)
    4  no NVIDIA driver or GPU
    5  root needed (or NVML refused a change)
"""

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2
EXIT_UNREADABLE = 2  # a gate's results could not all be read (`fwdasv.analysis.gate`)
EXIT_CASES_FAILED = 3
EXIT_CHECKS_FAILED = 3
EXIT_NO_DRIVER = 4
EXIT_NOT_PERMITTED = 5
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """A mistake in the input or the machine's state, with the fix in the message.

    `exit_code` None: the command's own status for a user error.
    """

    exit_code: int | None = None


class CasesFailed(UserError):
    """Some cases of a bench run failed; their errors are in the results JSON."""

    exit_code = EXIT_CASES_FAILED
