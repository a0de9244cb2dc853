"""`fwdasv.asv.site_patches`: where the project names no commit URL, asv's commit links go to
fwdasv's commits page, and a commit's hash after `index.html#` does too; asv's Regressions
page keeps regressions.json's order (what gates first) instead of sorting by factor."""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path

import pytest

from fwdasv.asv.site_patches import (
    COMMIT_PAGE,
    GUARD_ID,
    NO_DEFAULT_SORT,
    PatchError,
    keep_entry_order,
    link_commits,
)

ASV_INDEX = """<!doctype html>
<html>
  <head>
    <meta http-equiv="Content-Type" content="text/html; charset=utf-8">
    <script type="text/javascript">function js_load_failure() {}</script>
  </head>
</html>
"""


def _site(tmp_path: Path, show_commit_url: object) -> Path:
    (tmp_path / "index.html").write_text(ASV_INDEX)
    index = {"project": "p", "show_commit_url": show_commit_url, "hash_length": 8}
    (tmp_path / "index.json").write_text(json.dumps(index))
    return tmp_path


def test_no_commit_url_points_the_links_at_fwdasvs_page(tmp_path: Path) -> None:
    site = _site(tmp_path, "#")  # asv's default: `index.html#<hash>`, a blank page
    assert link_commits(site) == COMMIT_PAGE == "fwdasv/findings.html#"
    assert json.loads((site / "index.json").read_text())["show_commit_url"] == COMMIT_PAGE
    page = (site / "index.html").read_text()
    # The guard runs before asv's own scripts, after the charset; once, however often.
    assert page.index("charset") < page.index(GUARD_ID) < page.index("js_load_failure")
    link_commits(site)
    assert (site / "index.html").read_text() == page


def test_a_projects_commit_url_is_kept(tmp_path: Path) -> None:
    url = "https://github.com/o/r/commit/"
    site = _site(tmp_path, url)
    assert link_commits(site) == url
    assert json.loads((site / "index.json").read_text())["show_commit_url"] == url


def test_the_regressions_page_keeps_the_files_order(tmp_path: Path) -> None:
    shipped = Path(str(resources.files("asv") / "www" / "regressions.js"))
    shutil.copyfile(shipped, tmp_path / "regressions.js")
    keep_entry_order(tmp_path)
    patched = (tmp_path / "regressions.js").read_text()
    assert NO_DEFAULT_SORT in patched and 'stupidsort("desc")' not in patched
    assert "params.sort && params.dir" in patched  # a sort asked for in the address still is
    keep_entry_order(tmp_path)
    assert (tmp_path / "regressions.js").read_text() == patched
    (tmp_path / "regressions.js").write_text("/* another asv */")
    with pytest.raises(PatchError, match="a newer asv"):
        keep_entry_order(tmp_path)
