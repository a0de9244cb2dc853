"""The `fwdasv` command's help texts: one style everywhere.

Walks every command of the group (nested ones included) as click builds
their help: defaults written `[default: ...]`, the same option naming a file
shown as FILE wherever it appears, and the root listing giving each command's
whole summary, then the one exit-status rule, which user mistakes follow.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

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


def _taken(
    options: list[tuple[str, click.Option]], values: tuple[str, ...], said: str = ""
) -> list[tuple[str, str, str]]:
    """The (command, option, value) whose type took the value; each refusal says `said`."""
    taken = []
    for path, option in options:
        for value in values:
            try:
                option.type.convert(value, option, None)
            except click.BadParameter as error:
                assert said in error.message, (path, option.opts[0], error.message)
                continue
            taken.append((path, option.opts[0], value))
    return taken


def test_every_option_has_help() -> None:
    """The fleet's --max-processes, --explain and --bisect had none."""
    bare = [(p, o.opts[0]) for p, _, o in _options() if not (o.help or "").strip()]
    assert not bare, bare


def test_every_number_option_refuses_nan_and_inf() -> None:
    """`regressions --min-effect nan` ran as if no threshold was given (nan compares false)
    and `--min-effect inf` said "No regressions": click's FloatRange takes both."""
    numbers = [
        (path, option)
        for path, _, option in _options()
        if isinstance(option.type, click.FloatRange) or option.type is click.FLOAT
    ]
    assert numbers  # --min-effect, --factor, --alpha, --warmup-s, --timeout-s at least
    assert not _taken(numbers, ("nan", "inf", "-inf"))
    result = CliRunner().invoke(main, ["regressions", "--min-effect", "nan"])
    assert result.exit_code == 2, result.output
    assert "'nan' is not a finite number" in result.output


def test_every_path_option_refuses_an_empty_path() -> None:
    """`--config ""` was read as the current directory ("/cwd is not a file") and
    `export -o ""` as "--output . is a directory": neither named the empty value."""
    paths = [(p, o) for p, _, o in _options() if isinstance(o.type, click.Path)]
    assert len(paths) >= 15, paths  # --config of every command, --output, --machine-file, ...
    assert not _taken(paths, ("", " "), "the path is empty")
    result = CliRunner().invoke(main, ["export", "-o", ""])
    assert result.exit_code == 2, result.output
    assert "'--output' / '-o': the path is empty" in result.output
    # It says what the option takes: --config a file (a directory is refused).
    result = CliRunner().invoke(main, ["regressions", "--config", ""])
    assert result.exit_code == 2 and "the path is empty; give a file name." in result.output


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


def test_a_shared_file_option_reads_the_same_in_every_command() -> None:
    """nightly's --state-file and --machine-file were its own: other help than hw setup's
    and hw machine's, and a str where those hand a Path. One definition serves all."""
    helps: dict[str, set[str]] = defaultdict(set)
    users: dict[str, set[str]] = defaultdict(set)
    for path, _, option in _options():
        if option.opts[0] in ("--state-file", "--machine-file"):
            helps[option.opts[0]].add(option.help or "")
            users[option.opts[0]].add(path)
            assert isinstance(option.type, click.Path) and option.type.type is Path, path
    assert {"fwdasv nightly", "fwdasv hw setup", "fwdasv hw reset"} <= users["--state-file"]
    assert {"fwdasv nightly", "fwdasv hw machine"} <= users["--machine-file"]
    assert all(len(texts) == 1 for texts in helps.values()), helps


def test_a_bad_gpu_selection_is_refused_as_the_option_is_read(tmp_path: Path) -> None:
    """Every command taking --gpus reads it with one type: a bad item is exit 2 in
    parse_gpu_selection's words before the command runs (nothing written), a good one
    reaches the command (on a box without NVML, exit 4 from the command itself)."""
    machine_file = tmp_path / "machines.json"
    commands = (
        ["hw", "setup", "--dry-run"],
        ["hw", "check"],
        ["hw", "machine", "--machine-file", str(machine_file)],
        ["nightly", "--config", str(tmp_path / "none.json")],
    )
    for args in commands:
        result = CliRunner().invoke(main, [*args, "--gpus", "0,cuda:1"])
        assert result.exit_code == 2, (args, result.output)
        assert "--gpus '0,cuda:1': 'cuda:1' is neither an NVML index" in result.output, args
    assert not machine_file.exists()
    result = CliRunner().invoke(main, ["hw", "check", "--gpus", "0"])
    assert result.exit_code != 2, result.output


def test_bisect_given_two_commits_for_its_range_says_so(tmp_path: Path) -> None:
    """`compare` and `explain` take A B; `bisect A B BENCH` was "Got unexpected extra
    argument (BENCH)", naming the benchmark rather than the range."""
    cases = {
        ("f0dbdc6a", "97dabcef", "forward.TinyLM.track_relative"): "Error: GOOD..BAD is one "
        "argument, not two commits: write f0dbdc6a..97dabcef forward.TinyLM.track_relative",
        ("a..b", "forward.X.track", "more"): "Error: unexpected argument 'more': bisect takes "
        "[GOOD..BAD BENCH]",
        ("f0dbdc6a",): "Error: 'f0dbdc6a': write the range as GOOD..BAD",
    }
    config = str(tmp_path / "none.json")
    for args, said in cases.items():
        result = CliRunner().invoke(main, ["bisect", *args, "--config", config])
        assert result.exit_code == 2, result.output
        assert result.output.strip().splitlines() == [said]
    usage = CliRunner().invoke(main, ["bisect", "--help"]).output.splitlines()[0]
    assert usage.endswith(" bisect [OPTIONS] [GOOD..BAD] [BENCH]"), usage


def test_a_group_without_a_command_prints_its_help_not_an_error() -> None:
    """`fwdasv` alone printed its whole help as "Error: Usage: ..." with a hint to --help."""
    for args in ([], ["hw"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output  # as click's own groups
        assert result.output.startswith("Usage: "), result.output[:80]
        assert "Error" not in result.output and "(see '" not in result.output


def test_the_root_help_gives_each_commands_whole_summary() -> None:
    for args in ([], ["hw"]):
        result = CliRunner().invoke(main, [*args, "--help"], terminal_width=80)
        assert result.exit_code == 0, result.output
        listing = " ".join(result.output.split("Commands:", 1)[1].split())
        group = main if not args else main.commands["hw"]
        for name, command in group.commands.items():
            assert summary(command.help or "") in listing, (name, listing)
        assert "..." not in listing, listing


def test_the_exit_status_rule_ends_the_root_help_and_is_the_readmes_table() -> None:
    from fwdasv.core.errors import EXIT_RULE

    shown = CliRunner().invoke(main, ["--help"], terminal_width=80)
    assert shown.exit_code == 0 and shown.output.rstrip().endswith(EXIT_RULE), shown.output
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert f"```\n{EXIT_RULE}\n```" in readme
    # bisect's own statuses, under the rule and in its help.
    words = " ".join(readme.split())
    assert "exit 0 every commit asked for named, 1 one not named" in words
    assert "Under this rule `fwdasv bisect` exits 0 when it named the first bad commit" in words
    assert "1 when it named none for one" in words and "2 when it cannot bisect" in words
    bisect = CliRunner().invoke(main, ["bisect", "--help"], terminal_width=80)
    said = " ".join(bisect.output.split())
    assert "Exits 0 when every commit asked for is named" in said, said
    assert "1 when one is not named, 2 on bad input" in said, said


def test_a_user_mistake_exits_2_in_every_kind_of_command(tmp_path: Path) -> None:
    """forward, init and hw like the analysis commands and click's own checks (they were 1)."""
    mistakes = {
        "forward, a missing parent": ["forward", "--case", "p=4", "--output-json", "no/o.json"],
        "forward, click's own check": ["forward", "--case", "p=4", "--output-json", str(tmp_path)],
        "init, no repository": ["init", "--repo", str(tmp_path / "none"), "--target", "a.b:c"],
        "hw, a missing parent": ["hw", "machine", "--machine-file", "no/machine.json"],
        "export, a bad format": ["export", str(tmp_path), "--format", "xml"],
    }
    for what, args in mistakes.items():
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (what, result.output)
        assert result.stderr.startswith("Error: ") and len(result.stderr.splitlines()) == 1, what


def test_a_project_dir_that_cannot_be_made_is_one_line_before_any_work(tmp_path: Path) -> None:
    """init and demo fill --dir with a tree of their own: a file on its way, a device, a
    folder that takes no new entry are refused in one line (they were tracebacks), and
    nothing is created on the way. (A file at --dir itself is click's own refusal.)"""
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "a-file").write_text("kept\n")
    bad = {
        str(tmp_path / "a-file" / "project"): "a-file is a file, not a directory",
        "/dev/null": "/dev/null is a device; give a directory",
        # /proc takes no new entry, even from root (os.access may say yes).
        "/proc/fwdasv-project/deeper": "/proc",
    }
    commands = {
        "init": ["init", "--repo", str(repo), "--target", "a.b:c", "--no-check", "--dir"],
        "demo": ["demo", "--dir"],
    }
    for name, args in commands.items():
        for directory, said in bad.items():
            result = CliRunner().invoke(main, [*args, directory])
            assert result.exit_code == 2, (name, directory, result.output)
            (line,) = result.stderr.splitlines()
            assert line.startswith(f"Error: --dir {directory}") and said in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "repo"]
    assert (tmp_path / "a-file").read_text() == "kept\n" and not any(repo.iterdir())


def test_a_machine_name_asv_could_not_file_its_results_under_is_refused(tmp_path) -> None:
    """asv keeps a machine's results in results/<name>/: `hw machine --name a/b` wrote an
    entry asv would file two levels down, and `--name ""` fell back to the default name.
    Each command that records under a name refuses one, before anything is written."""
    machine_file = tmp_path / "machine.json"
    for bad, why in (("a/b", "holds a path separator"), ("", "is empty"), (".hidden", "dot")):
        for argv in (
            ["hw", "machine", "--name", bad, "--machine-file", str(machine_file)],
            ["nightly", "--config", str(tmp_path / "asv.conf.json"), "--machine", bad],
            ["demo", str(tmp_path / "demo"), "--machine", bad],
        ):
            result = CliRunner().invoke(main, argv)
            assert result.exit_code == 2, (argv, result.output)
            assert why in result.output and "results/<name>/" in result.output, result.output
    assert not machine_file.exists() and not (tmp_path / "demo").exists()
