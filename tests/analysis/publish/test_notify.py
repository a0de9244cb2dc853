"""`--notify URL`: one document per night that brings a finding, against a real HTTP server.

The server is Python's http.server on 127.0.0.1 in a thread, answering each POST with
the next of its status codes. The nights are real: asv over a drawn history (seeded
samples, an existing environment: a second a commit), `fwdasv nightly` through its CLI.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from webhook import Hook

from fwdasv.analysis.publish import notify
from fwdasv.analysis.publish.notify import ATTEMPTS
from fwdasv.cli import main


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.close()


def _down_url() -> str:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def test_a_document_is_posted_as_json_once(hook: Hook) -> None:
    document = notify.night_document("p", "box", [], 0)
    assert notify.post(hook.url, document, echo=pytest.fail) is True
    assert hook.bodies == [document]
    assert set(document) == {"text", "blocks", "fwdasv"}  # Slack's keys, and the facts


def test_a_server_error_is_retried_and_logged() -> None:
    flaky = Hook(codes=(503,))
    said: list[str] = []
    try:
        assert notify.post(flaky.url, {"text": "x"}, echo=said.append, delays_s=(0.0,)) is True
    finally:
        flaky.close()
    assert len(flaky.bodies) == 2
    assert said == [
        f"notify {flaky.url}: attempt 1/3 failed (HTTP 503 Service Unavailable); retrying"
    ]


def test_a_server_that_is_down_is_logged_never_raised() -> None:
    said: list[str] = []
    url = _down_url()
    assert notify.post(url, {"text": "x"}, echo=said.append, delays_s=(0.0,)) is False
    assert len(said) == 3 and said[-1].endswith("; not sent"), said


def test_a_client_error_is_not_retried() -> None:
    refused = Hook(codes=(400,))
    said: list[str] = []
    try:
        assert notify.post(refused.url, {"text": "x"}, echo=said.append, delays_s=(0.0,)) is False
    finally:
        refused.close()
    assert len(refused.bodies) == 1 and said[0].endswith("; not sent")


def test_a_url_that_cannot_be_sent_to_is_logged_and_the_next_one_still_sent(hook: Hook) -> None:
    """urllib refuses "not a url" when the request is built: that escaped `post` as a
    traceback, the night's status 1, and the URLs after it were never sent."""
    document = notify.night_document("p", "box", [], 0)
    down = _down_url().replace("http://", "ftp://")
    for bad, why in (
        ("not a url", "not an http or https URL"),
        ("", "not an http or https URL"),
        ("http://", "no host"),
        (down, "not an http or https URL"),
    ):
        said: list[str] = []
        assert notify.post(bad, document, echo=said.append, delays_s=(0.0,)) is False
        assert said == [f"notify {bad}: {why}; not sent"], said
        assert notify.post(hook.url, document, echo=pytest.fail) is True
    assert hook.bodies == [document] * 4


def _read_request(connection: socket.socket) -> None:
    """One HTTP request off `connection`: its headers, then Content-Length bytes of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += connection.recv(65536)


def test_a_response_cut_short_is_retried_and_logged_never_raised() -> None:
    """A server that drops the connection mid-body: urllib raises http.client's
    IncompleteRead, no OSError; it escaped `post` as a traceback."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/hook"

        def cut_short() -> None:
            for _ in range(ATTEMPTS):
                connection, _ = server.accept()
                with connection:
                    _read_request(connection)  # all of it: unread bytes would reset the socket
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok")

        serving = threading.Thread(target=cut_short, daemon=True)
        serving.start()
        said: list[str] = []
        assert notify.post(url, {"text": "x"}, echo=said.append, delays_s=(0.0,)) is False
        serving.join(timeout=10)
    assert len(said) == ATTEMPTS and said[-1].endswith("; not sent"), said
    assert "IncompleteRead" in said[0] and said[0].endswith("; retrying"), said


@pytest.mark.slow
def test_one_document_a_night_with_a_new_finding_none_on_a_quiet_night(
    drawn_history, hook: Hook, tmp_path: Path
) -> None:
    # A +20% step at commit 6; the nights after commit 5 are taken back to be run here.
    scales = (1.0,) * 6 + (1.2,) * 4
    history = drawn_history("notify-nights", scales)
    project, hashes = history.project, history.hashes
    folder = project.results_dir / history.machine
    later = tmp_path / "later"
    later.mkdir()
    for commit in hashes[6:]:
        for path in folder.glob(f"{commit[:8]}-*.json"):
            shutil.move(path, later / path.name)
    machine_file = tmp_path / "machines.json"

    def night(index: int, *urls: str) -> tuple[int, str]:
        draws = {"seed": index, "scale": scales[index], "samples": 25, "noise": 0.01}
        (project.config_path.parent / "draws.json").write_text(json.dumps(draws))
        notified = [arg for url in urls for arg in ("--notify", url)]
        result = CliRunner().invoke(
            main,
            [
                "nightly",
                "--config",
                str(project.config_path),
                "--machine",
                history.machine,
                "--machine-file",
                str(machine_file),
                "--existing",
                sys.executable,
                "--commit",
                hashes[index],
                "--site-url",
                "https://perf.example.com/tinylm",
                *notified,
            ],
        )
        return result.exit_code, result.output

    # A quiet night: commit 5 measured again, nothing new: no message.
    status, output = night(5, hook.url)
    assert status == 0, output
    assert "[nightly] notify: nothing new tonight, no message" in output
    assert hook.bodies == []
    # The step's night, with a second webhook that is down: one document to the live one,
    # the down one retried and logged, and the night's status the gate's.
    down = _down_url()
    status, output = night(6, hook.url, down)
    assert len(hook.bodies) == 1, output
    (document,) = hook.bodies
    new = document["fwdasv"]["findings"]
    assert new and all(f["after_commit"] == hashes[6] for f in new), new
    assert {f["status"] for f in new} <= {"regression", "suspected"}
    assert new[0]["link"].startswith(
        "https://perf.example.com/tinylm/fwdasv/findings.html#finding-"
    )
    assert f"{len(new)} new finding(s)" in document["text"]
    assert document["blocks"][0]["type"] == "section"
    assert f"notify {down}: attempt 3/3 failed" in output and "NOT sent" in output
    # The same night again: the gate as before (a down webhook changed nothing), and
    # nothing new: no second document.
    again, output = night(6, hook.url)
    assert again == status != 2, output
    assert "[nightly] notify: nothing new tonight, no message" in output
    assert len(hook.bodies) == 1
