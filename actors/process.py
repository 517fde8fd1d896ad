"""What each actor process sets up once: logging, profiler, death with its parent, frozen heap.

An actor is a process of its own (Thespian's ``multiprocQueueBase``); these run in it, not
in the actor's message loop.
"""

from __future__ import annotations

import ctypes
import gc
import os
import signal
from collections.abc import Mapping
from typing import Any

__all__ = ["configure_process_logging", "die_with_parent", "dump_profile", "profiling_wanted"]

_configured: list[int] = []


def die_with_parent() -> None:
    """Have the kernel SIGKILL this actor process when its parent actor's process dies.

    Thespian leaves the children of a killed actor running: they would live on as orphans
    next to the replacements the restarted parent creates (two actors for one conversation,
    a tool runner nobody talks to). An orderly stop is unaffected: Thespian parents wait for
    their children to exit first. Linux ``PR_SET_PDEATHSIG``; a no-op elsewhere.
    """
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)


_profiler: list[Any] = []


def dump_profile(kind: str) -> None:
    """With ``ROOST_PROFILE_DIR`` set, write this process's cProfile stats on exit."""
    if _profiler:
        directory = os.environ.get("ROOST_PROFILE_DIR", "")
        _profiler[0].disable()
        _profiler[0].dump_stats(os.path.join(directory, f"{kind}-{os.getpid()}.prof"))
        _profiler.clear()


def profiling_wanted(kind: str, environ: Mapping[str, str]) -> bool:
    """Whether an actor of ``kind`` profiles itself.

    Yes when ``ROOST_PROFILE_DIR`` is set and ``ROOST_PROFILE_KINDS`` (comma-separated) is
    unset or names ``kind``.
    """
    kinds = environ.get("ROOST_PROFILE_KINDS", "")
    return bool(environ.get("ROOST_PROFILE_DIR")) and (not kinds or kind in kinds.split(","))


def configure_process_logging(kind: str) -> None:
    """Configure structlog once per actor process (never carried in pickled state).

    With ``ROOST_PROFILE_DIR`` set (a debugging aid, see docs/performance.md), each actor
    process also runs cProfile and writes its stats there when it stops;
    ``ROOST_PROFILE_KINDS`` (comma-separated kinds, e.g. ``conversation,journal``) limits
    that to some kinds of actor.
    """
    if os.getpid() in _configured:
        return
    _configured.append(os.getpid())
    # A forked actor shares its parent's heap until it writes a page; the collector's passes
    # write to every object they visit, so each process came to hold a private copy of the
    # whole inherited heap (the Supervisor's unique memory 7 -> 21 MiB over a 150-s soak,
    # its RSS +2 MiB). Frozen objects are never visited again (docs/performance.md).
    gc.freeze()
    if profiling_wanted(kind, os.environ):
        import cProfile  # noqa: PLC0415 - only when profiling

        _profiler.clear()
        _profiler.append(cProfile.Profile())
        _profiler[0].enable()
    try:
        from runtime.logging import configure_logging  # noqa: PLC0415

        configure_logging(
            json=os.environ.get("ROOST_LOG_FORMAT", "json") != "console",
            log_file=os.environ.get("ROOST_LOG_FILE"),
        )
    except Exception:
        return
