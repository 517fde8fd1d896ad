"""Running the official async SDKs (``mcp``, ``a2a``) from synchronous tools.

Tools run synchronously, on the ToolRunner's worker threads; the protocol SDKs are async.
:func:`event_loop` is the one event loop of a process, on a daemon thread started at first
use (and again in a forked child). :func:`submit` runs a coroutine on it and waits with the
call's remaining time, watching the call's cancel flag; on timeout or cancellation it
cancels the coroutine and raises ``ToolError`` ``timeout`` / ``conversation_cancelled``.

:func:`child_answers` runs a module as a short-lived child process, a JSON request on its
stdin and a JSON answer on its stdout (:func:`child_main` is the child's side,
:func:`gather_by_name` asks every server or agent at once): how a project's start lists
remote tools (MCP tool lists, A2A agent cards) without a thread or a loop in the Project
actor, which forks its children.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypedDict, TypeVar

from runtime.errors import ToolError
from runtime.guard.paths.safe_read import read_pipe

__all__ = [
    "MAX_ANSWER_BYTES",
    "ChildError",
    "Failed",
    "child_answers",
    "child_main",
    "event_loop",
    "gather_by_name",
    "root_cause",
    "short_error",
    "submit",
]

T = TypeVar("T")


class ChildError(TypedDict):
    """Why a server or agent has no answer."""

    code: str
    """``tool_error`` or a denial's code."""
    message: str
    """What went wrong."""


class Failed(TypedDict):
    """The answer for a server or agent that failed or ran late."""

    error: ChildError
    """Why."""


_POLL_S = 0.05
_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_PID = 0
_LOOP_LOCK = threading.Lock()


def event_loop() -> asyncio.AbstractEventLoop:
    """The SDK event loop of this process, on a daemon thread started at first use."""
    global _LOOP, _LOOP_PID
    with _LOOP_LOCK:
        if _LOOP is None or os.getpid() != _LOOP_PID:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="roost-sdk", daemon=True).start()
            _LOOP, _LOOP_PID = loop, os.getpid()
        return _LOOP


def submit(
    coro: Coroutine[Any, Any, T],
    timeout_s: float,
    cancelled: threading.Event,
    what: str,
    *,
    settled: Callable[[], bool] | None = None,
    settle_s: float = 0.0,
) -> T:
    """Run ``coro`` on :func:`event_loop`; give up (and cancel it) on timeout or cancel.

    ``what`` names the other side in the error: ``the call to {what} was cancelled``,
    ``{what} did not answer within N ms``. Other exceptions of ``coro`` propagate.

    With ``settled``, giving up waits up to ``settle_s`` more until ``settled()`` holds (an
    A2A call waits to learn its remote task's id, so that the task can be cancelled);
    ``coro`` finishing in that time is its result.
    """
    future = asyncio.run_coroutine_threadsafe(coro, event_loop())
    deadline = time.monotonic() + timeout_s
    stop: str | None = None
    stop_by = deadline
    while True:
        try:
            return future.result(timeout=max(0.0, min(_POLL_S, stop_by - time.monotonic())))
        except concurrent.futures.TimeoutError:
            now = time.monotonic()
            if stop is None:
                if cancelled.is_set():
                    stop = "conversation_cancelled"
                elif now >= deadline:
                    stop = "timeout"
                else:
                    continue
                stop_by = now + (settle_s if settled is not None else 0.0)
            if now < stop_by and settled is not None and not settled():
                continue
            future.cancel()
            raise _STOPPED[stop](what, round(timeout_s * 1000)) from None


_STOPPED: dict[str, Callable[[str, int], ToolError]] = {
    "conversation_cancelled": lambda what, ms: ToolError(
        "conversation_cancelled", f"the call to {what} was cancelled"
    ),
    "timeout": lambda what, ms: ToolError(
        "timeout", f"{what} did not answer within {ms} ms", timeout_ms=ms
    ),
}
"""The error of a call given up, by why (``what`` names the other side, ``ms`` its time)."""


def root_cause(error: BaseException) -> BaseException:
    """The first real error inside ``error``'s exception groups (cancellations skipped).

    The SDKs' task groups wrap what failed ("unhandled errors in a TaskGroup (1
    sub-exception)"); what an operator needs is the error inside.
    """
    while isinstance(error, BaseExceptionGroup):
        leaves = [e for e in error.exceptions if not isinstance(e, asyncio.CancelledError)]
        error = (leaves or list(error.exceptions))[0]
    return error


def short_error(error: BaseException) -> str:
    """``Type: message`` of ``error`` (of the error inside a group), at most 300 characters."""
    error = root_cause(error)
    text = f"{type(error).__name__}: {error}"
    return text if len(text) <= 300 else text[:297] + "..."


MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""Most bytes of a listing child's answer read; past it every name is an error."""


def child_answers(
    module: str, request: Any, names: list[str], timeout_s: float, what: str
) -> Mapping[str, Any]:
    """Run ``python -m module`` with ``request`` as JSON on stdin; return its JSON answer.

    The answer maps each of ``names`` to its result; when the child fails (does not start,
    prints no JSON, runs past ``timeout_s``, says more than :data:`MAX_ANSWER_BYTES`) each
    name gets ``{error: {code: tool_error, message: "the {what} failed: ..."}}``. The answer is
    the child's JSON, unchecked: callers read it defensively. The child
    runs with ``-P`` from ``/``: the daemon's working directory may be a project root
    (`roost daemon start --foreground` run there), and ``python -m`` would import a planted
    ``runtime/`` package from it, outside every sandbox. What it prints is a tool process's
    word (it talked to servers), so it is read bounded
    (:func:`runtime.guard.paths.safe_read.read_pipe`).
    """
    try:
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", module],
            cwd="/",
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
            data, problem = read_pipe(proc.stdout.fileno(), MAX_ANSWER_BYTES, timeout_s)
        finally:
            proc.kill()  # does nothing once it has ended (Popen.send_signal polls first)
            proc.wait()
            proc.stdout.close()
        if problem is not None:
            raise ValueError(
                f"no complete answer ({'over 16 MiB' if problem == 'too_large' else 'timeout'})"
            )
        answer: Mapping[str, Any] = json.loads(data)
    except (OSError, ValueError) as e:
        error = {"code": "tool_error", "message": f"the {what} failed: {short_error(e)}"}
        return {name: {"error": error} for name in names}
    return answer


def child_main(handle: Callable[[Any], Coroutine[Any, Any, Any]]) -> None:
    """The child's side of :func:`child_answers`: read the request, run ``handle``, print."""
    request = json.loads(sys.stdin.read())
    sys.stdout.write(json.dumps(asyncio.run(handle(request))))


async def gather_by_name(
    entries: list[Mapping[str, Any]],
    one: Callable[[Mapping[str, Any]], Awaitable[T]],
    timeout_s: float,
    what: str,
) -> dict[str, T | Failed]:
    """``{name: one(entry)}`` for every entry, all at once, each within ``timeout_s``.

    An entry that raised or ran late gets ``{error: {code: tool_error, message}}`` (``no
    {what} within N s`` for a late one).
    """
    results = await asyncio.gather(
        *(asyncio.wait_for(one(entry), timeout_s) for entry in entries), return_exceptions=True
    )
    out: dict[str, T | Failed] = {}
    for entry, result in zip(entries, results, strict=True):
        if isinstance(result, BaseException):
            message = (
                f"no {what} within {timeout_s:g} s"
                if isinstance(result, TimeoutError)
                else short_error(result)
            )
            out[str(entry["name"])] = {"error": {"code": "tool_error", "message": message}}
        else:
            out[str(entry["name"])] = result
    return out
