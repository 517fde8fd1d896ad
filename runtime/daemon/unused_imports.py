"""Optional imports the daemon never uses, kept out of it and of every actor it forks.

Two libraries import others when they happen to be installed, and Roost's own dependencies
install them: ``httpx`` imports its command line (``httpx._main``: ``click``, ``rich``,
``pygments``) and ``structlog.dev`` imports ``rich`` for pretty tracebacks. The daemon uses
none of them (its logs are JSON lines; progress bars belong to the CLI), yet every actor
process is forked from the daemon and carried them: about 170 more modules and ~7 MB of
RSS per process, measured in ``docs/performance.md``. :func:`keep_out` makes those imports
fail the way an absent package does, so both libraries take their fallbacks (httpx's
``main`` asks for ``httpx[cli]``; structlog prints plain tracebacks).

It must run before ``structlog`` and ``httpx`` are first imported: ``runtime.daemon``'s
``__main__`` calls it first. Other programs (the CLI, the soak harness) keep them.
"""

from __future__ import annotations

import sys

__all__ = ["KEPT_OUT", "keep_out"]

KEPT_OUT: tuple[str, ...] = ("httpx._main", "rich")
"""Modules the daemon's processes never import (a ``None`` entry in ``sys.modules``)."""


def keep_out() -> list[str]:
    """Make importing each of :data:`KEPT_OUT` raise ``ImportError`` in this process.

    Returns the names it blocked; a module already imported is left alone (too late to
    matter here, and blocking it would break whoever holds it).
    """
    blocked = []
    for name in KEPT_OUT:
        if name not in sys.modules:
            sys.modules[name] = None  # type: ignore[assignment]
            blocked.append(name)
    return blocked
