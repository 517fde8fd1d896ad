"""What the SDKs and uvicorn log, as Roost's one-line messages on stderr.

``roost mcp serve`` and ``roost a2a serve`` run the MCP SDK, the A2A SDK and uvicorn,
which log through :mod:`logging` (a handler that fails, a request the transport refuses)
and, left alone, print bare messages and whole tracebacks. :func:`route_logging` sends every
record of warning level and above (and Python's warnings) through :class:`OneLineHandler`:
one line ``roost: COMPONENT: LEVEL: MESSAGE (CAUSE)``, where ``CAUSE`` is the exception's
own one line: ``CODE: MESSAGE`` of the Roost error at its root when there is one
(``daemon_unreachable: no daemon answers on ...``), else ``TypeName: message``.
"""

from __future__ import annotations

import logging
import sys

from runtime.errors import RoostError

__all__ = ["OneLineHandler", "exception_line", "one_line", "route_logging"]


def _first(text: str) -> str:
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else ""


def exception_line(error: BaseException) -> str:
    """The one line of ``error``: its Roost error's ``CODE: MESSAGE``, else ``Type: text``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, RoostError):
            return f"{current.code}: {_first(current.message)}"
        current = current.__cause__ or current.__context__
    text = _first(str(error))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def one_line(record: logging.LogRecord, component: str) -> str:
    """``roost: COMPONENT: LEVEL: MESSAGE (CAUSE)`` of one log record."""
    message = _first(record.getMessage())
    error = record.exc_info[1] if record.exc_info else None
    if error is not None:
        cause = exception_line(error)
        if cause not in message:
            message = f"{message} ({cause})" if message else cause
    return f"roost: {component}: {record.levelname.lower()}: {message}"


class OneLineHandler(logging.Handler):
    """Prints each record as :func:`one_line` on stderr (stdout may be the protocol)."""

    def __init__(self, component: str) -> None:
        super().__init__(logging.WARNING)
        self.component = component

    def emit(self, record: logging.LogRecord) -> None:
        """Print the record's one line."""
        try:
            print(one_line(record, self.component), file=sys.stderr, flush=True)
        except Exception:  # logging must never raise
            self.handleError(record)


def route_logging(component: str) -> None:
    """Send every warning and error of this process through :class:`OneLineHandler`."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(OneLineHandler(component))
    root.setLevel(logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.captureWarnings(True)
