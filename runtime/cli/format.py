"""Output for people: aligned tables, ``key: value`` blocks, event lines, a progress line.

Everything here returns strings (no printing) except :class:`Progress`, which draws a
carriage-return-updated line on a terminal and nothing at all when its stream is not one
(piped output stays clean). ``roost soak`` reuses :class:`Progress`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

import msgspec

__all__ = [
    "Progress",
    "cell",
    "dumps_json",
    "event_line",
    "kv_block",
    "render",
    "table",
]

_MAX_CELL = 60


def dumps_json(value: Any, *, pretty: bool = True) -> str:
    """Encode ``value`` as JSON text (indented unless ``pretty=False``)."""
    raw = msgspec.json.encode(value)
    if pretty:
        raw = msgspec.json.format(raw, indent=2)
    return raw.decode()


def cell(value: Any, max_width: int | None = _MAX_CELL) -> str:
    """Render one value for a table cell or a ``key: value`` line, on one line.

    ``None`` is ``-``; booleans are ``yes``/``no``; containers are compact JSON; text
    longer than ``max_width`` is cut with ``…``.
    """
    if value is None:
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, int | float):
        text = str(value)
    else:
        text = dumps_json(value, pretty=False)
    text = text.replace("\r", " ").replace("\n", " ")
    if max_width is not None and len(text) > max_width:
        text = text[: max_width - 1] + "…"
    return text


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]] | None = None,
    *,
    empty: str = "(none)",
) -> str:
    """Render rows as an aligned table; ``columns`` are ``(key, HEADER)`` pairs.

    Without ``columns``, every key seen (in first-seen order) becomes one. The last
    column is not padded. ``empty`` is returned when there are no rows.
    """
    if not rows:
        return empty
    if columns is None:
        keys: dict[str, None] = {}
        for row in rows:
            keys.update(dict.fromkeys(row))
        columns = [(k, k.upper()) for k in keys]
    grid = [[header for _, header in columns]]
    grid += [[cell(row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(columns))]
    lines = []
    for line in grid:
        padded = [text.ljust(width) for text, width in zip(line[:-1], widths, strict=False)]
        lines.append("  ".join([*padded, line[-1]]).rstrip())
    return "\n".join(lines)


def _is_table(value: Any) -> bool:
    return (
        isinstance(value, list) and bool(value) and all(isinstance(item, Mapping) for item in value)
    )


def kv_block(mapping: Mapping[str, Any], indent: int = 0) -> str:
    """Render a mapping as aligned ``key: value`` lines; nested values are indented.

    A nested mapping becomes an indented block; a list of mappings an indented table; a
    list of scalars a comma-separated line (``-`` when empty).
    """
    if not mapping:
        return " " * indent + "(empty)"
    pad = " " * indent
    width = max(len(str(key)) for key in mapping) + 1
    lines: list[str] = []
    for key, value in mapping.items():
        label = f"{key}:".ljust(width)
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}:")
            lines.append(kv_block(value, indent + 2))
        elif _is_table(value):
            lines.append(f"{pad}{key}:")
            lines.extend(" " * (indent + 2) + line for line in table(value).splitlines())
        elif isinstance(value, list):
            text = ", ".join(cell(item, None) for item in value) if value else "-"
            lines.append(f"{pad}{label} {text}")
        else:
            lines.append(f"{pad}{label} {cell(value, None)}")
    return "\n".join(lines)


def render(value: Any) -> str:
    """Render any result for people: a block, a table, a list or the text itself."""
    if isinstance(value, Mapping):
        return kv_block(value)
    if _is_table(value):
        return table(value)
    if isinstance(value, list):
        return "\n".join(cell(item, None) for item in value) if value else "(none)"
    return cell(value, None)


def event_line(event: Mapping[str, Any]) -> str:
    """One line per event, for ``roost tail``: seq, time, conversation, type, data."""
    conversation = event.get("conversation_id") or "-"
    data = event.get("data") or {}
    summary = cell(data, 100) if data else ""
    return (
        f"{event.get('seq', '?'):>6}  {event.get('at', '')}  {conversation}  "
        f"{event.get('type', '?')}  {summary}"
    ).rstrip()


class Progress:
    """A one-line progress indicator on a terminal; silent when the stream is not a TTY.

    ``update(done, total=..., note=...)`` redraws the line; ``ticking()`` redraws the
    elapsed time in a background thread while a single long call runs; ``close()``
    clears the line. Use it as a context manager.
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
        self._width = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self) -> str:
        """Return the text the progress line shows now."""
        parts = [f"{self.label}:"]
        if self.done is not None and self.total:
            parts.append(f"{self.done}/{self.total} ({100 * self.done / self.total:.0f}%)")
        elif self.done is not None:
            parts.append(str(self.done))
        if self.note:
            parts.append(self.note)
        parts.append(f"{time.monotonic() - self._started:.1f}s")
        return " ".join(parts)

    def update(
        self, done: int | None = None, *, total: int | None = None, note: str | None = None
    ) -> None:
        """Record progress and redraw the line (when enabled)."""
        with self._lock:
            if done is not None:
                self.done = done
            if total is not None:
                self.total = total
            if note is not None:
                self.note = note
            self._draw(self.line())

    def _draw(self, text: str) -> None:
        if not self.enabled:
            return
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)

    def close(self) -> None:
        """Erase the line (when enabled)."""
        with self._lock:
            if self.enabled and self._width:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
            self._width = 0

    @contextlib.contextmanager
    def ticking(self, interval_s: float = 0.2) -> Iterator[Progress]:
        """Redraw every ``interval_s`` (elapsed time) until the block ends."""
        if not self.enabled:
            yield self
            return
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(interval_s):
                self.update()

        thread = threading.Thread(target=tick, name="roost-progress", daemon=True)
        self.update()
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()
            self.close()


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
