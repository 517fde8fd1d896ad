"""The workloads: ``user.message`` turns fanned out over worker threads through the client.

Every turn is one ``send_event`` with ``wait=True`` whose ``data.llm`` directive makes the
deterministic model call exactly one tool (``fs.read`` of the seed ``README.md``), so a
turn is: inbound message → model round → policy → tool → model round → end of turn.

- ``steady`` (also ``chaos`` and ``baseline``'s Roost half): a closed loop of
  ``concurrency`` workers. A conversation has at most one turn in flight; conversations
  take turns round-robin, so every conversation advances at the same pace.
- ``burst``: every turn is submitted at once, one worker per turn (capped at
  :data:`BURST_WORKERS`), several turns per conversation in flight, to find where the
  daemon starts answering ``overloaded``.
- ``slow-model``: the ``steady`` loop with one worker per conversation, each starting its
  conversation first (``start_conversations``: timed, as ``WorkloadResult.start_ms``),
  on a project whose model is the loopback server of ``soak.model_server``; each message
  names its turn to that server (``tag_turns``), which measures the model's time per turn.

Back-pressure (an ``overloaded`` answer, or a connection refused with ``EAGAIN`` because
the daemon's listen backlog is full) is retried with exponential backoff and jitter (same
idempotency key, so never doubled) until the turn's time limit, and counted. A turn that
takes longer than ``timeout_ms`` is aborted by a watchdog (its connection is shut) and
counts as failed. A worker keeps its connection from turn to turn, or, with
``connection_per_turn`` (``roost soak --connection-per-turn``), connects anew for each turn
as the CLI, scripts and ``roost mcp serve`` do. When no turn at all finishes for
``stall_s`` (default: twice the turn time limit, at least 30 s) the daemon is taken to be
wedged and no further turn is issued.
"""

from __future__ import annotations

import contextlib
import errno
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

import msgspec

from runtime.client import Client
from runtime.errors import RequestTimeoutError, RoostError
from soak.model_server import tag
from soak.turns import Turn, TurnAck, TurnResult, WorkloadResult, chains, turn_for

__all__ = [
    "BURST_WORKERS",
    "LLM_DIRECTIVE",
    "DirectedCall",
    "LlmDirective",
    "Workload",
    "abort_call",
]

BURST_WORKERS = 1024
"""Most worker threads (one connection each) a ``burst`` opens at once."""


class DirectedCall(TypedDict):
    """A tool call the deterministic model is told to make."""

    name: str
    args: dict[str, str]


class LlmDirective(TypedDict):
    """A ``user.message``'s ``llm``: what the deterministic model answers."""

    tool_calls: list[DirectedCall]


LLM_DIRECTIVE: LlmDirective = {
    "tool_calls": [{"name": "fs.read", "args": {"path": "README.md"}}],
}
"""The deterministic model's directive: one ``fs.read`` of the seed file per turn."""

_BACKOFF_START_S = 0.01
_BACKOFF_MAX_S = 2.0


class _Inflight:
    """A turn being sent: the client to abort if it takes too long."""

    def __init__(self, client: Client, deadline: float) -> None:
        self.client = client
        self.deadline = deadline
        self.aborted = False


class Workload:
    """Runs turns against the daemon of ``home`` and collects their results.

    ``keep_going()`` (optional) is asked when a conversation has sent its planned turns:
    while it returns true, the conversation sends one more (``chaos`` keeps the load up
    until enough processes were killed; ``--duration-s`` until the time is up).
    """

    def __init__(
        self,
        home: str,
        *,
        concurrency: int,
        timeout_ms: int,
        burst: bool = False,
        keep_going: Callable[[], bool] | None = None,
        on_turn: Callable[[TurnResult], None] | None = None,
        run_id: str = "run",
        stall_s: float | None = None,
        connection_per_turn: bool = False,
        start_conversations: bool = False,
        tag_turns: bool = False,
    ) -> None:
        self.home = home
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_ms / 1000
        self.burst = burst
        self.keep_going = keep_going
        self.on_turn = on_turn
        self.run_id = run_id
        self.connection_per_turn = connection_per_turn
        self.start_conversations = start_conversations
        self.tag_turns = tag_turns
        self._start_ms: list[float] = []
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._results: list[TurnResult] = []
        self._inflight: dict[int, _Inflight] = {}
        self._max_inflight = 0
        self._overloaded = 0
        self._refused = 0
        self._onset: int | None = None
        self._stop = threading.Event()
        self.stall_s = stall_s if stall_s is not None else max(30.0, 2 * self.timeout_s)
        self._progress_at = time.monotonic()
        self.stalled = False
        """True when no turn finished for ``stall_s`` and the workload stopped early."""

    # --- running ------------------------------------------------------------------------

    def run(self, turns: Sequence[Turn]) -> WorkloadResult:
        """Send ``turns`` (see the module docstring for the two shapes); block until done."""
        if self.burst:
            queue: deque[Any] = deque(turns)
            workers = min(len(turns), BURST_WORKERS) or 1
        else:
            queue = deque(chains(turns))
            workers = min(self.concurrency, len(queue)) or 1
        watchdog = threading.Thread(target=self._watch, name="soak-watchdog", daemon=True)
        started = self._started = self._progress_at = time.monotonic()
        watchdog.start()
        threads = [
            threading.Thread(target=self._worker, args=(queue,), name=f"soak-w{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        self._stop.set()
        watchdog.join()
        return WorkloadResult(
            results=list(self._results),
            elapsed_s=elapsed,
            stalled=self.stalled,
            overloaded=self._overloaded,
            refused=self._refused,
            onset_inflight=self._onset,
            max_inflight=self._max_inflight,
            start_ms=list(self._start_ms),
        )

    def _worker(self, queue: deque[Any]) -> None:
        client: Client | None = None
        try:
            while True:
                with self._lock:
                    if time.monotonic() - self._progress_at > self.stall_s:
                        self.stalled = True
                    if not queue or self.stalled:
                        return
                    item = queue.popleft()
                if isinstance(item, Turn):  # burst: turns, no chains
                    client = self._send(client, item)
                    continue
                chain: deque[Turn] = item
                turn = chain.popleft()
                if self.start_conversations and turn.index == 0:
                    client = self._start(client, turn)
                    if client is None:  # it did not start: its turns fail with its error
                        continue
                client = self._send(client, turn)
                if not chain and self.keep_going is not None and self.keep_going():
                    chain.append(
                        turn_for(turn.project_id, turn.conversation_id, turn.index + 1, self.run_id)
                    )
                if chain:
                    with self._lock:
                        queue.append(chain)
        finally:
            if client is not None:
                client.close()

    def _start(self, client: Client | None, turn: Turn) -> Client | None:
        """Start ``turn``'s conversation (retried on back-pressure); None when it failed.

        A conversation that did not start records its first turn as failed with the error.
        """
        started = time.monotonic()
        deadline = started + self.timeout_s
        delay = _BACKOFF_START_S
        while True:
            try:
                if client is None:
                    client = Client.connect(self.home)
                client.start_conversation(turn.project_id, turn.conversation_id)
            except RoostError as e:
                refused = client is None and _backlog_full(e)
                if client is not None:
                    client.close()
                client = None
                if (refused or e.code == "overloaded") and time.monotonic() + delay < deadline:
                    self._note_pressure(refused=refused)
                    time.sleep(delay * (0.5 + random.random()))
                    delay = min(delay * 2, _BACKOFF_MAX_S)
                    continue
                self._record(
                    TurnResult(
                        turn=turn,
                        ok=False,
                        latency_ms=0.0,
                        error_code=e.code,
                        error_message=f"start_conversation: {e}",
                    )
                )
                return None
            with self._lock:
                self._start_ms.append((time.monotonic() - started) * 1000)
            return client

    def _send(self, client: Client | None, turn: Turn) -> Client | None:
        started = time.monotonic()
        deadline = started + self.timeout_s
        overloaded = refusals = 0
        delay = _BACKOFF_START_S
        content = f"read README.md (turn {turn.index})"
        if self.tag_turns:
            content += f" {tag(turn.correlation_id)}"
        event: dict[str, object] = {
            "type": "user.message",
            "data": {"content": content, "llm": LLM_DIRECTIVE},
            "correlation_id": turn.correlation_id,
        }
        while True:
            try:
                if client is None:
                    client = Client.connect(self.home)
                ack = self._call(client, turn, event, deadline)
            except RoostError as e:
                # Back-pressure: the daemon answered ``overloaded``, or its listen backlog
                # was full when we connected (EAGAIN). Both are retried after a backoff.
                refused = client is None and _backlog_full(e)
                if (refused or e.code == "overloaded") and time.monotonic() + delay < deadline:
                    if refused:
                        refusals += 1
                    else:
                        overloaded += 1
                    self._note_pressure(refused=refused)
                    if client is not None:
                        client.close()  # the daemon may have refused the connection itself
                    client = None
                    time.sleep(delay * (0.5 + random.random()))
                    delay = min(delay * 2, _BACKOFF_MAX_S)
                    continue
                if client is not None:
                    client.close()
                self._record(
                    TurnResult(
                        turn=turn,
                        ok=False,
                        latency_ms=(time.monotonic() - started) * 1000,
                        error_code=e.code,
                        error_message=str(e),
                        overloaded=overloaded,
                        refused=refusals,
                    )
                )
                return None
            self._record(
                TurnResult(
                    turn=turn,
                    ok=True,
                    latency_ms=(time.monotonic() - started) * 1000,
                    ack=_ack(ack),
                    overloaded=overloaded,
                    refused=refusals,
                )
            )
            if self.connection_per_turn:
                client.close()
                return None
            return client

    def _call(
        self, client: Client, turn: Turn, event: dict[str, object], deadline: float
    ) -> Mapping[str, object]:
        ident = threading.get_ident()
        entry = _Inflight(client, deadline)
        with self._lock:
            self._inflight[ident] = entry
            self._max_inflight = max(self._max_inflight, len(self._inflight))
        try:
            return client.send_event(
                turn.project_id,
                turn.conversation_id,
                event,
                wait=True,
                wait_timeout_s=max(0.001, deadline - time.monotonic()),
                idempotency_key=turn.key,
            )
        except RoostError as e:
            if entry.aborted:
                raise RequestTimeoutError(
                    f"the turn took longer than {self.timeout_s:g} s (--timeout-ms) and was "
                    "abandoned",
                    timeout_s=self.timeout_s,
                ) from e
            raise
        finally:
            with self._lock:
                self._inflight.pop(ident, None)

    def _note_pressure(self, *, refused: bool) -> None:
        with self._lock:
            if refused:
                self._refused += 1
            else:
                self._overloaded += 1
            if self._onset is None:
                self._onset = len(self._inflight) + 1

    def _record(self, result: TurnResult) -> None:
        result = msgspec.structs.replace(result, finished_s=time.monotonic() - self._started)
        with self._lock:
            self._results.append(result)
            if result.ok:
                self._progress_at = time.monotonic()
        if self.on_turn is not None:
            self.on_turn(result)

    # --- watchdog -----------------------------------------------------------------------

    def _watch(self) -> None:
        """Abort turns past their deadline: shut their connection (the call then fails)."""
        while not self._stop.wait(0.05):
            now = time.monotonic()
            with self._lock:
                # Again on every tick: the client may have reconnected to retry.
                late = [e for e in self._inflight.values() if e.deadline < now]
                for entry in late:
                    entry.aborted = True
            for entry in late:
                abort_call(entry.client)


def _ack(answer: Mapping[str, object]) -> TurnAck:
    """The ack's three fields, in the order the daemon sends them."""
    return {
        "seq": answer.get("seq"),
        "event_id": answer.get("event_id"),
        "correlation_id": answer.get("correlation_id"),
    }


def _backlog_full(error: RoostError) -> bool:
    """True when connecting failed because the listen backlog was full (EAGAIN)."""
    cause = error.__cause__
    return error.code == "daemon_unreachable" and (
        isinstance(cause, BlockingIOError)
        or (isinstance(cause, OSError) and cause.errno == errno.EAGAIN)
    )


def abort_call(client: Client) -> None:
    """Interrupt ``client``'s call in flight from another thread.

    Uses ``Client.abort()`` when the client has one; otherwise shuts its socket down,
    which makes the blocked read fail at once.
    """
    abort = getattr(client, "abort", None)
    if callable(abort):
        abort()
        return
    sock = getattr(client, "_sock", None)
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
