"""The published demo site in a real browser: Debian's chromium, headless, through selenium.

`demo_history` measures the demo model's 12 commits with real asv and runs
`asv publish`; this module serves that html/ directory over HTTP on 127.0.0.1
and checks, from the rendered page (its DOM and flot's plot objects, never the
JSON files), that

- the graph page of `forward.TinyLM.track_latency` draws one point per
  measured commit (12) for a case, each point drawn on flot's canvas, and
- the regressions page lists that benchmark at the injected slow commit
  ("Support attention logit soft-capping"), shown as asv shows hashes
  (`hash_length` characters).

Screenshots go to tests/artifacts/ (git-ignored) and their paths are in every
assertion message.

asv 0.6.6's index.html loads jQuery, flot, bootstrap, stupidtable and md5
from public CDNs, which this closed network (and CI here) cannot reach: as
published, the page redirects to asv's error.html. The server therefore hands
the browser an index.html whose CDN URLs point to same-origin copies, the ones
asv 0.5.1 (its last release that shipped them) vendored; nothing else of the
site is changed. jQuery 3.3.1 is the CDN's very file; flot 0.8.3 and its
plugins are the same version minified elsewhere; bootstrap is 3.1.0 for 3.1.1,
and md5, stupidtable and orderBars are asv's older copies of those plugins.
Every tag carries the SHA-256 pinned here for its copy (Subresource
Integrity), so the browser refuses other bytes. The copies are fetched once
with pip (`pip download asv==0.5.1`; the sdist is read, not installed) into
tests/artifacts/; FWDASV_ASV_LIBS=DIR names a folder that already holds them
(a machine without the package index).

Missing chromium or chromedriver fails the test: scripts/test.sh installs
them, so their absence is a broken setup. FWDASV_SKIP_BROWSER=1 skips on
purpose.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import http.server
import importlib.util
import mimetypes
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # Without these three, Chromium's own background connections are refused here.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
TIMEOUT_S = 60
EXPECTED_POINTS = 12  # one per commit of the demo history, every one measured
SETUP_HINT = (
    "run scripts/test.sh (it installs Debian's chromium and chromium-driver and the test "
    "extra with selenium), or set FWDASV_SKIP_BROWSER=1 to skip the browser test on purpose"
)

# asv 0.6.6's CDN URLs -> asv 0.5.1's copy in its asv/www/vendor/ and that copy's SHA-256
# in Subresource Integrity form: the served page carries it and the browser checks it.
ASV_LIBS_RELEASE = "asv==0.5.1"
ASV_LIBS_SDIST_DIR = "asv-0.5.1/asv/www/vendor"
_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
_JSDELIVR = "https://cdn.jsdelivr.net/npm"
LOCAL_LIBS = {
    "https://code.jquery.com/jquery-3.3.1.min.js": (
        "jquery-3.3.1.min.js",
        "sha256-FgpCb/KJQlLNfOu91ta32o/NMZxltwRo8QtmkMRdAu8=",  # the CDN file's own hash
    ),
    f"{_CDNJS}/flot/0.8.3/jquery.flot.min.js": (
        "jquery.flot-0.8.3.min.js",
        "sha256-1x/oXNDtm9z58WDtMXawTtkV5hhs+H94feJNHN05J18=",
    ),
    f"{_CDNJS}/flot/0.8.3/jquery.flot.time.min.js": (
        "jquery.flot-0.8.3.time.min.js",
        "sha256-wbGH2Wwnn9cz9ucaxhx7+z3vMqOgpUyJq6jKkgwk/B4=",
    ),
    f"{_CDNJS}/flot/0.8.3/jquery.flot.selection.min.js": (
        "jquery.flot-0.8.3.selection.min.js",
        "sha256-MCA2scsFcrCm4Pwz8N5wiNZ/7nBhlOPW31DwMBGlhn0=",
    ),
    f"{_CDNJS}/flot/0.8.3/jquery.flot.categories.min.js": (
        "jquery.flot-0.8.3.categories.min.js",
        "sha256-DZlz0BIyAFVFyxangxUZpRrAqqVcTiRBvmLHUjFnodg=",
    ),
    f"{_JSDELIVR}/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js": (
        "jquery.flot.orderBars.js",
        "sha256-b3DJ1Cj3FM4y3S+PsKTRefZuMQJpEsPXI9mmUKkhA5w=",
    ),
    f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js": (
        "stupidtable.js",
        "sha256-cS/zl6VWAPg5nVvXIo0HipTZLgggLU5PGwhbK63rsYk=",
    ),
    f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js": (
        "md5.js",
        "sha256-tCQ/BldMlN2vWe5gAiNoNb5svoOgVUhlUgv7UjONKKQ=",
    ),
    f"{_JSDELIVR}/bootstrap@3.1.1/dist/js/bootstrap.min.js": (
        "bootstrap-3.1.0.min.js",
        "sha256-A783Hjykc5z+a+ph8BJrfLuU5HE+lwZR+azVrLPZ45k=",
    ),
    f"{_JSDELIVR}/bootstrap@3.1.1/dist/css/bootstrap.min.css": (
        "bootstrap-3.1.0.min.css",
        "sha256-EcdK7VCRHVTARFX+HZwE9CxfbPQ4qUl2+JDyXypZ9pk=",
    ),
}
LOCAL_PREFIX = "/_asv_libs/"

pytestmark = pytest.mark.slow


# --- what must be on the machine ----------------------------------------------------------


def _require_browser() -> None:
    """Fail (skip only on FWDASV_SKIP_BROWSER=1) unless chromium, chromedriver and selenium exist."""
    if os.environ.get("FWDASV_SKIP_BROWSER") == "1":
        pytest.skip("FWDASV_SKIP_BROWSER=1: the browser test is skipped on request")
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if importlib.util.find_spec("selenium") is None:
        missing.append("the selenium package")
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: {SETUP_HINT}", pytrace=False)


def _sri(data: bytes, algorithm: str = "sha256") -> str:
    return f"{algorithm}-{base64.b64encode(hashlib.new(algorithm, data).digest()).decode()}"


def _wrong_libs(folder: Path) -> list[str]:
    """The local copies missing from `folder` or with other bytes than pinned."""
    return [
        name
        for name, pinned in LOCAL_LIBS.values()
        if not (folder / name).is_file() or _sri((folder / name).read_bytes()) != pinned
    ]


def _fetch_asv_libs(into: Path) -> None:
    """Put asv 0.5.1's vendored copies of the site's libraries into `into` (pip download)."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-binary",
            ":all:",
            "--dest",
            tmp,
            ASV_LIBS_RELEASE,
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail(f"`{' '.join(command)}` took over 300 s", pytrace=False)
        sdists = list(Path(tmp).glob("asv-*.tar.gz"))
        if done.returncode != 0 or not sdists:
            pytest.fail(
                f"could not fetch the site's JavaScript libraries ({ASV_LIBS_RELEASE}'s sdist) "
                f"with pip (status {done.returncode}): {done.stderr.strip()[-1500:]}\n"
                "Without a package index, set FWDASV_ASV_LIBS to a folder with asv 0.5.1's "
                f"asv/www/vendor/ files {sorted(name for name, _ in LOCAL_LIBS.values())}.",
                pytrace=False,
            )
        into.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdists[0]) as tar:
            for name, _ in LOCAL_LIBS.values():
                source = tar.extractfile(f"{ASV_LIBS_SDIST_DIR}/{name}")
                assert source is not None, name
                partial = into / f".{name}.part"
                partial.write_bytes(source.read())
                partial.replace(into / name)


def _asv_libs() -> Path:
    """The folder with the local copies of the libraries asv's index.html loads from CDNs."""
    override = os.environ.get("FWDASV_ASV_LIBS")
    folder = Path(override) if override else ARTIFACTS / "asv-0.5.1-www-vendor"
    if _wrong_libs(folder) and not override:
        _fetch_asv_libs(folder)
    wrong = _wrong_libs(folder)
    if wrong:
        pytest.fail(
            f"{folder} lacks asv 0.5.1's copies of {wrong} (missing or other bytes than pinned "
            "in LOCAL_LIBS)",
            pytrace=False,
        )
    return folder


# --- the site, served -----------------------------------------------------------------------

_LOADING_TAG = re.compile(r"<(?:script|link)\b[^>]*>", re.IGNORECASE)
_URL_ATTR = re.compile(r'\b(?:src|href)="(https?://[^"]+)"')
_INTEGRITY_ATTR = re.compile(r'\bintegrity="((sha256|sha384|sha512)-[^"]+)"')


def _localized_index(index_html: str, libs: Path) -> tuple[str, dict[str, str]]:
    """asv's index.html with each CDN URL pointing to LOCAL_PREFIX; how each copy relates.

    Each tag's integrity hash becomes the local copy's pinned one, so the browser
    refuses a copy with other bytes (asv then shows its error.html).
    """
    how: dict[str, str] = {}
    unknown: list[str] = []

    def localize(tag_match: re.Match[str]) -> str:
        tag = tag_match.group(0)
        url_match = _URL_ATTR.search(tag)
        if url_match is None or (tag.lower().startswith("<link") and "stylesheet" not in tag):
            return tag
        url = url_match.group(1)
        if url not in LOCAL_LIBS:
            unknown.append(url)
            return tag
        name, pinned = LOCAL_LIBS[url]
        tag = tag.replace(url, LOCAL_PREFIX + name)
        integrity = _INTEGRITY_ATTR.search(tag)
        if integrity is not None:
            same = _sri((libs / name).read_bytes(), integrity.group(2)) == integrity.group(1)
            how[name] = "the CDN's bytes" if same else "asv 0.5.1's build"
            return tag.replace(integrity.group(1), pinned)
        how[name] = "asv 0.5.1's copy (the page has no integrity hash for it)"
        return tag.replace(url_match.group(0), f'{url_match.group(0)} integrity="{pinned}"')

    localized = _LOADING_TAG.sub(localize, index_html)
    assert not unknown, (
        f"asv's index.html loads {unknown} from the network, which this test has no local copy "
        "of: add it to LOCAL_LIBS (asv was probably upgraded)"
    )
    return localized, how


@dataclass
class Site:
    url: str  # ends with index.html
    libraries: dict[str, str]  # local copy -> the CDN's bytes or asv 0.5.1's build
    log: list[str] = field(default_factory=list)  # the server's request lines


@contextlib.contextmanager
def _serve(html_dir: Path, libs: Path) -> Iterator[Site]:
    """html_dir over HTTP on 127.0.0.1, on a port the system picks, from a thread."""
    index_html, libraries = _localized_index((html_dir / "index.html").read_text("utf-8"), libs)
    index_bytes = index_html.encode("utf-8")
    log: list[str] = []
    local_names = {name for name, _ in LOCAL_LIBS.values()}

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
            if path in ("/", "/index.html"):
                self._send(index_bytes, "text/html; charset=utf-8")
            elif path.startswith(LOCAL_PREFIX) and path[len(LOCAL_PREFIX) :] in local_names:
                name = path[len(LOCAL_PREFIX) :]
                kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
                self._send((libs / name).read_bytes(), kind)
            else:
                super().do_GET()

        def _send(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.append(format % args)

    handler = functools.partial(Handler, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    )
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield Site(f"http://{host}:{port}/index.html", libraries, log)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def served_site(demo_history) -> Iterator[Site]:
    assert demo_history.status == 0, demo_history.output[-3000:]
    with _serve(demo_history.project.html_dir, _asv_libs()) as site:
        yield site


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Debian chromium through Debian's chromedriver; selenium-manager stays offline."""
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_log = tmp_path_factory.mktemp("chromedriver") / "chromedriver.log"
    service = Service(executable_path=str(CHROMEDRIVER), log_output=str(driver_log))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "1")  # both paths are given: nothing to look up or download
        try:
            driver = webdriver.Chrome(service=service, options=options)
        except WebDriverException as error:
            versions = [
                subprocess.run([path, "--version"], capture_output=True, text=True).stdout
                for path in (CHROMIUM, CHROMEDRIVER)
            ]
            log = driver_log.read_text(errors="replace")[-2000:] if driver_log.exists() else ""
            pytest.fail(
                f"chromium did not start through chromedriver ({error.msg}); versions: "
                f"{[v.strip() for v in versions]}; chromedriver log tail:\n{log}\n{SETUP_HINT}",
                pytrace=False,
            )
    try:
        driver.set_page_load_timeout(TIMEOUT_S)
        driver.set_script_timeout(TIMEOUT_S)
        yield driver
    finally:
        driver.quit()


def _open(request: pytest.FixtureRequest) -> tuple[Any, Site, Any]:
    """The demo history, its served site and the browser.

    Fixtures taken here, not as test arguments, so that a missing browser or
    library fails the test (not its setup) and before the demo's three minutes.
    """
    _require_browser()
    _asv_libs()
    return (
        request.getfixturevalue("demo_history"),
        request.getfixturevalue("served_site"),
        request.getfixturevalue("browser"),
    )


# --- reading the page -------------------------------------------------------------------------


def _screenshot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    assert driver.save_screenshot(str(path)), f"could not write the screenshot {path}"
    return path


def _console(driver: Any) -> str:
    entries = driver.get_log("browser")
    return "\n".join(f"  {e['level']}: {e['message']}" for e in entries) or "  (empty)"


def _context(driver: Any, site: Site, shot: Path) -> str:
    """What a failure message carries: the screenshot, the page, console and server logs."""
    return (
        f"\nscreenshot: {shot}\npage: {driver.current_url}\nbrowser console:\n{_console(driver)}"
        f"\nserver requests (last 15):\n  " + "\n  ".join(site.log[-15:])
    )


# Fails at once (rather than timing out) where asv gave up: its error.html after a library
# failed to load, or its "No data" modal.
_PAGE_PROBLEM_JS = """
if (window.location.pathname.endsWith('error.html')) {
    return 'asv redirected to error.html: a library did not load';
}
var $ = window.jQuery;
if ($ && $('#error').is(':visible')) {
    return 'asv shows an error: ' + $('#error').text().replace(/\\s+/g, ' ').trim();
}
return null;
"""

# flot's plot of the graph page, once drawn and no request is pending: per series its
# label, the points asv gave it (x = revision), the commit of each x from the page's own
# index, and what the canvas holds at each point. flot draws a point as a white disc in a
# ring of the series' colour, over the line: an opaque white centre pixel with coloured
# pixels around it (where only a line passes, the centre is the line's colour).
_GRAPH_JS = """
var $ = window.jQuery;
if (!$ || !$.asv || !$.asv.main_json || $.active > 0) { return null; }
var placeholder = $('#main-graph');
var plot = placeholder.data('plot');
if (!plot || !placeholder.is(':visible') || plot.getData().length === 0) { return null; }
var canvas = plot.getCanvas();
var context = canvas.getContext('2d');
var ratio = canvas.width / $(canvas).width();
var offset = plot.getPlotOffset();
var hashes = $.asv.main_json.revision_to_hash;
function drawn(x, y) {
    var r = Math.round(4 * ratio), size = 2 * r + 1;
    var px = Math.round(x * ratio), py = Math.round(y * ratio);
    var pixels = context.getImageData(px - r, py - r, size, size).data;
    var ring = 0, centre = null;
    for (var i = 0; i < pixels.length; i += 4) {
        var opaque = pixels[i + 3] > 200;
        var white = pixels[i] > 240 && pixels[i + 1] > 240 && pixels[i + 2] > 240;
        if (i / 4 === r * size + r) { centre = opaque && white; }
        if (pixels[i + 3] > 0 && !white) { ring += 1; }
    }
    return {white_centre: centre, coloured: ring};
}
return {
    title: $('#title').text(),
    canvas: [canvas.width, canvas.height],
    series: $.map(plot.getData(), function (s) {
        var points = $.grep(s.data, function (p) { return p[0] !== null && p[1] !== null; });
        return [{
            label: s.label,
            points_shown: s.points.show,
            xs: $.map(points, function (p) { return p[0]; }),
            commits: $.map(points, function (p) { return hashes[p[0]] || null; }),
            pixels: $.map(points, function (p) {
                return drawn(offset.left + s.xaxis.p2c(p[0]), offset.top + s.yaxis.p2c(p[1]));
            })
        }];
    })
};
"""

# The regressions table (not the ignored one) once asv has built it.
_REGRESSIONS_JS = """
var $ = window.jQuery;
if (!$ || !$.asv || !$.asv.main_json || $.active > 0) { return null; }
if (!$('#regressions-display').is(':visible')) { return null; }
var table = $('#regressions-body .regression-div:visible table').not('.ignored');
if (table.length === 0) { return null; }
return {
    title: $('#title').text(),
    hash_length: $.asv.main_json.hash_length,
    headers: table.find('thead th').map(function () { return $(this).text(); }).get(),
    rows: table.find('tbody tr').map(function () {
        var cells = $(this).children('td');
        return [{
            benchmark: cells.eq(0).text(),
            href: cells.eq(0).find('a').attr('href') || '',
            commit: cells.eq(2).text(),
            factor: cells.eq(3).text()
        }];
    }).get()
};
"""


def _wait_for(driver: Any, site: Site, script: str, what: str, shot_name: str) -> dict[str, Any]:
    """Poll `script` until it returns a value; fail at once where asv gave up."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    def ready(d: Any) -> Any:
        problem = d.execute_script(_PAGE_PROBLEM_JS)
        if problem:
            raise AssertionError(problem)
        return d.execute_script(script)

    try:
        return WebDriverWait(driver, TIMEOUT_S, poll_frequency=0.25).until(ready)
    except (TimeoutException, AssertionError) as error:
        shot = _screenshot(driver, shot_name)
        reason = f"not within {TIMEOUT_S} s" if isinstance(error, TimeoutException) else error
        pytest.fail(f"{what}: {reason}{_context(driver, site, shot)}", pytrace=False)


def _load(driver: Any, url: str) -> None:
    """A fresh page load (not only a hash change on the page already there)."""
    driver.get("about:blank")
    driver.get(url)


# --- the tests --------------------------------------------------------------------------------


def test_graph_page_draws_a_point_per_commit(request: pytest.FixtureRequest) -> None:
    demo_history, site, driver = _open(request)
    benchmark = demo_history.benchmark
    _load(driver, f"{site.url}#{benchmark}?machine={demo_history.machine}")
    shot_name = f"site-graph-{benchmark}.png"
    graph = _wait_for(driver, site, _GRAPH_JS, f"the graph of {benchmark} drew", shot_name)
    shot = _screenshot(driver, shot_name)
    context = f"\nlibraries: {site.libraries}{_context(driver, site, shot)}\ngraph: {graph}"

    assert graph["title"] == benchmark, context
    assert graph["canvas"][0] > 0 and graph["canvas"][1] > 0, context
    # One series per case; asv labels it with the parameter value.
    labels = [s["label"] for s in graph["series"]]
    assert len(labels) == len(demo_history.cases), context
    for case in demo_history.cases:
        name = case.split("=")[0]
        assert any(name in (label or "") for label in labels), f"no series for {name}{context}"
    full = [s for s in graph["series"] if len(s["xs"]) == EXPECTED_POINTS]
    assert full, f"no case has a point for each of the {EXPECTED_POINTS} commits{context}"
    for series in full:
        assert series["points_shown"], (
            f"flot does not show the points of {series['label']}{context}"
        )
        # The page's own revision index maps the points back to the demo's 12 commits.
        assert sorted(series["commits"]) == sorted(demo_history.hashes), context
        # Each point is on the canvas: a white centre in a coloured ring (about 50 coloured
        # pixels around it; a line alone gives 15-30 and a coloured centre).
        blank = [
            (commit[:8], drawn)
            for commit, drawn in zip(series["commits"], series["pixels"], strict=True)
            if not (drawn["white_centre"] and drawn["coloured"] >= 20)
        ]
        assert not blank, f"points of {series['label']} not drawn: {blank}{context}"


def test_regressions_page_lists_the_injected_commit(request: pytest.FixtureRequest) -> None:
    demo_history, site, driver = _open(request)
    _load(driver, f"{site.url}#regressions")
    shot_name = "site-regressions.png"
    page = _wait_for(driver, site, _REGRESSIONS_JS, "the regressions table built", shot_name)
    shot = _screenshot(driver, shot_name)
    context = f"{_context(driver, site, shot)}\nregressions page: {page}"

    assert page["title"] == "All regressions", context
    assert page["headers"][:3] == ["Benchmark", "Date", "Commit"], context
    hash_length = page["hash_length"]
    assert hash_length == 8, f"the site's hash_length is not asv's default{context}"
    short = [h[:hash_length] for h in demo_history.hashes]
    slow = demo_history.slow_index

    def covers_slow_commit(commit_text: str) -> bool:
        # asv shows "before..after" for a range of commits, the one commit otherwise.
        before, _, after = commit_text.strip().rpartition("..")
        if after not in short:
            return False
        if not before:
            return short.index(after) == slow
        return before in short and short.index(before) < slow <= short.index(after)

    ours = [r for r in page["rows"] if r["benchmark"].startswith(demo_history.benchmark)]
    assert ours, f"no row for {demo_history.benchmark}{context}"
    hits = [r for r in ours if covers_slow_commit(r["commit"])]
    assert hits, (
        f"no {demo_history.benchmark} row at the injected commit "
        f"{short[slow]} ({demo_history.subjects[slow]}){context}"
    )
    for row in hits:
        # The row links to the benchmark's graph with the commit highlighted.
        assert row["href"].startswith(f"#{demo_history.benchmark}?"), context
        assert short[slow] in urllib.parse.unquote(row["href"]), context
        assert float(row["factor"].rstrip("x")) > 1.0, context
