"""A slow model for ``slow-model``: a loopback OpenAI-compatible chat-completions server.

It answers every ``POST .../chat/completions`` after ``latency_ms``, as a real model
would, with the soak turn's two rounds: a call of ``fs.read`` on ``README.md`` when the
request's last message is not a tool result, else a short final answer. The answer is a
server-sent-events stream (what the OpenAI adapter asks for) or, when the request does not
ask to stream, one JSON completion.

One asyncio loop in a thread serves every connection (no thread per request), so a
thousand requests can wait at once; connections are kept alive unless the client closes
them. The server measures its own time per request, from the request read to the answer
written, and adds it to the turn named by a ``[soak:CORRELATION]`` tag in the request's
last user message (:func:`tag`): :meth:`ModelServer.model_ms` is then each turn's model
time, exactly, and a turn's latency minus it is the runtime's overhead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from types import TracebackType
from typing import Any, NotRequired, TypedDict

__all__ = ["ChatReply", "ModelServer", "answer_for", "tag", "tag_of"]

_TAG = re.compile(r"\[soak:([^\]\s]+)\]")
_MAX_BODY = 16 * 1024 * 1024
_READ_FILE = {"path": "README.md"}


class _Function(TypedDict):
    """The ``function`` of a tool call the slow model makes."""

    name: str
    arguments: str


class _ToolCall(TypedDict):
    """A tool call in the slow model's assistant message."""

    id: str
    type: str
    function: _Function


class ChatReply(TypedDict):
    """The slow model's answer: a tool call (``content`` None) or the final text."""

    role: str
    content: str | None
    tool_calls: NotRequired[list[_ToolCall]]


def tag(correlation_id: str) -> str:
    """The text that names a turn to the server inside a user message."""
    return f"[soak:{correlation_id}]"


def tag_of(body: Mapping[str, Any]) -> str | None:
    """The turn a request belongs to: the tag in its last user message (None: untagged)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            found = _TAG.search(str(message.get("content") or ""))
            return found.group(1) if found else None
    return None


def answer_for(body: Mapping[str, Any]) -> ChatReply:
    """The assistant message for a request: a ``fs.read`` call, or the final text.

    The final text comes once the last message is a tool result (the call was made).
    """
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    if last.get("role") == "tool":
        return {"role": "assistant", "content": "Read README.md."}
    call: _ToolCall = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "fs__read", "arguments": json.dumps(_READ_FILE)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _completion(body: Mapping[str, Any]) -> tuple[bytes, str]:
    """The response body and its content type."""
    message = answer_for(body)
    model = str(body.get("model") or "slow-model")
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if not body.get("stream"):
        completion = {
            "id": "chatcmpl-soak",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        return json.dumps(completion).encode(), "application/json"
    delta: dict[str, object] = {"role": "assistant", "content": message.get("content") or ""}
    if calls := message.get("tool_calls"):
        delta["tool_calls"] = [{"index": 0, **calls[0]}]

    def chunk(delta: Mapping[str, object], finish_reason: str | None) -> dict[str, object]:
        return {
            "id": "chatcmpl-soak",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    events = [
        json.dumps(chunk(delta, None)),
        json.dumps(chunk({}, finish)),
        json.dumps({"id": "chatcmpl-soak", "choices": [], "usage": usage}),
        "[DONE]",
    ]
    return "".join(f"data: {e}\n\n" for e in events).encode(), "text/event-stream"


class ModelServer:
    """The slow model on ``127.0.0.1``; a context manager (its loop runs in a thread)."""

    def __init__(self, latency_ms: int) -> None:
        self.latency_s = latency_ms / 1000
        self.requests = 0
        """Completions answered."""
        self.peak_waiting = 0
        """Most requests waiting for their answer at once."""
        self._waiting = 0
        self._model_ms: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-model", daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        """The project's ``llm_base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def waiting(self) -> int:
        """Requests waiting for their answer now."""
        with self._lock:
            return self._waiting

    def model_ms(self, correlation_id: str) -> float | None:
        """The server's own time for a turn's requests (None: none were tagged with it)."""
        with self._lock:
            return self._model_ms.get(correlation_id)

    def __enter__(self) -> ModelServer:
        self._thread.start()
        if not self._ready.wait(30) or self._server is None:
            raise RuntimeError("the slow-model server did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    # --- the loop -------------------------------------------------------------------------

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096)
            )
            self.port = int(self._server.sockets[0].getsockname()[1])
        finally:
            self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection is done."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path = [*lines[0].split(" "), "", ""][:2]
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)
        }
        length = int(headers.get("content-length") or 0)
        if length > _MAX_BODY:
            raise ValueError("request body too large")
        raw = await reader.readexactly(length) if length else b""
        keep = headers.get("connection", "").lower() != "close"
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            await _respond(writer, 404, b'{"error": {"message": "no such path"}}', keep=keep)
            return keep
        received = time.monotonic()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            await _respond(writer, 400, b'{"error": {"message": "not JSON"}}', keep=keep)
            return keep
        with self._lock:
            self._waiting += 1
            self.peak_waiting = max(self.peak_waiting, self._waiting)
        try:
            await asyncio.sleep(self.latency_s)
            payload, content_type = _completion(body)
            await _respond(writer, 200, payload, content_type=content_type, keep=keep)
        finally:
            turn = tag_of(body)
            with self._lock:
                self._waiting -= 1
                self.requests += 1
                if turn is not None:
                    self._model_ms[turn] += (time.monotonic() - received) * 1000
        return keep


async def _respond(
    writer: asyncio.StreamWriter,
    status: int,
    payload: bytes,
    *,
    content_type: str = "application/json",
    keep: bool,
) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: {'keep-alive' if keep else 'close'}\r\n\r\n"
    )
    writer.write(head.encode() + payload)
    await writer.drain()
