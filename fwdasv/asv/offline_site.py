"""Make asv's published site work without the internet.

asv 0.6.6's `index.html` loads jQuery, flot, bootstrap, stupidtable and md5
from public CDNs; on a machine without them (a lab network, this project's own
test machines) every page ends on asv's error page. fwdasv ships copies of
those libraries (asv 0.5.1's vendored copies: the same releases, bootstrap
3.1.0 for 3.1.1; MIT licensed, notices inside each file, see
fwdasv/data/vendor/asv_www/NOTICE.md) and, after `asv publish`, points the page
at them with integrity hashes of the copies.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from importlib import resources
from pathlib import Path

from fwdasv.core.files import write_atomic

LIB_DIR = "_fwdasv_libs"
_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
_JSDELIVR = "https://cdn.jsdelivr.net/npm"
# asv 0.6.6's URLs -> the local copy.
LOCAL_COPIES = {
    "https://code.jquery.com/jquery-3.3.1.min.js": "jquery-3.3.1.min.js",
    f"{_CDNJS}/flot/0.8.3/jquery.flot.min.js": "jquery.flot-0.8.3.min.js",
    f"{_CDNJS}/flot/0.8.3/jquery.flot.time.min.js": "jquery.flot-0.8.3.time.min.js",
    f"{_CDNJS}/flot/0.8.3/jquery.flot.selection.min.js": "jquery.flot-0.8.3.selection.min.js",
    f"{_CDNJS}/flot/0.8.3/jquery.flot.categories.min.js": "jquery.flot-0.8.3.categories.min.js",
    f"{_JSDELIVR}/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": "jquery.flot.orderBars.js",
    f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js": "stupidtable.js",
    f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js": "md5.js",
    f"{_JSDELIVR}/bootstrap@3.1.1/dist/js/bootstrap.min.js": "bootstrap-3.1.0.min.js",
    f"{_JSDELIVR}/bootstrap@3.1.1/dist/css/bootstrap.min.css": "bootstrap-3.1.0.min.css",
}

_LOADING_TAG = re.compile(r"<(?:script|link)\b[^>]*>", re.IGNORECASE)
_URL_ATTR = re.compile(r'\b(src|href)="(https?://[^"]+)"')
_INTEGRITY_ATTR = re.compile(r'\bintegrity="[^"]*"')


class SiteError(RuntimeError):
    """asv's page loads a library fwdasv has no copy of (asv was upgraded)."""


def sri(data: bytes) -> str:
    """A Subresource Integrity value (sha384) for `data`."""
    return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode()


def _copies() -> Path:
    return Path(str(resources.files("fwdasv") / "data" / "vendor" / "asv_www"))


def localize(index_html: str, copies: Path) -> tuple[str, list[str]]:
    """`index_html` with every known CDN URL pointing at LIB_DIR/<copy>; and the copies used."""
    used: list[str] = []
    unknown: list[str] = []

    def rewrite(match: re.Match[str]) -> str:
        tag = match.group(0)
        url = _URL_ATTR.search(tag)
        if url is None:
            return tag
        name = LOCAL_COPIES.get(url.group(2))
        if name is None:
            unknown.append(url.group(2))
            return tag
        used.append(name)
        tag = tag.replace(url.group(0), f'{url.group(1)}="{LIB_DIR}/{name}"')
        integrity = f'integrity="{sri((copies / name).read_bytes())}"'
        if _INTEGRITY_ATTR.search(tag):
            return _INTEGRITY_ATTR.sub(integrity, tag)
        return tag.replace(f'{LIB_DIR}/{name}"', f'{LIB_DIR}/{name}" {integrity}', 1)

    localized = _LOADING_TAG.sub(rewrite, index_html)
    if unknown:
        raise SiteError(
            f"asv's index.html loads {unknown}, which fwdasv has no local copy of "
            "(a newer asv?); the site will need the internet for them"
        )
    return localized, used


def make_self_contained(html_dir: str | Path) -> list[str]:
    """Copy the libraries into `html_dir` and point its index.html at them; idempotent."""
    html_dir = Path(html_dir)
    index = html_dir / "index.html"
    copies = _copies()
    localized, used = localize(index.read_text("utf-8"), copies)
    target = html_dir / LIB_DIR
    target.mkdir(exist_ok=True)
    for name in sorted(set(used)):
        shutil.copyfile(copies / name, target / name)
    write_atomic(index, localized)
    return used
