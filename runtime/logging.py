"""Logging for the daemon and the tools around it: structlog, JSON lines in production.

:func:`configure_logging` sets up structlog and the standard library's root logger, so the
records of other libraries (Thespian, eventsourcing, httpx) go through the same processors
and come out as the same JSON lines, with a ``component`` (the logger's name, ``thespian``
for Thespian's records). Every line carries the ``project_id``, ``conversation_id`` and
``correlation_id`` bound with :func:`bind_context` (structlog contextvars) and passes
through ``runtime.guard.secrets.redaction.redaction_processor`` when that module is available, so
secrets
never reach a log. Event names are fixed snake_case strings, data goes into keys:
``log.info("daemon_started", pid=123)``.

A log file is a :class:`runtime.logfiles.RotatingLogFile` (rotated by size, shared by the
daemon's processes). In an actor process Thespian replaces the root logger with its own
forwarder (which refuses handlers) and starts a new logger hierarchy; loggers created
before the fork (httpx's, at import) still hang off the old root. Both roots get this
process's handler, so no record reaches a handler whose file was closed.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

import msgspec
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from runtime.logfiles import RotatingLogFile, rotation_settings

__all__ = ["bind_context", "configure_logging", "get_logger", "json_serializer"]

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
_open_files: list[RotatingLogFile] = []
_ORIGINAL_ROOT = logging.getLogger()
"""This process's root logger at import, before Thespian swaps in its forwarder."""


def _fallback(value: Any) -> Any:
    return repr(value)


def json_serializer(value: Any, **_kw: Any) -> str:
    """Serialize a log line with msgspec; values it cannot encode are written as ``repr``."""
    return msgspec.json.encode(value, enc_hook=_fallback).decode()


def _redaction_processor() -> Processor | None:
    try:
        module = importlib.import_module("runtime.guard.secrets.redaction")
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


def _foreign_component(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    """``component`` of a standard-library record: its logger, ``thespian`` for Thespian's.

    A record's text is its ``message``; its ``event`` is a fixed name
    (``thespian_message``, ``library_message``), as every line of ours has.
    """
    record = event_dict.get("_record")
    if "component" not in event_dict and isinstance(record, logging.LogRecord):
        thespian = f"{os.sep}thespian{os.sep}" in (record.pathname or "")
        event_dict["component"] = "thespian" if thespian else record.name
        event_dict["message"] = event_dict.get("event")
        event_dict["event"] = "thespian_message" if thespian else "library_message"
    return event_dict


def _default_component(_logger: WrappedLogger, _name: str, event_dict: EventDict) -> EventDict:
    event_dict.setdefault("component", "roost")
    return event_dict


class _Handler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that reports its own failures in one line, never a traceback."""

    def handleError(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            error = sys.exc_info()[1]
            sys.__stderr__.write(  # type: ignore[union-attr]
                f"roost: log_record_failed: {record.name}: {type(error).__name__}: {error}\n"
            )


def _install_handler(handler: logging.Handler, level: int) -> None:
    """Make ``handler`` the only one of every root logger this process has.

    ``logging.Logger`` methods are called directly because Thespian's forwarder (the root
    of an actor process) refuses ``addHandler``.
    """
    roots = {id(r): r for r in (logging.getLogger(), logging.Logger.root, _ORIGINAL_ROOT)}
    for root in roots.values():
        for old in list(root.handlers):
            logging.Logger.removeHandler(root, old)
        logging.Logger.addHandler(root, handler)
        root.setLevel(level)


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
    renderer. ``log_file``: append to that file (its directory is created, mode 0700;
    rotated by size, see :func:`runtime.logfiles.rotation_settings`), else (``None`` or
    ``"-"``) write to stderr. ``level``: ``debug|info|warning|error``, default
    ``$ROOST_LOG_LEVEL`` or ``info``. Raises ``ValueError`` for a bad rotation setting.
    """
    chosen = (level or os.environ.get("ROOST_LOG_LEVEL") or "info").lower()
    min_level = _LEVELS.get(chosen, logging.INFO)
    stream: IO[str] | RotatingLogFile
    opened: list[RotatingLogFile] = []
    if log_file and log_file != "-":
        max_bytes, backups = rotation_settings()
        stream = RotatingLogFile(log_file, max_bytes=max_bytes, backups=backups)
        opened.append(stream)
    else:
        stream = sys.stderr
    for old in _open_files:
        old.close()
    _open_files[:] = opened

    renderer: Processor
    if json:
        renderer = structlog.processors.JSONRenderer(serializer=json_serializer)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty())
    shared = _shared_processors()
    structlog.configure(
        processors=[
            *shared,
            _default_component,
            structlog.processors.StackInfoRenderer(),
            *_final_processors(renderer),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(min_level),
        logger_factory=structlog.WriteLoggerFactory(file=stream),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )
    handler = _Handler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                *_final_processors(renderer),
            ],
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name, _foreign_component],
        )
    )
    _install_handler(handler, min_level)


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
