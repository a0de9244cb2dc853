"""The `fwdasv` command's help texts: one style everywhere.

Walks every command of the group (nested ones included) as click builds
their help: defaults written `[default: ...]`, the same option naming a file
shown as FILE wherever it appears, and the root listing giving each command's
whole summary.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

import click
from click.testing import CliRunner

from fwdasv.cli import main
from fwdasv.core.clitools import summary


def _commands(command: click.Command, path: tuple[str, ...]) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(path), command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, (*path, name))


def _options() -> Iterator[tuple[str, click.Context, click.Option]]:
    for path, command in _commands(main, ("fwdasv",)):
        ctx = click.Context(command, info_name=path.rsplit(" ", 1)[-1])
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                yield path, ctx, param


def test_every_default_is_written_in_square_brackets() -> None:
    parenthesized = []
    for path, ctx, option in _options():
        record = option.get_help_record(ctx)
        if record and re.search(r"\(default\b", record[1]):
            parenthesized.append((path, option.opts[0], record[1]))
    assert not parenthesized, parenthesized


def test_an_option_naming_a_file_is_shown_as_file_wherever_it_appears() -> None:
    metavars: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path, ctx, option in _options():
        if not option.is_flag:
            metavars[option.opts[0]].add((option.make_metavar(ctx), path))
    for name in ("--config", "--machine-file", "--state-file", "--output-json"):
        shown = {metavar for metavar, _ in metavars[name]}
        assert shown == {"FILE"}, (name, sorted(metavars[name]))
    for name in ("--dir", "--profile-dir"):
        shown = {metavar for metavar, _ in metavars[name]}
        assert shown == {"DIRECTORY"}, (name, sorted(metavars[name]))


def test_the_root_help_gives_each_commands_whole_summary() -> None:
    for args in ([], ["hw"]):
        result = CliRunner().invoke(main, [*args, "--help"], terminal_width=80)
        assert result.exit_code == 0, result.output
        listing = " ".join(result.output.split("Commands:", 1)[1].split())
        group = main if not args else main.commands["hw"]
        for name, command in group.commands.items():
            assert summary(command.help or "") in listing, (name, listing)
        assert "..." not in listing, listing
