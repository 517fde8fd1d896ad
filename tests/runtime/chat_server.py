"""A real loopback HTTP server that speaks the OpenAI chat-completions protocol, for tests.

It listens on ``127.0.0.1`` on a free port, records every request, and answers
``POST .../chat/completions`` from a script::

    from tests.runtime.chat_server import ChatServer, ErrorReply, StreamReply, ToolCallReply

    with ChatServer([
        ErrorReply(status=429),
        StreamReply(content=["Hel", "lo"], usage={"prompt_tokens": 3, "completion_tokens": 2}),
        StreamReply(tool_calls=[ToolCallReply(name="fs__read", arguments=['{"pa', 'th": "a"}'])]),
    ]) as server:
        options = {"llm_adapter": "openai", "llm_base_url": server.base_url, ...}
        ...
        server.wait_for_requests(2)
        assert server.requests[0].body["stream"] is True

Each request takes the next scripted reply; with the script used up, ``responder`` (a
function of the :class:`RecordedRequest`) answers, else a 500 ``script exhausted`` error so
a test that calls more often than it planned fails loudly. Replies:

- :class:`StreamReply`: an SSE stream like OpenAI's: a role chunk, one chunk per content
  piece, tool calls whose ``arguments`` fragments go out in separate chunks, a final chunk
  with ``finish_reason``, an optional usage chunk, ``data: [DONE]``; ``chunk_delay_s``
  spaces the chunks (to test a deadline mid-stream).
- :class:`JsonReply`: one non-streamed JSON completion.
- :class:`ErrorReply`: an HTTP error status with an OpenAI-style error body and headers.
- :class:`RawReply`: any status, headers and bytes (malformed streams).

Every reply has ``delay_s``: seconds to wait before answering (to test timeouts). Waits
end early when the server stops, so leaving the ``with`` block never hangs. Responses
carry ``Connection: close`` unless a :class:`StreamReply` asks to keep the connection
(``keep_alive``, as providers do); the server joins its handler threads on exit.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

__all__ = [
    "ChatServer",
    "ErrorReply",
    "JsonReply",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "ToolCallReply",
]


@dataclass(frozen=True)
class ToolCallReply:
    """A tool call in a reply; ``arguments`` as one string or a list of fragments."""

    name: str
    arguments: str | list[str] = "{}"
    id: str | None = None  # None → "call_<n>" by position


@dataclass(frozen=True)
class StreamReply:
    """A streamed completion (``text/event-stream``)."""

    content: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallReply] = field(default_factory=list)
    finish_reason: str | None = None  # None → "tool_calls" if there are calls, else "stop"
    usage: dict[str, int] | None = None  # sent in a final chunk with empty choices
    chunk_delay_s: float = 0.0
    done: bool = True  # send "data: [DONE]"
    delay_s: float = 0.0
    keep_alive: bool = False  # keep the connection open for the next request, as providers do
    after_done: list[str] = field(default_factory=list)  # raw lines sent after "[DONE]"
    stall_after_done_s: float = 0.0  # wait before the body's last chunk (after after_done)


@dataclass(frozen=True)
class JsonReply:
    """A complete, non-streamed completion (``application/json``)."""

    content: str | None = None
    tool_calls: list[ToolCallReply] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    delay_s: float = 0.0


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error with an OpenAI-style body ``{"error": {"message", "type"}}``."""

    status: int
    message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass(frozen=True)
class RawReply:
    """Any status, headers and body bytes, sent as they are."""

    body: bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/event-stream"})
    delay_s: float = 0.0


Reply = StreamReply | JsonReply | ErrorReply | RawReply
"""Anything the server can answer."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # decoded JSON, or the raw text when it is not JSON


class ChatServer:
    """The scripted chat-completions server; use it as a context manager."""

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        responder: Callable[[RecordedRequest], Reply] | None = None,
        model: str = "scripted-model",
    ) -> None:
        self.model = model
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self.connections = 0
        """Connections accepted so far."""
        self._script = list(script)
        self._cond = threading.Condition()
        self.stopping = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.chat = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="chat-server", daemon=True
        )

    @property
    def base_url(self) -> str:
        """The ``llm_base_url`` to use: ``http://127.0.0.1:PORT/v1``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._cond:
            self._script.extend(replies)

    def wait_for_requests(self, count: int, timeout_s: float = 10.0) -> list[RecordedRequest]:
        """Wait until ``count`` requests have arrived; return them (AssertionError on timeout)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requests) >= count, timeout_s):
                raise AssertionError(f"expected {count} requests, got {len(self.requests)}")
            return list(self.requests)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()  # joins the handler threads
        self._thread.join(timeout=10)

    def _record(self, request: RecordedRequest) -> None:
        """Record ``request`` and wake ``wait_for_requests``."""
        with self._cond:
            self.requests.append(request)
            self._cond.notify_all()

    def _take(self, request: RecordedRequest) -> Reply:
        """Record ``request`` and return the reply it gets."""
        with self._cond:
            self._record(request)
            if self._script:
                return self._script.pop(0)
        if self.responder is not None:
            return self.responder(request)
        return ErrorReply(status=500, message="script exhausted")


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins handler threads: nothing outlives the test
    block_on_close = True
    request_queue_size = 1024  # many clients connecting at once are queued, not dropped
    chat: ChatServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 30  # a client that connects and never sends cannot hold shutdown forever

    def setup(self) -> None:
        """Count the connection (one handler per connection)."""
        super().setup()
        with self.server.chat._cond:
            self.server.chat.connections += 1

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_POST(self) -> None:
        """Record the request and play the next scripted reply."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", errors="replace")
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw
        chat = self.server.chat
        request = RecordedRequest(
            method="POST",
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        if not self.path.rstrip("/").endswith("/chat/completions"):
            chat._record(request)
            self._send(404, {"Content-Type": "application/json"}, _error_body("no such path"))
            return
        reply = chat._take(request)
        if reply.delay_s and chat.stopping.wait(reply.delay_s):
            return
        # The client may have gone away (timeout, watchdog): then there is nothing to say.
        with contextlib.suppress(OSError):
            self._play(reply, body if isinstance(body, dict) else {})

    def _play(self, reply: Reply, body: dict[str, Any]) -> None:
        model = str(body.get("model") or self.server.chat.model)
        if isinstance(reply, ErrorReply):
            headers = {"Content-Type": "application/json", **reply.headers}
            self._send(reply.status, headers, _error_body(reply.message))
        elif isinstance(reply, RawReply):
            self._send(reply.status, reply.headers, reply.body)
        elif isinstance(reply, JsonReply):
            self._send(200, {"Content-Type": "application/json"}, _json_completion(reply, model))
        else:
            self._stream(reply, model)

    def _send(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True

    def _stream(self, reply: StreamReply, model: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        if not reply.keep_alive:
            self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = not reply.keep_alive
        for index, event in enumerate(_stream_events(reply, model)):
            if (
                index
                and reply.chunk_delay_s
                and self.server.chat.stopping.wait(reply.chunk_delay_s)
            ):
                return
            data = f"data: {event}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        for line in reply.after_done:
            data = f"{line}\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        if reply.stall_after_done_s and self.server.chat.stopping.wait(reply.stall_after_done_s):
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "scripted_error"}}).encode()


def _chunk(model: str, delta: dict[str, Any], finish_reason: str | None = None) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }
    )


def _fragments(call: ToolCallReply) -> list[str]:
    return [call.arguments] if isinstance(call.arguments, str) else list(call.arguments)


def _finish(reply: StreamReply | JsonReply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _stream_events(reply: StreamReply, model: str) -> list[str]:
    """The SSE data payloads of a streamed reply, in order."""
    events = [_chunk(model, {"role": "assistant", "content": ""})]
    events += [_chunk(model, {"content": piece}) for piece in reply.content]
    for index, call in enumerate(reply.tool_calls):
        for n, fragment in enumerate(_fragments(call)):
            entry: dict[str, Any] = {"index": index, "function": {"arguments": fragment}}
            if n == 0:
                entry["id"] = call.id or f"call_{index}"
                entry["type"] = "function"
                entry["function"]["name"] = call.name
            events.append(_chunk(model, {"tool_calls": [entry]}))
    events.append(_chunk(model, {}, _finish(reply)))
    if reply.usage is not None:
        events.append(json.dumps({"id": "chatcmpl-scripted", "choices": [], "usage": reply.usage}))
    if reply.done:
        events.append("[DONE]")
    return events


def _json_completion(reply: JsonReply, model: str) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id or f"call_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(_fragments(call))},
            }
            for index, call in enumerate(reply.tool_calls)
        ]
    completion: dict[str, Any] = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
    }
    if reply.usage is not None:
        completion["usage"] = reply.usage
    return json.dumps(completion).encode()
