"""What the view hides (its step 5, and ``/etc``'s secrets in step 1), found on the host.

Entries of ``/etc`` other users cannot read, the host's listening Unix sockets, sensitive
files inside the bound paths, and Roost's own state directories.
"""

from __future__ import annotations

import functools
import os
import stat
import time
from collections.abc import Sequence

from runtime.guard.home import roost_home
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review.rootscan import scan_paths

__all__ = [
    "ROOST_STATE_ENV",
    "etc_secrets",
    "hidden_state",
    "listening_sockets",
    "sensitive_files",
]

ROOST_STATE_ENV = "ROOST_SANDBOX_HIDE"
"""``os.pathsep``-separated extra directories to hide from commands (operators, tests)."""

_ETC_CACHE_S = 60.0


def hidden_state() -> list[str]:
    """Roost's state directories hidden from commands (``guard.home.roost_home``, the env)."""
    extra = [p for p in os.environ.get(ROOST_STATE_ENV, "").split(os.pathsep) if p]
    return sorted({*roost_home.hidden_places(), *(os.path.realpath(p) for p in extra)})


@functools.lru_cache(maxsize=1)
def _etc_secrets_at(bucket: int) -> tuple[str, ...]:
    del bucket  # the cache key: the list is recomputed once a minute
    found: list[str] = []
    for top, dirs, files in os.walk("/etc", onerror=lambda e: None):
        keep: list[str] = []
        for name in dirs:
            path = os.path.join(top, name)
            if _hidden_from_others(path, directory=True):
                found.append(path)
            else:
                keep.append(name)
        dirs[:] = keep
        found.extend(
            os.path.join(top, name)
            for name in files
            if _hidden_from_others(os.path.join(top, name), directory=False)
        )
    return tuple(sorted(found))


def _hidden_from_others(path: str, *, directory: bool) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode):
        return False
    needed = (stat.S_IROTH | stat.S_IXOTH) if directory else stat.S_IROTH
    return (st.st_mode & needed) != needed


def etc_secrets() -> tuple[str, ...]:
    """Entries of ``/etc`` that other users cannot read (shadow, host keys, ...), cached 60 s."""
    return _etc_secrets_at(int(time.monotonic() // _ETC_CACHE_S))


def listening_sockets() -> list[str]:
    """Paths of the host's bound Unix sockets (``/proc/net/unix``), existing ones only."""
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return []
    paths: set[str] = set()
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and fields[7].startswith("/"):
            paths.add(fields[7])
    return sorted(p for p in paths if os.path.exists(p))


def sensitive_files(paths: Sequence[str], rules: SensitiveRules) -> list[str]:
    """Entries under ``paths`` whose names the sensitive-path rules match (not followed links).

    A matching directory is returned whole and not descended into. Raises ``OverflowError``
    past ``rootscan.MAX_SCAN_ENTRIES`` entries, so a run is refused rather than half-hidden.
    """
    return list(scan_paths(paths, rules).sensitive)
