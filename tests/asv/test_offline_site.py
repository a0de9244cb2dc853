"""`fwdasv.asv.offline_site`: asv's published page loads its libraries from the site itself."""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
from pathlib import Path

import asv
import pytest

import fwdasv
from fwdasv.asv.offline_site import LIB_DIR, LOCAL_COPIES, SiteError, localize, make_self_contained

ASV_INDEX = Path(asv.__file__).parent / "www" / "index.html"
COPIES = Path(fwdasv.__file__).resolve().parent / "data" / "vendor" / "asv_www"


def test_every_cdn_library_of_asvs_page_is_replaced_by_a_copy_with_its_integrity() -> None:
    original = ASV_INDEX.read_text("utf-8")
    localized, used = localize(original, COPIES)
    assert sorted(set(used)) == sorted(set(LOCAL_COPIES.values()))
    tags = re.findall(r"<(?:script|link)\b[^>]*>", localized)
    assert not [t for t in tags if re.search(r'(?:src|href)="https?://', t)]
    for tag in tags:
        local = re.search(rf'(?:src|href)="{LIB_DIR}/([^"]+)"', tag)
        if local is None:
            continue
        digest = base64.b64encode(hashlib.sha384((COPIES / local.group(1)).read_bytes()).digest())
        assert f'integrity="sha384-{digest.decode()}"' in tag, tag
    # Nothing but those tags changed.
    strip = re.compile(r"<(?:script|link)\b[^>]*>")
    assert strip.sub("", localized) == strip.sub("", original)


def test_make_self_contained_copies_the_libraries_and_is_idempotent(tmp_path: Path) -> None:
    shutil.copy(ASV_INDEX, tmp_path / "index.html")
    make_self_contained(tmp_path)
    once = (tmp_path / "index.html").read_text()
    assert sorted(p.name for p in (tmp_path / LIB_DIR).iterdir()) == sorted(
        set(LOCAL_COPIES.values())
    )
    make_self_contained(tmp_path)
    assert (tmp_path / "index.html").read_text() == once


def test_an_unknown_cdn_library_is_an_error_not_a_silently_broken_site() -> None:
    page = '<script src="https://cdn.example.org/new-lib.js"></script>'
    with pytest.raises(SiteError, match=r"new-lib\.js"):
        localize(page, COPIES)
