"""`fwdasv.asv.repository`: where a browser shows one of the repository's commits, from its
git remote, and `fwdasv init` writing it as asv's `show_commit_url`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import git

from fwdasv.asv.repository import Repository, web_commit_url
from fwdasv.cli import main


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("git@github.com:o/r.git", "https://github.com/o/r/commit/"),
        ("https://github.com/o/r", "https://github.com/o/r/commit/"),
        ("https://github.com/o/r.git\n", "https://github.com/o/r/commit/"),
        ("ssh://git@github.com:22/o/r.git", "https://github.com/o/r/commit/"),
        ("https://user@gitlab.com/group/sub/r.git", "https://gitlab.com/group/sub/r/-/commit/"),
        ("git@bitbucket.org:o/r.git", "https://bitbucket.org/o/r/commits/"),
        ("git@git.example.com:o/r.git", None),  # a host whose pages fwdasv does not know
        ("/srv/git/r.git", None),
        ("file:///srv/git/r.git", None),
        ("https://github.com/o", None),  # no repository in it
        ("", None),
    ],
)
def test_a_remote_gives_its_commit_page(remote: str, url: str | None) -> None:
    assert web_commit_url(remote) == url


def _repo(path: Path, *remotes: tuple[str, str]) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "model.py").write_text("x = 1\n")
    git(path, "add", "model.py")
    git(path, "commit", "-q", "-m", "a model")
    for name, url in remotes:
        git(path, "remote", "add", name, url)
    return path


def test_origin_first_then_any_remote_with_a_known_page(tmp_path: Path) -> None:
    both = _repo(
        tmp_path / "both", ("fork", "git@github.com:me/r.git"), ("origin", "https://github.com/o/r")
    )
    assert Repository.open(both).commit_url() == "https://github.com/o/r/commit/"
    local = _repo(tmp_path / "local", ("origin", "/srv/git/r.git"), ("up", "git@github.com:u/r"))
    assert Repository.open(local).commit_url() == "https://github.com/u/r/commit/"
    assert Repository.open(_repo(tmp_path / "none")).commit_url() is None


def test_init_sets_asvs_commit_url_where_the_clone_has_one(tmp_path: Path) -> None:
    with_remote = _repo(tmp_path / "with", ("origin", "git@github.com:o/mymodel.git"))
    without = _repo(tmp_path / "without")
    for repo in (with_remote, without):
        args = ["init", "--repo", str(repo), "--target", "model:target", "--no-check"]
        done = CliRunner().invoke(main, [*args, "--dir", str(repo.parent / f"{repo.name}-asv")])
        assert done.exit_code == 0, done.output
    config = json.loads((tmp_path / "with-asv" / "asv.conf.json").read_text())
    assert config["show_commit_url"] == "https://github.com/o/mymodel/commit/"
    assert config["project_url"] == "https://github.com/o/mymodel/"
    # None known: asv's default; `fwdasv publish` points the links at its commits page.
    assert "show_commit_url" not in json.loads(
        (tmp_path / "without-asv" / "asv.conf.json").read_text()
    )


def test_inits_check_installs_with_the_flags_each_commit_is_installed_with() -> None:
    """The check's pip install (`repository.PIP_INSTALL`) is the environment's per commit
    (`envplugin.INSTALL_COMMAND`), less the quiet flag and the target directory."""
    from fwdasv.asv.envplugin import INSTALL_COMMAND
    from fwdasv.asv.repository import PIP_INSTALL

    (command,) = INSTALL_COMMAND
    words = command.split()
    at = words.index("-m")
    assert words[at:-1] == [w for w in PIP_INSTALL if w != "--quiet"], (words, PIP_INSTALL)
