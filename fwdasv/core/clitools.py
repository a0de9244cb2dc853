"""Shared click plumbing: one-line errors, no tracebacks for user errors.

Every fwdasv command reports a mistake the user can fix (a bad option value, a
missing file, no GPU) as a single `Error: ...` line naming the input and the
fix, with a non-zero exit status; errors that mean fwdasv is wrong still raise.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from fwdasv.core.errors import UserError


class CliError(click.ClickException):
    """A one-line error with a chosen exit status."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


def _one_line_main(command: click.Command, args: Any, kwargs: dict[str, Any]) -> Any:
    prog = kwargs.pop("prog_name", None)
    try:
        status = click.Command.main(command, args, prog_name=prog, standalone_mode=False, **kwargs)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.UsageError as error:
        hint = ""
        if error.ctx is not None:
            hint = f" (see '{error.ctx.command_path} --help')"
        click.echo(f"Error: {error.format_message()}{hint}", err=True)
        sys.exit(error.exit_code)
    except click.ClickException as error:
        click.echo(f"Error: {error.format_message()}", err=True)
        sys.exit(error.exit_code)
    except click.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except BaseException as error:
        if isinstance(error, UserError):
            click.echo(f"Error: {error}", err=True)
            sys.exit(1)
        raise
    # Without standalone mode click returns ctx.exit(n)'s status instead of
    # exiting; fwdasv's commands themselves return nothing.
    if isinstance(status, int) and status:
        sys.exit(status)
    return status


class Command(click.Command):
    def main(self, args: Any = None, **kwargs: Any) -> Any:
        return _one_line_main(self, args, kwargs)


class Group(click.Group):
    command_class = Command

    def main(self, args: Any = None, **kwargs: Any) -> Any:
        return _one_line_main(self, args, kwargs)


Group.group_class = Group
