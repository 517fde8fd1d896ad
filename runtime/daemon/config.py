"""The interface between the daemon's transport and the system that serves requests.

The daemon process (``runtime.daemon.main``) owns the socket, the pid file and the logs; what
answers requests is a :class:`Backend`, made once by a :data:`BackendFactory` from the
:class:`DaemonConfig`. The real one (``runtime.daemon.backend:create_backend``) runs the actor
system; tests use ``tests.runtime.fake_backend:create``. ``ROOST_BACKEND="module:function"``
chooses the factory.

``Backend.handle`` receives each op that reaches the backend (every client op but the
gateway's own and ``subscribe``) as a :class:`runtime.wire.ops.Call`: the op, its arguments
Struct (checked, defaults filled in) and the ids the gateway gave it. Each backend serves
it with its method ``op_<name>`` (:func:`runtime.wire.ops.op_handlers` builds the dispatch
from the op table); what each op returns is SPEC section 2's.

Failures are raised as :class:`runtime.errors.RoostError` subclasses (the request error
codes of SPEC section 2); anything else becomes an ``internal_error`` reply.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import msgspec

from events.view_types import TimelineEvent
from runtime.daemon.settings import (
    CONFIG_NAME,
    FLAG_SETTINGS,
    SETTINGS,
    Setting,
    Settings,
    read_config_file,
    resolve_settings,
)
from runtime.guard.home.roost_home import PID_NAME, SOCKET_NAME, resolve_home
from runtime.settings_table import JOURNAL_KINDS, JournalKind
from runtime.wire.op_args import SubscribeArgs
from runtime.wire.ops import Call
from runtime.wire.protocol import DEFAULT_MAX_FRAME_BYTES

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_BACKEND",
    "DEFAULT_MAX_FRAME_BYTES",
    "FLAG_SETTINGS",
    "SETTINGS",
    "Backend",
    "BackendFactory",
    "DaemonConfig",
    "Setting",
    "Settings",
    "config_for_home",
    "load_backend_factory",
    "read_config_file",
    "resolve_home",
    "resolve_settings",
    "roost_version",
]

DEFAULT_BACKEND = "runtime.daemon.backend:create_backend"
"""The factory used when ``ROOST_BACKEND`` is not set."""

LOG_NAME = os.path.join("logs", "daemon.log")
MAILBOX_DIR = "mailbox"
"""Where older versions spilled large actor messages; removed at start (no longer used)."""


class DaemonConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Where the daemon keeps its files and how much it accepts."""

    home: str
    """``ROOST_HOME``: absolute path of the state directory."""
    journal: JournalKind = JOURNAL_KINDS[0]
    """Journal kind (``ROOST_JOURNAL``), resolved once: the daemon opens this one (and hands
    it to the Journal actor); SQLite lives in ``home/journal.sqlite``."""
    socket_path: str
    """The Unix socket clients connect to."""
    pid_path: str
    """The pid file, locked (flock) while the daemon runs."""
    log_path: str
    """The daemon's JSON-lines log."""
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    """Largest frame body accepted or sent."""
    max_inflight: int = 256
    """Requests served at once; more get ``overloaded``."""
    max_connections: int = 1024
    """Open client connections; more are refused with ``overloaded``."""
    idle_timeout_s: float = 60.0
    """A connection silent this long while a request is awaited (or a reply not taken) is
    closed; a ``subscribe`` stream waiting for events is not idle."""
    config_file: str | None = None
    """The config file the daemon read (None: none)."""
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    """Every setting's ``{value, source}`` (:meth:`Settings.report`), for ``status``."""


class Backend(Protocol):
    """What serves requests inside the daemon."""

    def handle(self, call: Call[Any], *, deadline: float) -> Any:
        """Serve one request; return a JSON-able result or raise a ``RoostError``.

        ``call.args`` is its op's Struct, validated and complete (``runtime.wire.ops``);
        ``deadline`` is a ``time.monotonic()`` value after which the caller has given up.
        """
        ...

    def status(self, *, deadline: float) -> dict[str, Any]:
        """The backend's part of ``status`` (``{projects, ...}``), merged into the gateway's."""
        ...

    def subscribe(self, args: SubscribeArgs, stop: threading.Event) -> Iterator[TimelineEvent]:
        """Yield committed envelopes (as dicts) in ``seq`` order, blocking for new ones.

        The iterator returns soon after ``stop`` is set (the client left or the daemon
        stops) and may return on its own when the stream is over (the project stopped).
        Errors such as ``project_not_found`` are raised from the first ``next()``.
        """
        ...

    def close(self) -> None:
        """Shut everything down (the actor system, the journal); called once, at exit."""
        ...


BackendFactory = Callable[[DaemonConfig], Backend]
"""Builds the backend once the daemon holds its pid file."""


def config_for_home(
    home: str | None, *, journal: str | None = None, settings: Settings | None = None
) -> DaemonConfig:
    """Build the :class:`DaemonConfig` of a state directory.

    With ``settings`` (:func:`resolve_settings`, what a daemon runs with), its values.
    Else (a client looking for the daemon's files): ``journal`` defaults to
    ``$ROOST_JOURNAL`` or ``sqlite``; a value that is no kind of
    :data:`runtime.settings_table.JOURNAL_KINDS` raises ``ValueError``.
    ``$ROOST_IDLE_TIMEOUT_S`` (a positive number) and ``$ROOST_MAX_CONNECTIONS`` and
    ``$ROOST_MAX_INFLIGHT`` (positive integers) override the defaults; anything else in them
    raises ``ValueError``.
    """
    root = resolve_home(home)
    if settings is not None:
        values = settings.values
        return DaemonConfig(
            home=root,
            journal=values["journal"],
            socket_path=os.path.join(root, SOCKET_NAME),
            pid_path=os.path.join(root, PID_NAME),
            log_path=os.path.join(root, LOG_NAME),
            idle_timeout_s=float(values["idle_timeout_s"]),
            max_connections=int(values["max_connections"]),
            max_inflight=int(values["max_inflight"]),
            config_file=settings.config_file,
            settings=settings.report(),
        )
    kind = journal or os.environ.get("ROOST_JOURNAL") or JOURNAL_KINDS[0]
    if kind not in JOURNAL_KINDS:
        choices = " or ".join(repr(k) for k in JOURNAL_KINDS)
        raise ValueError(f"ROOST_JOURNAL must be {choices}, got {kind!r}")
    default = {field.name: field.default for field in msgspec.structs.fields(DaemonConfig)}
    return DaemonConfig(
        home=root,
        journal=kind,
        socket_path=os.path.join(root, SOCKET_NAME),
        pid_path=os.path.join(root, PID_NAME),
        log_path=os.path.join(root, LOG_NAME),
        idle_timeout_s=_positive_env(
            "ROOST_IDLE_TIMEOUT_S", float, "a positive number of seconds", default["idle_timeout_s"]
        ),
        max_connections=int(
            _positive_env(
                "ROOST_MAX_CONNECTIONS", int, "a positive integer", default["max_connections"]
            )
        ),
        max_inflight=int(
            _positive_env("ROOST_MAX_INFLIGHT", int, "a positive integer", default["max_inflight"])
        ),
    )


def _positive_env(
    name: str, kind: type[float] | type[int], what: str, default: float
) -> float | int:
    """``$name`` as a positive ``kind``; ``default`` when it is unset or empty."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = 0
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{name} must be {what}, got {raw!r}")
    return value


def load_backend_factory(spec: str | None = None) -> BackendFactory:
    """Import the factory named ``"module:function"`` (default: ``$ROOST_BACKEND``).

    Raises ``ImportError`` with the spec in the message when it cannot be loaded.
    """
    chosen = spec or os.environ.get("ROOST_BACKEND") or DEFAULT_BACKEND
    module_name, sep, attr = chosen.partition(":")
    if not sep or not module_name or not attr:
        raise ImportError(f"ROOST_BACKEND must look like 'module:function', got {chosen!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ImportError(f"cannot import backend module {module_name!r}: {e}") from e
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ImportError(f"backend module {module_name!r} has no callable {attr!r}")
    result: BackendFactory = factory
    return result


def roost_version() -> str:
    """Return the installed ``roost`` version (``0+unknown`` when not installed)."""
    try:
        return importlib.metadata.version("roost")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
