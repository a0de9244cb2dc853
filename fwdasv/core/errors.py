"""The errors a user can cause and fix, and the one exit-status rule of every command.

A mistake in the input (a malformed case, a missing file, a path that cannot be
written) raises a `UserError`; the command line prints it as one `Error:` line and
exits with its `exit_code`, or EXIT_USAGE (`fwdasv.core.clitools` reads it, in one
place). Anything else escaping is a fwdasv bug and stays loud. The statuses are part
of the interface (CI gates on them); EXIT_RULE is the table the README and
`fwdasv --help` show, and each command's help says what its 1 means.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

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


def helper_main(
    work: Callable[[], str],
    errors: tuple[type[Exception], ...],
    *,
    named: tuple[type[Exception], ...] = (),
) -> int:
    """A helper process's end (`python -m fwdasv.targets.check`, `fwdasv.asv.treeinstall`):
    what `work` returns on stdout and status 0, or, for one of `errors`, one `fwdasv: ...`
    line on stderr and status 1 (its caller shows the last line of the output). A message
    that spans lines is folded into one; one of an exception type not in `named` is
    prefixed with that type's name (a bug, not a mistake in the input)."""
    try:
        said = work()
    except errors as error:
        text = " ".join(str(error).split()) or type(error).__name__
        if not isinstance(error, named):
            text = f"{type(error).__name__}: {text}"
        print(f"fwdasv: {text}", file=sys.stderr, flush=True)
        return 1
    print(said, flush=True)
    return 0
