"""Two changes to asv's published pages: commit links that land on a page, and the
Regressions page in the order fwdasv lists it.

asv's pages link a commit as `show_commit_url + hash` (regressions.js, summarylist.js,
a click on a graph point in graphdisplay.js). With asv's default "#" that is
`index.html#97dabcef`: asv takes the hash for a benchmark's name and graphdisplay.js
throws (`index.benchmarks[name]` is undefined: "reading 'params'"), a blank page.
`link_commits` gives a site whose project names no commit URL (unset, "#" or "")
fwdasv's findings page instead, which holds an anchor per published commit
(COMMIT_PAGE + the hash as asv shows it), and puts a guard first in index.html: a
hash that is a commit's (hex, no dot; a benchmark's name has dots), from a link made
before, goes to that page instead of asv's graph. `keep_entry_order` drops
regressions.js's default sort (by factor), so the page lists regressions.json's
entries in its order (what gates first: `fwdasv.analysis.publish.publish`); a click on a
column still sorts.
"""

from __future__ import annotations

import json
from pathlib import Path

from fwdasv.core.files import write_atomic

COMMIT_PAGE = "fwdasv/findings.html#"
GUARD_ID = "fwdasv-commit-links"
UNSET = ("", "#", None)
# Runs before asv's scripts: on load, and on a hash change ahead of asv's own handler
# (registered later, so stopImmediatePropagation keeps it from the commit's hash).
GUARD = f"""<script id="{GUARD_ID}">
(function () {{
  function toCommit() {{
    var commit = /^#([0-9a-f]{{6,40}})$/i.exec(window.location.hash);
    if (commit) {{ window.location.replace('{COMMIT_PAGE}' + commit[1]); }}
    return commit !== null;
  }}
  if (!toCommit()) {{
    window.addEventListener('hashchange', function (event) {{
      if (toCommit()) {{ event.stopImmediatePropagation(); }}
    }});
  }}
}})();
</script>
"""


def commit_url(configured: object) -> str:
    """The URL a commit hash is appended to: the project's, else fwdasv's page."""
    return COMMIT_PAGE if configured in UNSET else str(configured)


class PatchError(RuntimeError):
    """asv's page does not hold the code fwdasv changes (asv was upgraded)."""


# regressions.js (asv 0.6.6): the sort applied when the address names none.
DEFAULT_SORT = """        else {
            var th_to_sort = table.find("thead th").eq(3);
            th_to_sort.stupidsort("desc");
        }
"""
NO_DEFAULT_SORT = (
    "        /* fwdasv: no default sort, regressions.json's order (what gates first) */\n"
)


def keep_entry_order(html_dir: str | Path) -> None:
    """The Regressions page without its default sort by factor (see the module); idempotent."""
    script = Path(html_dir) / "regressions.js"
    text = script.read_text("utf-8")
    if NO_DEFAULT_SORT in text:
        return
    if DEFAULT_SORT not in text:
        raise PatchError(
            f"{script} holds no default sort by factor as asv 0.6.6's does (a newer asv?); "
            "its Regressions page would not list what gates first"
        )
    write_atomic(script, text.replace(DEFAULT_SORT, NO_DEFAULT_SORT))


def link_commits(html_dir: str | Path) -> str:
    """Point the published site's commit links at a page (see the module); idempotent.
    Returns the commit URL the site uses."""
    html_dir = Path(html_dir)
    index_path = html_dir / "index.json"
    index = json.loads(index_path.read_text())
    url = commit_url(index.get("show_commit_url"))
    if index.get("show_commit_url") != url:
        index["show_commit_url"] = url
        write_atomic(index_path, json.dumps(index, separators=(",", ":")))
    page = html_dir / "index.html"
    text = page.read_text("utf-8")
    at = text.find("<script")  # asv's first, after its charset
    if GUARD_ID not in text and at >= 0:
        write_atomic(page, text[:at] + GUARD + "    " + text[at:])
    return url
