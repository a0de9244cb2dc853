"""The night's message: one JSON document POSTed to each `--notify URL` when something is new.

`news` picks the findings the night brought: a regression, suspected or confirmed one
whose (finding, status) was not in the results before the night's run (a step first
seen, or first confirmed); `dark_news` the suites that went dark during it (measured
nothing at their newest commit, `fwdasv.analysis.rules.dark`), each told once.
`night_document` is one document in the shape Slack's incoming webhooks take (`text`,
and `blocks` of mrkdwn sections) with the same facts for any other webhook under
`fwdasv` (each finding: series, change, range, status, culprit, and its row on the site:
`fwdasv/findings.html#finding-<id>` under `--site-url`; each suite gone dark). `post`
sends it with urllib only: ATTEMPTS tries, RETRY_DELAYS_S apart, on a refused
connection, a timeout, a response cut short or a 5xx/429; every failure is said through
`echo` and `post` never raises, whatever urllib raises for one URL: a message that
cannot be sent never changes the night's gate, nor stops the next URL's. `check_url`
refuses, before the night, an address `post` could never send to (`url_problem`).
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence

from fwdasv.analysis.findings.dark import DarkSuite
from fwdasv.analysis.findings.finding import Finding
from fwdasv.analysis.publish.pages import PAGES
from fwdasv.analysis.publish.publish import finding_id
from fwdasv.analysis.rules.status import Status
from fwdasv.core.errors import UserError, describe_error

NEWS_STATUSES = frozenset({Status.REGRESSION, Status.SUSPECTED, Status.CONFIRMED})
ATTEMPTS = 3
RETRY_DELAYS_S = (2.0, 10.0)  # before the 2nd and the 3rd attempt
TIMEOUT_S = 10.0
RETRIED_HTTP = frozenset({408, 429, 500, 502, 503, 504})
SHOWN = 10  # findings listed in the message's text (all of them under `fwdasv`)


def seen(found: Iterable[Finding]) -> frozenset[tuple[object, str]]:
    """What a night compares against: each finding's (ident, status) before its run."""
    return frozenset((f.ident, str(f.status)) for f in found)


def seen_dark(dark: Iterable[DarkSuite]) -> frozenset[tuple[object, ...]]:
    """The suites gone dark before a night's run, by `DarkSuite.ident`."""
    return frozenset(d.ident for d in dark)


def dark_news(before: frozenset[tuple[object, ...]], dark: Iterable[DarkSuite]) -> list[DarkSuite]:
    """The suites of `dark` that went dark during the night (none already dark before)."""
    return [d for d in dark if d.ident not in before]


def news(before: frozenset[tuple[object, str]], found: Iterable[Finding]) -> list[Finding]:
    """The findings of `found` the night brought (see the module)."""
    return [
        f for f in found if f.status in NEWS_STATUSES and (f.ident, str(f.status)) not in before
    ]


def row_link(finding: Finding, site_url: str | None) -> str | None:
    """The finding's row on the published site (None without a site URL)."""
    if not site_url:
        return None
    return f"{site_url.rstrip('/')}/{PAGES}/findings.html#finding-{finding_id(finding)}"


def _culprit(finding: Finding) -> str | None:
    culprit = finding.culprit()
    if not culprit or not culprit.get("commit"):
        return None
    subject = culprit.get("subject")
    return f"{str(culprit['commit'])[:8]}" + (f" {subject}" if subject else "")


def _finding_json(finding: Finding, site_url: str | None) -> dict[str, object]:
    return {
        "benchmark": finding.key.benchmark,
        "case": finding.key.case,
        "machine": finding.key.machine,
        "status": str(finding.status),
        "percent": finding.percent,
        "range": finding.range_label,
        "before_commit": finding.before_commit,
        "after_commit": finding.after_commit,
        "culprit": finding.culprit(),
        "link": row_link(finding, site_url),
    }


def _line(finding: Finding, site_url: str | None) -> str:
    name = (
        f"{finding.key.benchmark}({finding.key.case})"
        if finding.key.case
        else finding.key.benchmark
    )
    link = row_link(finding, site_url)
    shown = f"<{link}|{name}>" if link else f"`{name}`"
    culprit = _culprit(finding)
    return f"• {shown} {finding.percent:+.1f}% at `{finding.range_label}`: *{finding.status}*" + (
        f", culprit `{culprit}`" if culprit else ""
    )


def _dark_line(dark: DarkSuite) -> str:
    return (
        f"• `{dark.suite}` measured nothing at `{dark.commit[:8]}` (every case skipped or "
        f"failed; last measured at `{dark.last_measured[:8]}`): a step there would not show"
    )


def night_document(
    project: str,
    machine: str,
    new: Sequence[Finding],
    status: int,
    site_url: str | None = None,
    dark: Sequence[DarkSuite] = (),
) -> dict[str, object]:
    """One night's message (see the module); `status` is the night's exit status, `dark`
    the suites that went dark tonight."""
    headline = (
        f"fwdasv nightly, {project} on {machine}: {len(new)} new finding(s), exit status {status}"
    )
    if dark:
        headline += f", {len(dark)} suite(s) measured nothing"
    lines = [_line(f, site_url) for f in new[:SHOWN]]
    if len(new) > SHOWN:
        lines.append(f"… and {len(new) - SHOWN} more")
    lines.extend(_dark_line(d) for d in dark)
    if site_url:
        lines.append(f"<{site_url.rstrip('/')}/{PAGES}/findings.html|All findings>")
    return {
        "text": headline,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{headline}*"}},
            {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}},
        ],
        "fwdasv": {
            "project": project,
            "machine": machine,
            "status": status,
            "site": site_url,
            "findings": [_finding_json(f, site_url) for f in new],
            "unmeasured": [d.to_json() for d in dark],
        },
    }


def url_problem(url: str) -> str | None:
    """Why `post` could never send to `url`, or None: it takes an http or https URL with a
    host, and nothing http.client refuses in a request line (a space, a control
    character)."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # a port that is no number, or out of range, raises here
    except ValueError as error:
        return f"not a URL ({error})"
    if parts.scheme.lower() not in ("http", "https"):
        return "not an http or https URL"
    if not parts.hostname:
        return "no host"
    if any(c <= " " or c == "\x7f" for c in url):
        return "a space or control character in it"
    return None


def check_url(url: str, what: str, hint: str) -> None:
    """A UserError naming `what` (the option) and `url` when `url_problem` finds one;
    `hint` says what to give."""
    why = url_problem(url)
    if why:
        raise UserError(f"{what} {url!r}: {why}; {hint}")


def post(
    url: str,
    document: dict[str, object],
    *,
    echo: Callable[[str], None] = print,
    attempts: int = ATTEMPTS,
    delays_s: Sequence[float] = RETRY_DELAYS_S,
    timeout_s: float = TIMEOUT_S,
) -> bool:
    """POST `document` as JSON to `url`; True once a 2xx came back. Never raises: any error
    of this URL is said through `echo` and False returned (see the module)."""
    why = url_problem(url)
    if why:
        echo(f"notify {url}: {why}; not sent")
        return False
    body = json.dumps(document).encode()
    for attempt in range(1, attempts + 1):
        try:
            request = urllib.request.Request(
                url, data=body, method="POST", headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                response.read()
            return True
        except urllib.error.HTTPError as error:
            why, again = f"HTTP {error.code} {error.reason}", error.code in RETRIED_HTTP
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            why, again = f"{getattr(error, 'reason', error)}", True
        except http.client.HTTPException as error:  # a response cut short or garbled
            why, again = describe_error(error), True
        except Exception as error:  # anything else: a failed message never ends the night
            why, again = describe_error(error), False
        last = attempt == attempts or not again
        echo(
            f"notify {url}: attempt {attempt}/{attempts} failed ({why})"
            + ("; not sent" if last else "; retrying")
        )
        if last:
            return False
        time.sleep(delays_s[min(attempt - 1, len(delays_s) - 1)] if delays_s else 0.0)
    return False
