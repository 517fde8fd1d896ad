"""Actor mailboxes that survive a writer killed mid-send.

Thespian's queue transport gives every actor a ``multiprocessing.Queue``. A queue's
writers share one cross-process lock and write each message as a length header and a
payload. A writer SIGKILLed inside that write leaves either the lock held for ever (every
other writer to that mailbox blocks: the whole subtree wedges) or half a message in the
pipe (the reader blocks in the middle of a frame for ever). Both happen under ``roost
soak --scenario chaos``, and to an actor killed by the OOM killer.

:class:`MailboxQueue` writes without the lock, and never leaves half a frame:

- A frame of at most ``PIPE_BUF`` bytes (4096 on Linux) goes to the pipe in one
  ``write``. POSIX makes such a write atomic: it is never interleaved with another
  writer's, and a writer killed while it waits for room has written nothing.
- A larger message is first written to a file in the spill directory (owner-only), and
  only its name goes through the pipe, as a small frame. A writer killed before that
  leaves a file nobody reads, removed with the directory; the reader deletes each file
  it reads.

Messages are what the standard queue carries (pickles, read and written only by the
daemon's own processes); the reader tells a spilled one by a prefix no pickle starts with.
:func:`install` makes Thespian create every mailbox this way; it must run before the
actor system starts, in the process that forks the actors.
"""

from __future__ import annotations

import contextlib
import errno
import multiprocessing.queues
import os
import queue
import select
import struct
import tempfile
import threading
import weakref
from multiprocessing.reduction import ForkingPickler as _ForkingPickler
from multiprocessing.util import Finalize
from typing import Any

__all__ = ["MailboxQueue", "install"]

PIPE_BUF = select.PIPE_BUF
_SPILL = b"\x00roost-spill\x00"
_HEADER = struct.Struct("!i")  # multiprocessing.Connection's frame header
_SENTINEL = multiprocessing.queues._sentinel  # type: ignore[attr-defined]
_state: dict[str, Any] = {"dir": None}


class MailboxQueue(multiprocessing.queues.Queue):  # type: ignore[type-arg]
    """A ``multiprocessing.Queue`` whose sends are atomic and take no shared lock.

    It also sends without a thread switch: the standard queue hands every message to a
    feeder thread, which costs a thread wake-up (and the GIL going back and forth) per
    message. Here the sender writes the frame itself, non-blocking; only when the pipe
    is full (the reader is behind) do frames queue for a feeder thread, and until that
    backlog is written every later frame queues behind it, so the order is kept. Senders
    never block on a full mailbox, as with the standard queue (two relays blocked on each
    other's full mailbox would deadlock).
    """

    def __init__(self, maxsize: int = 0, *, ctx: Any) -> None:
        super().__init__(maxsize, ctx=ctx)
        # The write end's file description is shared by every process that inherits it;
        # all of them write through _write, which handles EAGAIN.
        os.set_blocking(self._writer.fileno(), False)  # type: ignore[attr-defined]

    def _reset(self, after_fork: bool = False) -> None:
        super()._reset(after_fork)  # type: ignore[misc]
        self._recv_bytes = self._recv_frame
        self._feeding = False

    def put(self, obj: Any, block: bool = True, timeout: float | None = None) -> None:
        """Send ``obj``: written at once when the pipe has room, else queued in order."""
        if self._closed:  # type: ignore[attr-defined]
            raise ValueError(f"Queue {self!r} is closed")
        if not self._sem.acquire(block, timeout):  # type: ignore[attr-defined]
            raise queue.Full
        payload: Any = _ForkingPickler.dumps(obj)
        with self._notempty:  # type: ignore[attr-defined]
            if not self._buffer and not self._feeding:  # type: ignore[attr-defined]
                frame = _frame(payload)
                try:
                    self._write(frame, wait=False)
                    return
                except BlockingIOError:
                    payload = _Framed(frame)
            if self._thread is None:
                self._start_thread()
            self._buffer.append(payload)  # type: ignore[attr-defined]
            self._notempty.notify()  # type: ignore[attr-defined]

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._feed_frames, name="MailboxFeeder", daemon=True)
        self._thread = thread
        thread.start()
        if not self._joincancelled:  # type: ignore[attr-defined]
            self._jointhread = Finalize(
                thread,
                multiprocessing.queues.Queue._finalize_join,  # type: ignore[attr-defined]
                [weakref.ref(thread)],
                exitpriority=-5,
            )
        self._close = Finalize(
            self,
            multiprocessing.queues.Queue._finalize_close,  # type: ignore[attr-defined]
            [self._buffer, self._notempty],  # type: ignore[attr-defined]
            exitpriority=10,
        )

    def _feed_frames(self) -> None:
        """Write the backlog in order, waiting for room; stop at the close sentinel."""
        notempty = self._notempty  # type: ignore[attr-defined]
        buffer = self._buffer  # type: ignore[attr-defined]
        while True:
            with notempty:
                while not buffer:
                    notempty.wait()
                item = buffer.popleft()
                if item is _SENTINEL:
                    self._reader.close()  # type: ignore[attr-defined]
                    self._writer.close()  # type: ignore[attr-defined]
                    return
                self._feeding = True
            try:
                # Spill files are made when the frame is written, not when it is queued:
                # a writer killed with a backlog leaves at most one file behind.
                frame = item.frame if isinstance(item, _Framed) else _frame(item)
                self._write(frame, wait=True)
            except OSError as e:
                if not (self._ignore_epipe and e.errno == errno.EPIPE):  # type: ignore[attr-defined]
                    self._sem.release()  # type: ignore[attr-defined]
                    self._on_queue_feeder_error(e, item)  # type: ignore[attr-defined]
            finally:
                with notempty:
                    self._feeding = False

    def _write(self, frame: bytes, *, wait: bool) -> None:
        """One atomic write of ``frame``; when the pipe is full, wait for room or raise."""
        fd = self._writer.fileno()  # type: ignore[attr-defined]
        while True:
            try:
                written = os.write(fd, frame)
            except BlockingIOError:
                if not wait:
                    raise
                select.select([], [fd], [])
                continue
            if written != len(frame):  # pragma: no cover - POSIX forbids it for <= PIPE_BUF
                raise OSError(f"short write to a mailbox: {written} of {len(frame)} bytes")
            return

    def _recv_frame(self) -> bytes:
        """Read one message; a spilled one is read from its file, which is then removed."""
        data: bytes = self._reader.recv_bytes()  # type: ignore[attr-defined]
        if not data.startswith(_SPILL):
            return data
        path = data[len(_SPILL) :].decode()
        try:
            with open(path, "rb") as handle:
                return handle.read()
        finally:
            os.unlink(path)


class _Framed:
    """A backlog entry already framed (its direct write found the pipe full)."""

    __slots__ = ("frame",)

    def __init__(self, frame: bytes) -> None:
        self.frame = frame


def _frame(payload: bytes | memoryview) -> bytes:
    """The frame for one pickled message, or for a reference to its spill file.

    A frame goes to the pipe whole when it fits one atomic write (``PIPE_BUF``).
    """
    frame = _HEADER.pack(len(payload)) + payload
    if len(frame) <= PIPE_BUF:
        return frame
    ref = _SPILL + _spill(payload).encode()
    if len(ref) + _HEADER.size > PIPE_BUF:
        raise OSError(f"spill path too long for an atomic write: {ref!r}")
    return _HEADER.pack(len(ref)) + ref


def _spill(payload: bytes | memoryview) -> str:
    directory = _state["dir"] or tempfile.gettempdir()
    fd, path = tempfile.mkstemp(prefix="m", dir=directory)
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    return path


def _mailbox_context(ctx: Any) -> Any:
    """A copy of multiprocessing context ``ctx`` whose ``Queue`` is a :class:`MailboxQueue`."""
    base = type(ctx)

    class MailboxContext(base):  # type: ignore[valid-type, misc]
        def Queue(self, maxsize: int = 0) -> MailboxQueue:
            return MailboxQueue(maxsize, ctx=self)

    return MailboxContext()


def install(directory: str) -> None:
    """Make Thespian's queue transport build every mailbox as a :class:`MailboxQueue`.

    ``directory`` holds spilled messages; it is created owner-only and emptied of files a
    killed writer left. Call before the actor system starts (idempotent).
    """
    from thespian.system import multiprocCommon  # noqa: PLC0415

    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    for name in os.listdir(directory):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, name))
    _state["dir"] = directory
    original = multiprocCommon.get_multiproc_context
    if getattr(original, "roost_mailbox", False):
        return

    def get_context(capabilities: Any) -> Any:
        ctx = original(capabilities)
        return None if ctx is None else _mailbox_context(ctx)

    get_context.roost_mailbox = True  # type: ignore[attr-defined]
    multiprocCommon.get_multiproc_context = get_context
