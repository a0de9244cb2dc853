"""The published demo site in a real browser: Debian's chromium, headless, through selenium.

`demo_history` measures the demo model's 12 commits with real asv and runs
`fwdasv publish`; this module serves that html/ directory over HTTP on 127.0.0.1
and checks, from the rendered page (its DOM and flot's plot objects, never the
JSON files), that

- the graph page of `forward.TinyLM.track_relative` (the paced series) draws one point per
  measured commit (12) for a case, each point drawn on flot's canvas, and
- asv's regressions page lists fwdasv's finding of that benchmark at the
  injected slow commit ("Support attention logit soft-capping") with its
  status after the name, shown as asv shows hashes (`hash_length`
  characters), and the navigation bar links fwdasv's findings page.
- the summary grid draws a line in every tile: no empty tile for a series
  the host timer does not measure (graph vs eager).

Screenshots go to tests/artifacts/ (git-ignored) and their paths are in every
assertion message.

asv 0.6.6's index.html loads jQuery, flot, bootstrap, stupidtable and md5
from public CDNs, which this closed network (and CI here) cannot reach: as asv
publishes it, the page ends on asv's error.html. fwdasv's publish step
(`fwdasv.asv.offline_site.make_self_contained`) points the page at the copies fwdasv ships,
with their integrity hashes; the site is served here exactly as published, and
the test checks that every request the page made stayed on this server.

Missing chromium or chromedriver fails the test: scripts/test.sh installs
them, so their absence is a broken setup. FWDASV_SKIP_BROWSER=1 skips on
purpose.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import re
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import ARTIFACTS

pytestmark = pytest.mark.slow

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


# --- the site, served -----------------------------------------------------------------------


@dataclass
class Site:
    url: str  # ends with index.html
    log: list[str] = field(default_factory=list)  # the server's request lines


@contextlib.contextmanager
def _serve(html_dir: Path) -> Iterator[Site]:
    """html_dir as published, over HTTP on 127.0.0.1, on a port the system picks, from a thread."""
    log: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
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
        yield Site(f"http://{host}:{port}/index.html", log)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def served_site(demo_history) -> Iterator[Site]:
    assert demo_history.status == 0, demo_history.output[-3000:]
    index = (demo_history.project.html_dir / "index.html").read_text("utf-8")
    # Published by fwdasv: no library is fetched from the internet.
    remote = re.findall(r'<(?:script|link)\b[^>]*\b(?:src|href)="(https?://[^"]+)"', index)
    assert not remote, f"index.html still loads {remote} from the internet"
    with _serve(demo_history.project.html_dir) as site:
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
# flot draws the series in order, each one's line and then its points, so a later series'
# point or line segment that passes within a point's disc paints over its centre: such a
# point is `covered` (two cases whose values land a few pixels apart at one commit).
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
function at(s, p) {
    return p[0] === null || p[1] === null ? null
        : [offset.left + s.xaxis.p2c(p[0]), offset.top + s.yaxis.p2c(p[1])];
}
function nearSegment(q, a, b) {
    var dx = b[0] - a[0], dy = b[1] - a[1], length2 = dx * dx + dy * dy;
    var t = length2 === 0 ? 0
        : Math.max(0, Math.min(1, ((q[0] - a[0]) * dx + (q[1] - a[1]) * dy) / length2));
    return Math.hypot(q[0] - (a[0] + t * dx), q[1] - (a[1] + t * dy));
}
var all = plot.getData();
// Per series, its drawn positions in order (null where flot breaks the line).
var positions = $.map(all, function (s) {
    return [$.map(s.data, function (p) { var c = at(s, p); return [c]; })];
});
function covered(k, q) {
    var own = all[k].points, disc = own.radius + own.lineWidth / 2;
    for (var j = k + 1; j < all.length; j++) {
        var s = all[j], drawnAt = positions[j];
        var pointReach = disc + s.points.radius + s.points.lineWidth / 2 + 1;
        var lineReach = disc + s.lines.lineWidth / 2 + 1;
        for (var i = 0; i < drawnAt.length; i++) {
            var c = drawnAt[i];
            if (c === null) { continue; }
            if (s.points.show && Math.hypot(q[0] - c[0], q[1] - c[1]) < pointReach) {
                return true;
            }
            var next = drawnAt[i + 1];
            if (s.lines.show && next && nearSegment(q, c, next) < lineReach) { return true; }
        }
    }
    return false;
}
return {
    title: $('#title').text(),
    canvas: [canvas.width, canvas.height],
    series: $.map(all, function (s, k) {
        var points = $.grep(s.data, function (p) { return p[0] !== null && p[1] !== null; });
        return [{
            label: s.label,
            points_shown: s.points.show,
            xs: $.map(points, function (p) { return p[0]; }),
            commits: $.map(points, function (p) { return hashes[p[0]] || null; }),
            pixels: $.map(points, function (p) {
                var q = at(s, p), seen = drawn(q[0], q[1]);
                seen.covered = covered(k, q);
                return seen;
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
    context = f"{_context(driver, site, shot)}\ngraph: {graph}"

    assert graph["title"] == benchmark, context
    # Every script, style and JSON the page loaded came from this server.
    loaded = driver.execute_script(
        "return performance.getEntriesByType('resource').map(function (e) { return e.name; });"
    )
    origin = site.url.rsplit("/", 1)[0] + "/"
    assert loaded and all(url.startswith(origin) for url in loaded), (loaded, context)
    assert any("/_fwdasv_libs/jquery" in url for url in loaded), (loaded, context)
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
        # pixels around it; a line alone gives 15-30 and a coloured centre). A point that a
        # later series paints over keeps its ring but not always its white centre.
        blank = [
            (commit[:8], drawn)
            for commit, drawn in zip(series["commits"], series["pixels"], strict=True)
            if drawn["coloured"] < 20 or not (drawn["white_centre"] or drawn["covered"])
        ]
        assert not blank, f"points of {series['label']} not drawn: {blank}{context}"
    # The white-centre check still bites: most points are drawn clear of the other series.
    seen = [drawn for series in full for drawn in series["pixels"]]
    clear = [drawn for drawn in seen if not drawn["covered"]]
    assert len(clear) >= len(seen) // 2, f"{len(seen) - len(clear)} of {len(seen)} covered{context}"


# The graph page's first series redrawn alone, then with a second series whose flat line
# (drawn after it, at the same value, 4 pixels wide) passes through its middle point:
# flot's own plot on the page's placeholder, with the page's options.
_PAINT_OVER_JS = """
var $ = window.jQuery, placeholder = $('#main-graph'), old = placeholder.data('plot');
var first = $.grep(old.getData(), function (s) {
    return $.grep(s.data, function (p) { return p[1] !== null; }).length >= 3;
})[0];
var data = $.grep(first.data, function (p) { return p[0] !== null && p[1] !== null; });
var middle = data[Math.floor(data.length / 2)];
var before = data[Math.floor(data.length / 2) - 1], after = data[Math.floor(data.length / 2) + 1];
var reach = Math.min(middle[0] - before[0], after[0] - middle[0]) / 2;
var series = function (points, color, lines) {
    return {data: points, label: color, color: color, lines: $.extend({show: true}, lines),
            points: {show: true}};
};
// The first series with the page's line width; the line 4 pixels wide: a thinner one may
// pass half a pixel off the sampled centre pixel.
$.plot(placeholder, [
    series(data, 'rgb(0, 0, 255)', {}),
    series([[middle[0] - reach, middle[1]], [middle[0] + reach, middle[1]]], 'rgb(255, 0, 0)',
           {lineWidth: 4})
], old.getOptions());
return middle[0];
"""


def test_a_point_painted_over_by_a_later_series_is_told_apart(
    request: pytest.FixtureRequest,
) -> None:
    """The graph check's `covered`: a later series' line over a point takes its white
    centre, and the check names that point covered, and no other."""
    demo_history, site, driver = _open(request)
    _load(driver, f"{site.url}#{demo_history.benchmark}?machine={demo_history.machine}")
    shot_name = "site-graph-painted-over.png"
    _wait_for(driver, site, _GRAPH_JS, "the graph drew", shot_name)
    middle = driver.execute_script(_PAINT_OVER_JS)
    graph = _wait_for(driver, site, _GRAPH_JS, "the graph redrew", shot_name)
    context = f"{_context(driver, site, _screenshot(driver, shot_name))}\ngraph: {graph}"
    (first, line) = graph["series"]
    by_x = dict(zip(first["xs"], first["pixels"], strict=True))
    painted = by_x.pop(middle)
    assert painted["covered"] and not painted["white_centre"], context
    assert painted["coloured"] >= 20, context
    # Every other point of the first series is clear, and white in its centre.
    assert all(not p["covered"] and p["white_centre"] for p in by_x.values()), context
    # The later series is drawn last: nothing covers its points.
    assert not any(p["covered"] for p in line["pixels"]), context


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
        # fwdasv's finding, its status after the name (asv's page shows the entry's name):
        # a regression, or on a busy box a step too noisy to decide, suspected.
        assert row["benchmark"].endswith((" [regression]", " [suspected]")), context
        # The row links to the benchmark's graph with the commit highlighted.
        assert row["href"].startswith(f"#{demo_history.benchmark}?"), context
        assert short[slow] in urllib.parse.unquote(row["href"]), context
        assert float(row["factor"].rstrip("x")) > 1.0, context
    # The navigation bar links fwdasv's findings page, and the page is served.
    link = driver.execute_script("return $('#nav-li-fwdasv a').attr('href') || null;")
    assert link == "fwdasv/findings.html", context
    _load(driver, site.url.rsplit("/", 1)[0] + "/" + link)
    assert driver.title.startswith("fwdasv findings"), context
    assert demo_history.slow_commit[:8] in driver.page_source, context


_SUMMARY_JS = """
var tiles = $('#summarygrid-display .benchmark-plot');
if (!tiles.length) { return null; }
$(window).trigger('scroll');  // tiles load their graph when scrolled into view
var out = [], pending = false;
tiles.each(function() {
    var plot = $(this).data('plot');
    if (!plot) { pending = true; return; }
    var points = 0;
    $.each(plot.getData(), function(i, series) {
        points += series.data.filter(function(p) { return p[1] !== null; }).length;
    });
    out.push({id: this.id, points: points});
});
return pending ? null : out;
"""


def test_summary_grid_has_no_empty_tile(request: pytest.FixtureRequest) -> None:
    demo_history, site, driver = _open(request)
    _load(driver, site.url)
    shot_name = "site-summary.png"
    tiles = _wait_for(driver, site, _SUMMARY_JS, "every summary tile plotted", shot_name)
    context = f"{_context(driver, site, _screenshot(driver, shot_name))}\ntiles: {tiles}"
    names = sorted(t["id"].removeprefix("summarygrid-") for t in tiles)
    assert names == [
        "forward.TinyLM.track_latency",
        "forward.TinyLM.track_relative",  # paced, as `fwdasv init` writes a CPU suite
        "forward.TinyLM.track_spread_pct",
    ], context
    assert all(t["points"] == len(demo_history.hashes) for t in tiles), context


# Every link of the navigation bar, as the page shows it (asv's pages and fwdasv's).
_NAV_JS = """
var $ = window.jQuery;
if (!$ || !$.asv || !$.asv.main_json || $.active > 0) { return null; }
return $('.navbar-nav > li > a[href]').map(function () {
    return [{text: $(this).text().trim(), href: this.href}];
}).get();
"""

# A page has finished once no request is pending and nothing says "Loading..." (asv's
# Benchmark list stays there when its script throws).
_SETTLED_JS = """
if (document.readyState !== 'complete') { return null; }
var $ = window.jQuery;
if ($ && $.active > 0) { return null; }
if ($ && $.asv && !$.asv.main_json) { return null; }
var loading = $ ? $('.message:visible, p:visible').filter(function () {
    return $(this).text().trim() === 'Loading...';
}) : [];
if (loading.length > 0) { return null; }
return {title: document.title, url: window.location.href};
"""


def _console_errors(driver: Any) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_every_page_of_the_navigation_loads_without_a_console_error(
    request: pytest.FixtureRequest,
) -> None:
    demo_history, site, driver = _open(request)
    _load(driver, site.url)
    links = _wait_for(driver, site, _NAV_JS, "the navigation bar", "site-nav.png")
    names = [link["text"] for link in links]
    # asv's three pages and fwdasv's findings page, the Benchmark list among them.
    for wanted in ("Benchmark grid", "Benchmark list", "Regressions", "Findings (fwdasv)"):
        assert wanted in names, names
    graph = f"{site.url}#{demo_history.benchmark}?machine={demo_history.machine}"
    pages = [*(link["href"] for link in links), graph]
    _console_errors(driver)  # drained: each page's own errors below
    failures = {}
    for number, url in enumerate(pages):
        _load(driver, url)
        _wait_for(driver, site, _SETTLED_JS, f"{url} finished loading", f"site-page-{number}.png")
        errors = _console_errors(driver)
        if errors:
            shot = _screenshot(driver, f"site-page-{number}.png")
            failures[url] = (errors, str(shot))
    assert not failures, f"console errors: {failures}\nserver log: {site.log[-20:]}"


# --- every kind of link, on a site with a kernel diff ---------------------------------------


@pytest.fixture(scope="module")
def explained_site(demo_history, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The demo history's results in a project of their own, the injected commit's finding
    given a kernel diff (two recorded kernel summaries, diffed as `fwdasv explain --files`
    does: explain's profiling is not what this module tests), published and served."""
    from fwdasv.analysis.explain.explain import diff_files, explain_record
    from fwdasv.analysis.findings import findings
    from fwdasv.analysis.findings.verdicts import record_verdict
    from fwdasv.analysis.publish.publish import publish

    assert demo_history.status == 0, demo_history.output[-3000:]
    project = demo_history.new_project(tmp_path_factory.mktemp("explained") / "asv")
    slow = demo_history.slow_commit
    (finding, *_) = [
        f
        for f in findings.find(project)
        if f.key.benchmark == demo_history.benchmark and slow in {c.hash for c in f.commits}
    ]
    kernels = Path(__file__).resolve().parents[1] / "data" / "vllm-h200-explain"
    diff = diff_files(
        kernels / "prefill_2k.good.kernels.json", kernels / "prefill_2k.bad.kernels.json"
    )
    good, bad = finding.commit_range()
    profiles = project.config_path.parent / ".fwdasv-explain" / f"{good[:8]}-{bad[:8]}"
    record = explain_record(diff, good, bad, profiles, with_commits=True)
    record_verdict(project, finding, status=finding.status, explain=record)
    publish(project, echo=None)
    with _serve(project.html_dir) as site:
        yield site


# Where a page lands: the element the address's fragment targets (fwdasv's pages), its id
# and text; null until the page has finished.
_TARGET_JS = """
if (document.readyState !== 'complete') { return null; }
var target = document.querySelector(':target');
return {title: document.title, url: window.location.href,
        target: target ? target.id : null, text: target ? target.textContent : null};
"""


def test_each_kind_of_link_lands_on_a_page_without_a_console_error(
    request: pytest.FixtureRequest,
) -> None:
    """A commit link (asv's Regressions page, and the Benchmark list's "Changed at"), a graph
    link (a Regressions row), a finding link (a commit's row) and a kernel-diff link (the
    findings page) each land on a page that shows what was linked, with no console error;
    and an old `index.html#<hash>` link lands on the commit too, not on a blank page."""
    _require_browser()
    demo_history = request.getfixturevalue("demo_history")
    site = request.getfixturevalue("explained_site")
    driver = request.getfixturevalue("browser")
    base = site.url.rsplit("/", 1)[0] + "/"
    slow = demo_history.slow_commit
    _console_errors(driver)  # drained: the errors below are these pages' own
    failures: dict[str, list[str]] = {}

    def check(what: str) -> None:
        errors = _console_errors(driver)
        if errors:
            failures[what] = errors

    # asv's Regressions page: the rows, each with its commit and graph links.
    _load(driver, f"{site.url}#regressions")
    _wait_for(driver, site, _REGRESSIONS_JS, "the regressions table built", "links-regressions.png")
    links = driver.execute_script(
        "return $('#regressions-body tbody tr').map(function () { var td = $(this).children('td');"
        " return [{name: td.eq(0).text(), graph: td.eq(0).find('a').prop('href') || null,"
        " commit: td.eq(2).find('a').prop('href') || null}]; }).get();"
    )
    check("the Regressions page")
    row = next(r for r in links if r["name"].startswith(demo_history.benchmark))
    # The Benchmark list: the finding's series shows its change and a commit link.
    _load(driver, f"{site.url}#summarylist")
    _wait_for(driver, site, _SETTLED_JS, "the Benchmark list", "links-list.png")
    listed = driver.execute_script(
        "return $('#summarylist-body tbody tr, .summarylist tbody tr').map(function () {"
        " var td = $(this).children('td'); return [{name: td.eq(0).text(),"
        " change: $(this).find('td.change').text(), commit:"
        " $(this).find('td.change-date a').prop('href') || null}]; }).get();"
    )
    check("the Benchmark list")
    changed = [r for r in listed if r["name"].startswith(demo_history.benchmark) and r["commit"]]
    assert changed and all(r["change"].strip() for r in changed), listed

    commit_link = row["commit"] or changed[0]["commit"]
    assert commit_link.startswith(base + "fwdasv/findings.html#"), commit_link
    for what, url in (
        ("a commit link", commit_link),
        ("an old index.html#<hash> link", f"{site.url}#{slow[:8]}"),
    ):
        _load(driver, url)
        landed = _wait_for(driver, site, _TARGET_JS, what, "links-commit.png")
        assert landed["title"].startswith("fwdasv findings"), (what, landed)
        assert landed["target"] and slow.startswith(landed["target"]), (what, landed)
        check(what)
    # From the commit's row, the explained finding (the row links each finding at the commit,
    # in the findings' order: which case comes first depends on the measured steps).
    finding_links = driver.execute_script(
        f'var links = document.querySelectorAll(\'tr[id="{slow[:8]}"] a[href^="#finding-"]\');'
        " return Array.prototype.map.call(links, function (a) {"
        " var t = document.getElementById(a.getAttribute('href').slice(1));"
        " return [a.href, t ? t.textContent.indexOf('kernel diff') >= 0 : false]; });"
    )
    assert finding_links, "the injected commit's row links no finding"
    explained = [href for href, has_diff in finding_links if has_diff]
    assert explained, (
        f"no finding linked from the injected commit's row has its kernel diff: {finding_links}"
    )
    finding_link = explained[0]
    _load(driver, finding_link)
    landed = _wait_for(driver, site, _TARGET_JS, "a finding link", "links-finding.png")
    assert (landed["target"] or "").startswith("finding-") and "kernel diff" in landed["text"]
    check("a finding link")
    # The finding's kernel diff.
    diff_link = driver.execute_script(
        "var a = document.querySelector(':target a[href^=\"explain/\"]'); return a ? a.href : null;"
    )
    assert diff_link, "the finding's row links no kernel diff"
    _load(driver, diff_link)
    _wait_for(driver, site, _TARGET_JS, "a kernel-diff link", "links-diff.png")
    assert driver.title.startswith(demo_history.benchmark), driver.title
    assert "What got slower" in driver.page_source and ".fwdasv-explain/" in driver.page_source
    check("a kernel-diff link")
    # A graph link: the series drawn, the step's commits in the address.
    _load(driver, row["graph"])
    graph = _wait_for(driver, site, _GRAPH_JS, "a graph link", "links-graph.png")
    assert graph["title"] == demo_history.benchmark, graph
    check("a graph link")
    assert not failures, f"console errors: {failures}\nserver log: {site.log[-20:]}"
