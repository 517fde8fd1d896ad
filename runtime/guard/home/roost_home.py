"""Roost's own state: where ``ROOST_HOME`` is, and that no tool may reach it.

One place for both questions. :func:`resolve_home` answers where a home is (the CLI, the
client and the daemon ask it); :func:`protect` names the running daemon's home (and a
profile directory) before its actor processes fork, so they inherit it; the path policy
(``runtime.guard.workspace``) refuses every tool path under :func:`home`, and the command
sandbox (``runtime.guard.sandbox.view``) hides every place of :func:`hidden_places` from commands.
"""

from __future__ import annotations

import os

__all__ = [
    "PID_NAME",
    "PROFILE_DIR_ENV",
    "SOCKET_NAME",
    "hidden_places",
    "home",
    "pid_path",
    "protect",
    "resolve_home",
    "socket_path",
]

PROFILE_DIR_ENV = "ROOST_PROFILE_DIR"
"""Where actor processes write their profiles when set (Roost's state too)."""

SOCKET_NAME = "roost.sock"
"""The daemon's socket, in its home."""

PID_NAME = "roost.pid"
"""The daemon's pid file (an exclusive lock while it runs), in its home."""

_protected: dict[str, str | None] = {"home": None}


def resolve_home(home: str | None) -> str:
    """Return the absolute state directory: ``home``, else ``$ROOST_HOME``, else the default.

    The default is ``~/.local/state/roost``.
    """
    chosen = home or os.environ.get("ROOST_HOME") or os.path.join("~", ".local", "state", "roost")
    return os.path.abspath(os.path.expanduser(chosen))


def socket_path(home: str | None) -> str:
    """The daemon socket of ``home`` (resolved as :func:`resolve_home` does)."""
    return os.path.join(resolve_home(home), SOCKET_NAME)


def pid_path(home: str | None) -> str:
    """The daemon pid file of ``home`` (resolved as :func:`resolve_home` does)."""
    return os.path.join(resolve_home(home), PID_NAME)


def protect(home: str | None) -> None:
    """Set (or clear, with None) the running daemon's ``ROOST_HOME``."""
    _protected["home"] = home


def home() -> str:
    """The protected ``ROOST_HOME`` of this process, absolute and resolved.

    Without :func:`protect` (a tool run outside a daemon), ``$ROOST_HOME`` or the default.
    """
    return os.path.realpath(_protected["home"] or resolve_home(None))


def hidden_places() -> list[str]:
    """Every directory of Roost's state, resolved: the home and a profile directory."""
    places = {home()}
    profiles = os.environ.get(PROFILE_DIR_ENV, "")
    if profiles:
        places.add(os.path.realpath(profiles))
    return sorted(places)
