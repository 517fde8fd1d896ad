"""Red team of issue 17: what a tool brings into a daemon process stays bounded.

``http.fetch`` runs in the ToolRunner, a daemon process. The model chooses its URL, so the
server at the other end is the attacker's: it may ignore ``Accept-Encoding: identity`` and
answer with ``Content-Encoding: gzip, gzip``. An HTTP client that decodes such a body a
network chunk at a time (``httpx``'s ``iter_bytes``) inflates one 64 KiB chunk to a
gigabyte in one call, before any byte cap is looked at. The ToolRunner's peak memory must
not follow the decoded size, only the cap (``tool_max_output_bytes``).
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.integration.adversarial_helpers import Call, run_daemon
from tests.integration.conftest import make_root
from tests.integration.test_daemon_reads import _peaks

C = "c"
MiB = 1024 * 1024
INFLATED_MIB = 300


def _bomb() -> bytes:
    """``INFLATED_MIB`` of ``a`` gzipped twice: a few KiB on the wire (built a MiB at a time)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"a" * MiB
    inner = b"".join(packer.compress(block) for _ in range(INFLATED_MIB)) + packer.flush()
    return gzip.compress(inner, compresslevel=9)


class _Bomb(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Encoding", "gzip, gzip")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args


@pytest.fixture(scope="module")
def bomb_url() -> Iterator[str]:
    _Bomb.body = _bomb()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Bomb)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/bomb"
    finally:
        server.shutdown()
        server.server_close()


def test_a_compressed_answer_is_never_inflated_past_the_cap(tmp_path: Path, bomb_url: str) -> None:
    root = Path(make_root(tmp_path / "repo"))
    with run_daemon(tmp_path / "home") as daemon, daemon.client(timeout_s=120) as c:
        c.start_project(str(root), project_id="p", options={"network_allowlist": ["127.0.0.1"]})
        c.start_conversation("p", conversation_id=C)
        before = _peaks(daemon)
        fetched = Call("p", C, "http.fetch", {"url": bomb_url}).run(c)
        after = _peaks(daemon)
    assert fetched["status"] in ("ok", "error"), fetched
    if fetched["status"] == "ok":
        body = fetched["result"]["body"]
        assert len(body) <= 256 * 1024 + 64, len(body)
    grown = {pid: after[pid] - before.get(pid, 0) for pid in after}
    assert max(grown.values()) < 100 * MiB, {p: g // MiB for p, g in grown.items()}
