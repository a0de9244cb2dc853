"""The root of the errors a user can cause and fix.

Every fwdasv module raises a subclass of `UserError` for bad input (a malformed
case, a missing file, no GPU, a timeout); the command line prints its message
as one line. Anything else escaping is a fwdasv bug and stays loud.
"""


class UserError(Exception):
    """A mistake in the input or the machine's state, with the fix in the message."""
