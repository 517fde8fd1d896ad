"""Process-boundary counters shared by the daemon's whole process tree.

The soak report's ``messages_per_turn`` and ``appends_per_commit`` (``docs/performance.md``)
need counts from every process of the tree: actor messages are put into mailboxes by
whichever process sends them, journal-link frames by the conversations and the Journal,
commits by the Journal's writer. The daemon calls :func:`enable` before the actor system
starts; every actor process is forked from it and inherits one small shared block.

- **One row per process, summed on read.** A process claims a row of its own at its first
  :func:`count` and only ever adds to that row, so no update is lost between processes and
  nothing is locked across them. A row is claimed with a POSIX record lock on its bytes
  (``lockf``), which the kernel releases when the process dies: a dead process's row is
  taken over by a later one, which keeps adding to it, so the sums never go back.
- **Cheap.** :func:`count` is a dict lookup and an add under a per-process lock (threads of
  one process share its row); with counters not enabled it does nothing.
- **Not exact at the edges**: past :data:`ROWS` live processes the extra ones share the
  last row, where concurrent adds can be lost; so can a process's that closed the block's
  descriptor (which drops its record lock, so a later process may claim the same row).

:func:`snapshot` is what ``roost daemon status`` shows as ``counters``. The kinds are
:data:`KINDS`; ``host_link`` is for a daemon → host data link (its sender calls
``count("host_link", n)`` with the frames it writes).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import threading
from typing import Literal

__all__ = ["KINDS", "ROWS", "Kind", "count", "enable", "enabled", "snapshot"]

Kind = Literal["actor_message", "journal_link", "host_link", "journal_append", "journal_commit"]
"""What is counted."""

KINDS: tuple[Kind, ...] = (
    "actor_message",
    "journal_link",
    "host_link",
    "journal_append",
    "journal_commit",
)
"""Every kind, in column order: ``actor_message`` (a Thespian message put into a mailbox; a
relay is one more), ``journal_link`` (a journal-link frame, either way), ``host_link`` (a
daemon → host data-link frame), ``journal_append`` (a batch appended by the journal's
writer), ``journal_commit`` (a transaction the writer committed)."""

ROWS = 4096
"""Processes that can count at once without sharing a row."""
_COLUMNS = 8  # room for kinds to come without changing the row size
_ROW_BYTES = _COLUMNS * 8
_COLUMN = {kind: i for i, kind in enumerate(KINDS)}


class _Off:
    """The counters before :func:`enable` made the block (or where it cannot): none kept."""

    on = False

    def forked(self) -> None:
        """Nothing to do in a new child."""

    def add(self, kind: Kind, n: int) -> None:
        """Keep nothing."""

    def totals(self) -> dict[str, int]:
        """No counts."""
        return {}


class _Block:
    """The shared block (a memfd mapped shared) and this process's row in it."""

    on = True

    def __init__(self) -> None:
        self.fd = os.memfd_create("roost-counters", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, ROWS * _ROW_BYTES)
        self.map = mmap.mmap(self.fd, ROWS * _ROW_BYTES, mmap.MAP_SHARED)
        self.cells = memoryview(self.map).cast("q")
        self.lock = threading.Lock()
        self.base: int | None = None
        """First cell of this process's row (None: not claimed yet)."""

    def forked(self) -> None:
        """In a new child: no row yet (the parent's lock is the parent's), a fresh lock."""
        self.lock = threading.Lock()
        self.base = None

    def claim(self) -> int:
        """Lock a free row for this process (its own lock: released when it dies)."""
        start = os.getpid() % (ROWS - 1)
        for i in range(ROWS - 1):
            row = (start + i) % (ROWS - 1)
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, _ROW_BYTES, row * _ROW_BYTES)
            except OSError:
                continue
            return row * _COLUMNS
        return (ROWS - 1) * _COLUMNS  # every row taken: share the last one

    def add(self, kind: Kind, n: int) -> None:
        """Add ``n`` to ``kind`` in this process's row (claimed at its first count)."""
        with self.lock:
            if self.base is None:
                self.base = self.claim()
            self.cells[self.base + _COLUMN[kind]] += n

    def totals(self) -> dict[str, int]:
        """Every kind's total over every row."""
        cells = self.cells
        return {kind: sum(cells[column::_COLUMNS]) for kind, column in _COLUMN.items()}


class _Shared:
    block: _Block | _Off = _Off()
    """The block, once :func:`enable` made it (in this process or a parent)."""


_shared = _Shared()


def _after_fork() -> None:
    _shared.block.forked()


os.register_at_fork(after_in_child=_after_fork)


def enable() -> None:
    """Create the shared block in this process (idempotent); its forks inherit it.

    Call before the actor system forks its first process. Where ``memfd_create`` is not
    available the counters stay off (:func:`snapshot` returns ``{}``).
    """
    if not _shared.block.on:
        with contextlib.suppress(OSError, AttributeError):
            _shared.block = _Block()


def enabled() -> bool:
    """Whether counts are being kept in this process."""
    return _shared.block.on


def count(kind: Kind, n: int = 1) -> None:
    """Add ``n`` to ``kind`` (nothing when the counters are not enabled)."""
    _shared.block.add(kind, n)


def snapshot() -> dict[str, int]:
    """Every kind's total over every process that ever counted (``{}`` when not enabled)."""
    return _shared.block.totals()
