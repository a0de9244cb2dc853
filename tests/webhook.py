"""A webhook on 127.0.0.1 for the `--notify` tests: Python's http.server in a thread."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Hook:
    """A webhook on 127.0.0.1: every POST body kept, answered with `codes` in turn (then 200)."""

    def __init__(self, codes: tuple[int, ...] = ()) -> None:
        self.bodies: list[dict] = []
        self.codes = list(codes)
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                hook.bodies.append(json.loads(self.rfile.read(length)))
                self.send_response(hook.codes.pop(0) if hook.codes else 200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
