"""A progress bar for long commands (``roost verify``, ``roost soak``).

:class:`Progress` draws a ``rich`` progress bar on a terminal and nothing at all when its
stream is not one, so piped output stays clean.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO

import rich.console
import rich.progress

__all__ = ["Progress"]


class Progress:
    """A progress bar on a terminal (``rich``); silent when the stream is not a TTY.

    ``update(done, total=..., note=...)`` moves it (with no ``total`` the bar pulses and
    shows the count); ``ticking()`` shows it, with the elapsed time, while one long call
    runs; ``close()`` removes it. Use it as a context manager. Piped output stays clean:
    when the stream is not a terminal nothing at all is written.
    """

    def __init__(
        self,
        label: str,
        *,
        total: int | None = None,
        stream: IO[str] | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.label = label
        self.total = total
        self.stream: IO[str] = stream if stream is not None else sys.stderr
        self.enabled = _isatty(self.stream) if enabled is None else enabled
        self.done: int | None = None
        self.note = ""
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._bar: rich.progress.Progress | None = None
        self._task: rich.progress.TaskID | None = None
        self._refresh_per_second = 10.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self) -> str:
        """Return the progress as one line of text (what the bar shows, without the bar)."""
        parts = [f"{self.label}:"]
        if self.done is not None and self.total:
            parts.append(f"{self.done}/{self.total} ({100 * self.done / self.total:.0f}%)")
        elif self.done is not None:
            parts.append(str(self.done))
        if self.note:
            parts.append(self.note)
        parts.append(f"{time.monotonic() - self._started:.1f}s")
        return " ".join(parts)

    def _ensure_bar(self) -> None:
        if self._bar is not None or not self.enabled:
            return
        console = rich.console.Console(file=self.stream, force_terminal=True, highlight=False)
        self._bar = rich.progress.Progress(
            rich.progress.SpinnerColumn(),
            rich.progress.TextColumn("{task.description}"),
            rich.progress.BarColumn(),
            rich.progress.MofNCompleteColumn(),
            rich.progress.TimeElapsedColumn(),
            rich.progress.TextColumn("{task.fields[note]}"),
            console=console,
            refresh_per_second=self._refresh_per_second,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._task = self._bar.add_task(
            self.label, total=self.total, completed=self.done or 0, note=self.note
        )
        self._bar.start()

    def update(
        self, done: int | None = None, *, total: int | None = None, note: str | None = None
    ) -> None:
        """Record progress and move the bar (when enabled)."""
        with self._lock:
            if done is not None:
                self.done = done
            if total is not None:
                self.total = total
            if note is not None:
                self.note = note
            if not self.enabled:
                return
            self._ensure_bar()
            assert self._bar is not None and self._task is not None
            self._bar.update(self._task, completed=self.done or 0, total=self.total, note=self.note)

    def close(self) -> None:
        """Remove the bar (when enabled)."""
        with self._lock:
            bar, self._bar, self._task = self._bar, None, None
        if bar is not None:
            bar.stop()

    @contextlib.contextmanager
    def ticking(self, interval_s: float = 0.2) -> Iterator[Progress]:
        """Show the bar (refreshed every ``interval_s``, elapsed time) until the block ends."""
        if not self.enabled:
            yield self
            return
        self._refresh_per_second = 1 / interval_s
        self.update()
        try:
            yield self
        finally:
            self.close()


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
