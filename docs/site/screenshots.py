"""Screenshots of a published fwdasv site, as docs/site/*.png shows them.

    python docs/site/screenshots.py --config fwdasv-demo/asv.conf.json --out docs/site

after `scripts/demo.sh` (or `fwdasv publish`). It serves the project's html/ on
127.0.0.1, opens each page in headless Debian chromium through chromedriver and
selenium (the test extra; scripts/test.sh installs them), follows the links a reader
follows, and saves one PNG per page: findings.png (fwdasv's findings page),
regressions.png (asv's Regressions page), benchmark-list.png (asv's Benchmark list),
commit.png (a commit link of the Regressions page, or of the Benchmark list's "Changed
at" for a step over several commits, landing on fwdasv's commits page),
graph.png (a Regressions row's link: the series' graph at the step's commits) and
kernel-diff.png (the first finding's kernel diff, when one was explained). Each page
must finish loading with no error in the browser's console, or the script says which
did not and exits 1. The flags are tests/e2e/test_site_browser.py's.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
)
TIMEOUT_S = 60
# A page has finished once no request is pending and nothing says "Loading...".
SETTLED_JS = """
if (document.readyState !== 'complete') { return false; }
var $ = window.jQuery;
if (!$) { return true; }
if ($.active > 0 || ($.asv && !$.asv.main_json)) { return false; }
return $('.message:visible, p:visible').filter(function () {
    return $(this).text().trim() === 'Loading...';
}).length === 0;
"""


@contextlib.contextmanager
def serve(html_dir: Path) -> Iterator[str]:
    """html_dir over HTTP on 127.0.0.1; yields the site's base URL (ending in /)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(html_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory(prefix="fwdasv-chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            driver.set_page_load_timeout(TIMEOUT_S)
            yield driver
        finally:
            driver.quit()


class Shots:
    """Opens pages, waits for them, saves them; collects the console errors of each."""

    def __init__(self, driver: Any, out: Path) -> None:
        self.driver, self.out, self.errors = driver, out, {}

    def wait(self, ready_js: str = SETTLED_JS) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(self.driver, TIMEOUT_S, poll_frequency=0.25).until(
            lambda d: d.execute_script(ready_js)
        )

    def open(self, url: str) -> None:
        self.driver.get("about:blank")
        self.driver.get(url)
        self.wait()

    def save(self, name: str) -> Path:
        path = self.out / name
        self.driver.save_screenshot(str(path))
        severe = [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
        if severe:
            self.errors[name] = severe
        print(f"{path}: {self.driver.current_url}")
        return path

    def href(self, script: str) -> str | None:
        found = self.driver.execute_script(script)
        return str(found) if found else None


# The first link of a kind: a commit of the Regressions page, a Regressions row's graph.
FIRST_COMMIT_JS = (
    "return $('#regressions-body tbody td:nth-child(3) a').first().prop('href') || null;"
)
CHANGED_AT_JS = "return $('td.change-date a').first().prop('href') || null;"
FIRST_GRAPH_JS = "return $('#regressions-body tbody tr:first td:eq(0) a').prop('href') || null;"
REGRESSIONS_JS = "return $('#regressions-body tbody tr').length > 0 && $.active === 0;"


def take(html_dir: Path, out: Path) -> dict[str, list[str]]:
    """Every screenshot of the module; returns the pages' console errors (empty: none)."""
    out.mkdir(parents=True, exist_ok=True)
    with serve(html_dir) as site, chromium() as driver:
        shots = Shots(driver, out)
        shots.open(site + "fwdasv/findings.html")
        shots.save("findings.png")
        diff = shots.href("var a = document.querySelector('a[href^=\"explain/\"]');"
                          "return a ? a.href : null;")  # fmt: skip
        shots.open(site + "index.html#summarylist")
        shots.save("benchmark-list.png")
        changed_at = shots.href(CHANGED_AT_JS)
        shots.open(site + "index.html#regressions")
        shots.wait(REGRESSIONS_JS)
        shots.save("regressions.png")
        # A step of one commit links it on this page; a range only on the Benchmark list.
        commit = shots.href(FIRST_COMMIT_JS) or changed_at
        graph = shots.href(FIRST_GRAPH_JS)
        if commit:
            shots.open(commit)
            shots.save("commit.png")
        if graph:
            shots.open(graph)
            shots.save("graph.png")
        if diff:
            shots.open(diff)
            shots.save("kernel-diff.png")
        return shots.errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="asv.conf.json", help="the project's asv.conf.json")
    parser.add_argument("--out", default="docs/site", help="where the PNGs go")
    args = parser.parse_args(argv)
    config = Path(args.config)
    html = config.parent / json.loads(config.read_text()).get("html_dir", "html")
    if not (html / "fwdasv" / "findings.html").is_file():
        print(f"Error: {html} holds no fwdasv site; run `fwdasv publish --config {config}`")
        return 2
    errors = take(html, Path(args.out))
    for name, messages in errors.items():
        print(f"Error: {name}: console errors: {messages}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
