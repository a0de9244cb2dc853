"""The errors a user can cause and fix, and the exit statuses they map to.

A mistake in the input (a malformed case, a missing file, no GPU, a timeout) raises a
`UserError`; the command line prints it as one line and exits with its `exit_code`, or
with the command's own user-error status when it has none (`fwdasv.core.clitools`
reads it, in one place). Anything else escaping is a fwdasv bug and stays loud.
Exit statuses are part of the interface (CI gates on them):

    0  done, nothing found
    1  a finding (a regression, a slower commit) or, for measuring commands, bad input
    2  bad usage; any user error of the analysis commands (their 1 is a finding), and a
       gate that could not read every result file (`--skip-unreadable` passes anyway)
    3  some cases failed (`fwdasv forward`), a required pre-flight check failed (`fwdasv hw`)
    4  no NVIDIA driver or GPU;  5  root needed (or NVML refused a change)
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


def describe_error(error: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    text = str(error).strip().splitlines()
    first = text[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
