"""Helpers shared by the sandbox and command-tool tests: process checks, a counting server."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import psutil


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` passes; return its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def survivors(marker: str) -> list[psutil.Process]:
    """Live (non-zombie) processes whose command line mentions ``marker``."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(marker in arg for arg in proc.info["cmdline"] or []):
            found.append(proc)
    return found


def no_survivors(marker: str) -> bool:
    """True once no live process mentions ``marker`` (waits up to 3 s for the kernel)."""
    return wait_until(lambda: not survivors(marker), 3.0)


def unique_sleep() -> str:
    """A ``sleep`` duration that doubles as a unique command-line marker."""
    return f"3000.{uuid.uuid4().int % 10**9:09d}"


class CountingServer:
    """A loopback HTTP server that counts the requests it gets."""

    def __init__(self) -> None:
        self.hits = 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.hits += 1
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]

    def fetch_code(self) -> str:
        """Python code that GETs this server (exits 1 when it cannot be reached)."""
        url = f"http://127.0.0.1:{self.port}/"
        return f"import urllib.request; urllib.request.urlopen({url!r}, timeout=5)"


@contextlib.contextmanager
def counting_server() -> Iterator[CountingServer]:
    """Run a :class:`CountingServer` for the ``with`` block."""
    server = CountingServer()
    thread = threading.Thread(target=server.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
        thread.join(5)
