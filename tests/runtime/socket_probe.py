"""A process that tries one of Roost's sockets, for tests: ``python socket_probe.py KIND PATH``.

Prints one JSON object on stdout:

- ``roost``: connect, send ``ping``, read one frame: ``{"outcome": "reply", "frame": {...}}``,
  ``{"outcome": "closed"}`` (hung up without a frame) or ``{"outcome": "unreachable",
  "error": "..."}`` (no socket reachable at ``PATH``);
- ``journal``: connect, send nothing, wait up to 20 s for the server to hang up:
  ``{"outcome": "closed"}``, ``{"outcome": "open"}`` or ``unreachable`` as above.

Standard library only: it also runs inside Roost's sandbox, copied into a project.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import sys


def connect(path: str) -> socket.socket:
    """Connect to ``path``, through ``/proc/self/fd`` when it is too long for ``sun_path``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(20)
    if len(os.fsencode(path)) <= 107:
        sock.connect(path)
        return sock
    directory, name = os.path.split(path)
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{name}")
    finally:
        os.close(fd)
    return sock


def read_exact(sock: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def probe_roost(sock: socket.socket) -> dict[str, object]:
    body = json.dumps({"id": 1, "op": "ping", "args": {}}).encode()
    with contextlib.suppress(OSError):  # hung up already: its error frame may still be there
        sock.sendall(struct.pack(">I", len(body)) + body)
    try:
        header = read_exact(sock, 4)
        frame = read_exact(sock, struct.unpack(">I", header)[0]) if header else None
    except ConnectionResetError:
        frame = None
    if frame is None:
        return {"outcome": "closed"}
    return {"outcome": "reply", "frame": json.loads(frame)}


def probe_journal(sock: socket.socket) -> dict[str, object]:
    try:
        data = sock.recv(1)
    except TimeoutError:
        return {"outcome": "open"}
    except ConnectionResetError:
        data = b""
    return {"outcome": "closed" if not data else "data"}


def main(kind: str, path: str) -> dict[str, object]:
    try:
        sock = connect(path)
    except OSError as e:
        return {"outcome": "unreachable", "error": f"{type(e).__name__}: {e}"}
    with sock:
        return probe_roost(sock) if kind == "roost" else probe_journal(sock)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])), flush=True)
