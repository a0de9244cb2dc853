"""Shared click plumbing: one-line errors, exit statuses, and the options commands share.

Every fwdasv command reports a mistake the user can fix (a bad option value, a
missing file, no GPU) as a single `Error: ...` line naming the input and the
fix, with a non-zero exit status; errors that mean fwdasv is wrong still raise.
The status of an error is read here and nowhere else, by the one rule of
`fwdasv.core.errors.EXIT_RULE`: a `UserError`'s own `exit_code` when it has one,
else 2, as click's own usage errors; so "found a regression" (1) and "could
not run" (2) never look alike to CI.
"""

from __future__ import annotations

import inspect
import math
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import click

from fwdasv.core import stats
from fwdasv.core.errors import EXIT_FINDING, EXIT_INTERRUPTED, EXIT_USAGE, UserError

CONTEXT = {"help_option_names": ["-h", "--help"], "show_default": True}

F = TypeVar("F", bound=Callable[..., object])


class CliError(UserError):
    """A one-line error with a chosen exit status, raised by command code only."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def _one_line_main(
    command: click.Command,
    args: Sequence[str] | None,
    prog_name: str | None,
    complete_var: str | None,
    extra: dict[str, Any],
) -> Any:
    try:
        status = click.Command.main(
            command,
            args,
            prog_name=prog_name,
            complete_var=complete_var,
            standalone_mode=False,
            **extra,
        )
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.exceptions.NoArgsIsHelpError as error:
        # A group run with no command: its help, as click prints it, not an "Error:".
        click.echo(error.format_message(), err=True)
        sys.exit(error.exit_code)
    except click.UsageError as error:
        hint = ""
        if error.ctx is not None:
            hint = f" (see '{error.ctx.command_path} --help')"
        click.echo(f"Error: {error.format_message()}{hint}", err=True)
        sys.exit(error.exit_code)
    except click.ClickException as error:
        click.echo(f"Error: {error.format_message()}", err=True)
        # click's own ClickException and FileError carry 1, a finding's status here.
        sys.exit(EXIT_USAGE)
    except (click.Abort, KeyboardInterrupt):
        click.echo("Aborted.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except UserError as error:
        # Raised outside any command's invoke (the group's own options).
        click.echo(f"Error: {error}", err=True)
        sys.exit(error.exit_code if error.exit_code is not None else EXIT_USAGE)
    # Without standalone mode click returns ctx.exit(n)'s status instead of
    # exiting; fwdasv's commands themselves return nothing.
    if isinstance(status, int) and status:
        sys.exit(status)
    return status


class _OneLineMain(click.Command):
    """Runs standalone (always exits), with every error as one line and its status."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Always standalone: a user error is one line and the exit status."""
        return _one_line_main(self, args, prog_name, complete_var, extra)


class Command(_OneLineMain):
    """A command whose user errors are one line; status `user_error_status` (2) unless the
    error carries its own."""

    user_error_status = EXIT_USAGE

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except UserError as error:
            status = error.exit_code if error.exit_code is not None else self.user_error_status
            raise CliError(str(error), status) from error


class AnalysisCommand(Command):
    """The analysis commands' class (their status 1 is a finding); the same rule as every
    command's."""


class Group(_OneLineMain, click.Group):
    command_class = Command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each command with its whole first paragraph, wrapped (click cuts it at ~45
        characters with "...")."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, command.short_help or summary(command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The epilog as written (a table: click would rewrap it into one paragraph)."""
        if self.epilog:
            formatter.write_paragraph()
            for line in self.epilog.splitlines():
                formatter.write(f"{line}\n")


def summary(text: str) -> str:
    """A docstring's first paragraph, on one line."""
    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())


Group.group_class = Group


def finding(found: bool) -> None:
    """End a command with status 1 when it found something (a regression), else 0."""
    if found:
        raise SystemExit(EXIT_FINDING)


def end(status: int) -> None:
    """End a command with a gate's exit status (`fwdasv.analysis.rules.gate.Gate.exit_status`)."""
    if status:
        raise SystemExit(status)


def skip_unreadable_option(f: F) -> F:
    return click.option(
        "--skip-unreadable",
        is_flag=True,
        help="Pass (exit 0) although some result files could not be read; they are still "
        "named on stderr. Without it, an unreadable file fails the command (status 2): a "
        "regression at its commit would not show.",
    )(f)


class Unreadable(Protocol):
    """A result file that could not be read, as one line (`fwdasv.asv.history.Problem`)."""

    def line(self) -> str: ...


def warn_unreadable(problems: Sequence[Unreadable], skip: bool) -> int:
    """Name each unreadable result file on stderr; the count the gate reads (0 when skipped)."""
    if not problems:
        return 0
    count = len(problems)
    label = "Warning" if skip else "Error"
    files = "file" if count == 1 else "files"
    click.echo(f"{label}: {count} result {files} could not be read:", err=True)
    for problem in problems:
        click.echo(f"  {problem.line()}", err=True)
    if not skip:
        click.echo(
            "  fix or remove them (`asv run` the commit again), or pass --skip-unreadable",
            err=True,
        )
    return 0 if skip else count


# --- options shared by several commands ---------------------------------------------


def path_option(
    *decls: str, kind: str = "file", exists: bool = False, help: str, **attrs: Any
) -> Callable[[F], F]:
    """An option naming a file (`kind` "file"), a directory ("dir") or either ("any"),
    handed to the command as a `Path` (None when not given and no `default`); an empty value
    is refused by the option's name (`PathOption`), and with `exists` one that is missing.
    `attrs` go to click.option (default, show_default, metavar, required)."""
    if kind not in ("file", "dir", "any"):
        raise ValueError(f"path_option's kind is file, dir or any, not {kind!r}")
    return click.option(
        *decls,
        type=PathOption(
            exists=exists, file_okay=kind != "dir", dir_okay=kind != "file", path_type=Path
        ),
        help=help,
        **attrs,
    )


def config_option(
    help: str = "The asv configuration (its results_dir, html_dir and repo).",
) -> Callable[[F], F]:
    return path_option("--config", "config", default="asv.conf.json", show_default=True, help=help)


def machine_option(
    help: str = "asv machine name [default: the only one in the results].",
) -> Callable[[F], F]:
    return click.option("--machine", "-m", default=None, help=help)


def bench_filter(help: str) -> Callable[[F], F]:
    """`--bench`/`-b`, repeatable regexes choosing benchmarks; `help` says what they match."""
    return click.option("--bench", "-b", multiple=True, help=help)


bench_option = bench_filter(
    "Regex searched in the benchmark name or 'name(params)', as `asv run -b`; "
    "repeat to keep any match."
)


def bench_regexes(
    patterns: Iterable[str], error: type[UserError] = UserError
) -> list[re.Pattern[str]]:
    """`--bench`'s regexes, compiled; `error` (the caller's UserError) naming the first
    that is not one, in one line."""
    try:
        return [re.compile(p) for p in patterns]
    except re.error as failure:
        raise error(f"--bench: bad regular expression: {failure}") from None


def refuse_unmatched_bench(
    patterns: Sequence[re.Pattern[str]],
    names: Iterable[str],
    where: str,
    error: type[UserError] = UserError,
) -> list[str]:
    """`error` (the caller's UserError), one line, when `--bench`'s regexes (any of them
    keeps a benchmark, as `asv run -b`) match none of `names` (the benchmarks `where` says,
    e.g. "judged in results/"), with some of those names: a typo in a CI job's filter would
    otherwise select nothing and pass. Where some match, a warning line for each regex that
    matches nothing (`-b Good -b Typo`: Typo's benchmark would go unjudged unnoticed), for
    the caller to show. No regex: nothing to refuse."""
    if not patterns:
        return []
    known = sorted(set(names))
    idle = [p for p in patterns if not any(p.search(name) for name in known)]
    if len(idle) < len(patterns):
        return [
            f"--bench {p.pattern!r} matches no benchmark {where}: it selects nothing (the "
            "other --bench regexes do); fix it or drop it"
            for p in idle
        ]
    shown = sorted({name.split("(", 1)[0] for name in known})
    listed = ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")
    given = ", ".join(repr(p.pattern) for p in patterns)
    raise error(
        f"--bench {given} {'matches' if len(patterns) == 1 else 'match'} no benchmark {where} "
        f"({'the benchmarks there: ' + listed if listed else 'none there'}); fix the regex, "
        "or drop it to take every benchmark"
    )


def command_here(name: str, relative: bool = True) -> str:
    """How to run console script `name` from the shell that ran this one: the path beside
    this Python when it is not what PATH finds (scripts/demo.sh's .venv-demo/bin is not on
    PATH), relative to here when inside (`relative`; absolute for a line that `cd`s first);
    `name` when PATH finds it; else `python -m name`."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and shutil.which(name) != str(beside):
        if not relative:
            return str(beside)
        try:
            return os.path.relpath(beside)
        except ValueError:
            return str(beside)
    return name if shutil.which(name) else f"{sys.executable} -m {name}"


class PathOption(click.Path):
    """click's Path that refuses an empty or blank value by the option's name (click would
    take it as the current directory)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            kind = (
                "a file"
                if not self.dir_okay
                else "a directory"
                if not self.file_okay
                else "a file or directory"
            )
            self.fail(f"the path is empty; give {kind} name.", param, ctx)
        return super().convert(value, param, ctx)


class MachineName(click.types.StringParamType):
    """An asv machine name that a command records under: asv makes it a directory of
    results_dir (results/<name>/), so an empty name, a path separator, a leading dot or a
    control character is refused by the option's name (`hw machine --name a/b` wrote an
    entry asv would file two levels down; `--name ""` fell back to the default)."""

    name = "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value)
        why = (
            "is empty"
            if not text.strip()
            else "holds a path separator"
            if "/" in text or "\\" in text
            else "starts with a dot"
            if text.startswith(".")
            else "holds a control character or space at an end"
            if text != text.strip() or any(ord(c) < 32 or ord(c) == 127 for c in text)
            else None
        )
        if why is not None:
            self.fail(
                f"{text!r} {why}: asv keeps each machine's results in results/<name>/; give a "
                "name of letters, digits, '-', '_' or '.' (not first)",
                param,
                ctx,
            )
        return text


class FiniteRange(click.FloatRange):
    """click's FloatRange that refuses nan and +-inf: a threshold of nan compares false
    with everything, one of inf hides every step."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def factor_option(help: str) -> Callable[[F], F]:
    """`--factor`, a ratio of medians (1.05 = 5%); its default comes from the configuration
    (`fwdasv.core.verdicts`), so the help says it and the command reads None."""
    return click.option("--factor", type=FiniteRange(min=1), default=None, help=help)


def alpha_option(default: float = stats.SIGNIFICANCE, help: str | None = None) -> Callable[[F], F]:
    return click.option(
        "--alpha",
        type=FiniteRange(min=0, max=1, min_open=True, max_open=True),
        default=default,
        show_default=True,
        help=help or "Significance level of the test (asv's is 0.002).",
    )


def format_option(
    choices: tuple[str, ...], help: str, default: str | None = None
) -> Callable[[F], F]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(choices),
        default=default or choices[0],
        show_default=True,
        help=help,
    )
