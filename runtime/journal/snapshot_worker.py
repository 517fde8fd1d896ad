"""The thread that writes a journal's due snapshots beside its link's commits.

A snapshot reads a conversation's last snapshot and the events after it, folds them and
stores the result (:meth:`runtime.journal.writer.JournalWriter.write_snapshots`). On the
link's thread that fold sat between one pass's answers and the next pass's commit, so every
host's next append waited for it. Here it runs on its own thread, taking the writer's lock
only to read and to store, so it fills the time the link spends waiting for appends and
for its disk.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from runtime.journal.writer import JournalWriter, SnapshotOutcome

__all__ = ["SnapshotWorker"]


class SnapshotWorker:
    """Writes the snapshots due whenever :meth:`wake` is called, until :meth:`close`."""

    def __init__(
        self,
        writer: JournalWriter,
        report: Callable[[list[SnapshotOutcome]], None],
        failed: Callable[[Exception], None],
    ) -> None:
        """``report(outcomes)`` after each call of the writer; ``failed(error)`` when one raised."""
        self.writer = writer
        self.report = report
        self.failed = failed
        self.passes = 0
        """Calls of the writer so far (tests read it)."""
        self._wanted = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="journal-snapshots", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def wake(self) -> None:
        """Snapshots may be due: write them (soon, on the worker's thread)."""
        self._wanted.set()

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop after the snapshot being written, if one is."""
        self._stop = True
        self._wanted.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            while not self._stop and self.writer.snapshots_due():
                try:
                    outcomes = self.writer.write_snapshots()
                except Exception as e:  # logged; the next wake tries again
                    self.failed(e)
                    break
                self.passes += 1
                self.report(outcomes)
            if self._stop:
                return
