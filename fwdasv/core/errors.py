"""The errors a user can cause and fix, and the one exit-status rule of every command.

A mistake in the input (a malformed case, a missing file, a path that cannot be
written) raises a `UserError`; the command line prints it as one `Error:` line and
exits with its `exit_code`, or EXIT_USAGE (`fwdasv.core.clitools` reads it, in one
place). Anything else escaping is a fwdasv bug and stays loud. The statuses are part
of the interface (CI gates on them); EXIT_RULE is the table the README and
`fwdasv --help` show, and each command's help says what its 1 means.
"""

EXIT_OK = 0  # nothing to report
EXIT_FINDING = 1  # a finding the command gates on (a regression, a slower commit)
EXIT_USAGE = 2  # bad input: a wrong option, a missing or unwritable path
EXIT_UNREADABLE = 2  # input that cannot be read (a result file), whatever else was found
EXIT_REFUSED = 3  # a measurement refused (non-finite, differs from eager) or failed
EXIT_CASES_FAILED = EXIT_REFUSED
EXIT_HARDWARE = 4  # hardware not ready: no driver or GPU, a pre-flight check, root needed
EXIT_NO_DRIVER = EXIT_HARDWARE
EXIT_CHECKS_FAILED = EXIT_HARDWARE
EXIT_NOT_PERMITTED = EXIT_HARDWARE
EXIT_INTERRUPTED = 130  # Ctrl-C, as a shell reports SIGINT

EXIT_RULE = """\
Exit status, every command:
  0  nothing to report
  1  a finding the command gates on: a regression (regressions, confirm; nightly: one
     nobody triaged), a slower commit (compare, explain), a step's first commit not
     named for sure (bisect), the injected commit not named (demo), a fix whose
     re-measure does not show the old level back (triage fixed-by)
  2  bad input, or input that cannot be read: a wrong option or path, a result file
     that cannot be read (whatever else was found; --skip-unreadable passes), a suite
     that measured nothing at its newest commit (regressions, confirm, nightly), a range
     bisect cannot search
  3  a measurement refused: a case non-finite, differing from eager, or failed (forward)
  4  hardware not ready: no NVIDIA driver or GPU, a pre-flight check failed, root needed
130  interrupted (Ctrl-C)"""


class UserError(Exception):
    """A mistake in the input or the machine's state, with the fix in the message.

    `exit_code` None: EXIT_USAGE (2), the status of every user error.
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
