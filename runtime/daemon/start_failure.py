"""What a daemon that fails to start says, and how the process that started it reads it back.

The daemon prints one line last, ``roost: CODE: message`` (:func:`failure_line`), to its
stderr, which is its log file; :func:`child_failure` finds that line among what the log got
since the start and rebuilds the error, so ``roost daemon start`` reports the daemon's own
cause (e.g. ``journal_error`` for a wrong ``POSTGRES_*`` setting) instead of a timeout.
"""

from __future__ import annotations

import re

from runtime.errors import REQUEST_ERROR_CODES, RoostError, error_from_wire
from runtime.guard.home.pidfile import DaemonAlreadyRunningError

__all__ = ["child_failure", "failure_line"]


def failure_line(error: BaseException) -> str:
    """The one line a daemon that fails to start prints last: ``roost: CODE: message``."""
    if isinstance(error, RoostError):
        code, message = error.code, error.message
    else:
        code, message = "backend_failed", f"{type(error).__name__}: {error}"
    return f"roost: {code}: {' '.join(message.split())}"


_FAILURE = re.compile(r"^roost: ([a-z_]+): (.+)$")


def child_failure(log_path: str, offset: int, status: int) -> RoostError | None:
    """The error the daemon that just exited printed last (:func:`failure_line`), if any."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read(1 << 20).decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        found = _FAILURE.match(line.strip())
        if found:
            code, message = found.groups()
            if code not in _PASSED_ON:  # no Roost error: the daemon died, this is why
                message = f"the daemon exited with status {status} before answering: {line.strip()}"
                code = "daemon_unreachable"
            wire = {"code": code, "message": message, "details": {"exit_code": status}}
            return error_from_wire(wire)
    return None


_PASSED_ON = frozenset(
    {*REQUEST_ERROR_CODES, "bad_config", "journal_error", "journal_conflict", "integrity_error"}
    | {DaemonAlreadyRunningError.code}
)
"""The codes of Roost errors a failed start reports as they are (else ``daemon_unreachable``)."""
