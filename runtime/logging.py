"""Logging for the daemon and the tools around it: structlog, JSON lines in production.

:func:`configure_logging` sets up structlog and the standard library's root logger (so
Thespian's and eventsourcing's records come out the same way). Every line carries the
``project_id``, ``conversation_id`` and ``correlation_id`` bound with :func:`bind_context`
(structlog contextvars) and passes through ``runtime.redaction.redaction_processor`` when
that module is available, so secrets never reach a log. Event names are fixed snake_case
strings, data goes into keys: ``log.info("daemon_started", pid=123)``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import msgspec
import structlog
from structlog.typing import Processor

__all__ = ["LogFile", "bind_context", "configure_logging", "get_logger", "json_serializer"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_open_files: list[Any] = []


class LogFile:
    """A log file whose writes never raise: a full disk must not break what logs.

    Each line is one ``write`` to a file opened for appending, unbuffered, so a line the
    kernel refuses (no space, quota, I/O error) is dropped, not held back. Dropped lines
    are counted; the first line written afterwards is preceded by a ``log_lines_dropped``
    record with the count (on a line of its own, also when a line was cut short), so the
    gap shows in the log.
    """

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.dropped = 0
        self.cut = False

    def write(self, text: str) -> int:
        """Write ``text`` (whole lines, as structlog and logging write), or drop it."""
        data = text.encode("utf-8", "backslashreplace")
        if self.dropped:
            note = json_serializer(
                {
                    "component": "roost.logging",
                    "event": "log_lines_dropped",
                    "count": self.dropped,
                    "reason": "the log file could not be written (disk full?)",
                    "level": "warning",
                }
            )
            data = ("\n" if self.cut else "").encode() + note.encode() + b"\n" + data
        try:
            written = os.write(self.fd, data)
        except OSError:
            self.dropped += max(1, text.count("\n"))
            return 0
        self.cut = written < len(data)
        self.dropped = max(1, text.count("\n")) if self.cut else 0
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: every line is written at once."""

    def isatty(self) -> bool:
        """Whether the file is a terminal."""
        return os.isatty(self.fd)

    def close(self) -> None:
        """Close the file."""
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _fallback(value: Any) -> Any:
    return repr(value)


def json_serializer(value: Any, **_kw: Any) -> str:
    """Serialize a log line with msgspec; values it cannot encode are written as ``repr``."""
    return msgspec.json.encode(value, enc_hook=_fallback).decode()


def _redaction_processor() -> Processor | None:
    try:
        module = importlib.import_module("runtime.redaction")
    except ImportError:
        return None
    processor = getattr(module, "redaction_processor", None)
    return processor if callable(processor) else None


def _shared_processors() -> list[Processor]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def _final_processors(renderer: Processor) -> list[Processor]:
    """Tracebacks are formatted first so that redaction sees them too."""
    processors: list[Processor] = [structlog.processors.format_exc_info]
    redact = _redaction_processor()
    if redact is not None:
        processors.append(redact)
    processors.append(renderer)
    return processors


def configure_logging(json: bool, log_file: str | None = None, *, level: str | None = None) -> None:
    """Configure structlog and stdlib logging for this process (call again to change it).

    ``json``: JSON lines (``JSONRenderer`` with a msgspec serializer), else the console
    renderer. ``log_file``: append to that file (its directory is created, mode 0700),
    else write to stderr. ``level``: ``debug|info|warning|error``, default
    ``$ROOST_LOG_LEVEL`` or ``info``.
    """
    chosen = (level or os.environ.get("ROOST_LOG_LEVEL") or "info").lower()
    min_level = _LEVELS.get(chosen, logging.INFO)
    stream: Any
    if log_file is not None:
        directory = os.path.dirname(log_file)
        if directory:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        stream = LogFile(log_file)
    else:
        stream = sys.stderr
    for old in _open_files:
        with contextlib.suppress(OSError):
            old.close()
    _open_files.clear()
    if log_file is not None:
        _open_files.append(stream)

    renderer: Processor
    if json:
        renderer = structlog.processors.JSONRenderer(serializer=json_serializer)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty())
    shared = _shared_processors()
    structlog.configure(
        processors=[
            *shared,
            structlog.processors.StackInfoRenderer(),
            *_final_processors(renderer),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(min_level),
        logger_factory=structlog.WriteLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *_final_processors(renderer),
            ],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        )
    )
    root = logging.getLogger()
    for old_handler in list(root.handlers):
        root.removeHandler(old_handler)
    root.addHandler(handler)
    root.setLevel(min_level)


def get_logger(name: str) -> Any:
    """Return a structlog logger that records ``component=name`` on every line."""
    return structlog.get_logger(name, component=name)


@contextlib.contextmanager
def bind_context(**values: Any) -> Iterator[None]:
    """Bind keys (``project_id``, ``conversation_id``, ``correlation_id``...) for a block.

    ``None`` values are left out.
    """
    present = {k: v for k, v in values.items() if v is not None}
    with structlog.contextvars.bound_contextvars(**present):
        yield
