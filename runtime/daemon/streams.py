"""Serving one ``subscribe`` stream on a connection of the gateway.

The stream sends one event frame per envelope the backend yields, then an ``end`` frame
if the backend finished on its own. A watcher thread sets ``stop`` as soon as the client
closes the connection or sends anything (a client ends a stream by closing it), or the
gateway shuts the socket down; the backend's iterator returns soon after. The watcher
polls the descriptor (no timeout: a stream may wait for events as long as it likes); the
socket's own timeout bounds each frame's send, so a reader that stops reading is cut.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable, Iterator

from events.view_types import TimelineEvent
from runtime.errors import RoostError
from runtime.logging import get_logger
from runtime.wire.protocol import encode_end, encode_error, encode_stream_event, internal_error

__all__ = ["serve_stream"]

log = get_logger("roost.gateway")

_WATCH_POLL_MS = 1000
"""How often the watcher looks at ``stop`` while the client stays silent."""


def serve_stream(
    conn: socket.socket,
    request_id: int,
    open_events: Callable[[], Iterator[TimelineEvent]],
    stop: threading.Event,
) -> None:
    """Send the events of ``open_events()`` until they end, ``stop`` is set or the peer leaves.

    Errors raised by ``open_events`` or the iterator become an error frame. On return the
    connection is shut down in both directions and ``stop`` is set.
    """
    watcher = threading.Thread(
        target=_watch_peer, args=(conn, stop), name="roost-gateway-watch", daemon=True
    )
    watcher.start()
    try:
        for event in open_events():
            if stop.is_set():
                break
            conn.sendall(encode_stream_event(request_id, event))
        else:
            if not stop.is_set():
                conn.sendall(encode_end(request_id))
    except RoostError as e:
        with contextlib.suppress(OSError):
            conn.sendall(encode_error(request_id, e))
    except OSError:
        pass
    except Exception as e:
        log.exception("stream_crashed")
        with contextlib.suppress(OSError):
            conn.sendall(encode_error(request_id, internal_error("subscribe", e)))
    finally:
        stop.set()
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        watcher.join(1.0)


def _watch_peer(conn: socket.socket, stop: threading.Event) -> None:
    """Set ``stop`` when the streaming client closes, sends anything, or the socket shuts."""
    with contextlib.suppress(OSError, ValueError):
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN | select.POLLRDHUP)
        while not stop.is_set() and not poller.poll(_WATCH_POLL_MS):
            pass
    stop.set()
