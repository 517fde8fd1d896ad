"""Durable records of the runs in flight, so a run cut by a stop or crash is still reviewed.

Before a tool process starts, :func:`open_run` writes ``ROOST_HOME/runs/<run>.json``
(written to a temporary name, fsync'd, renamed, the directory fsync'd): which project,
root, call and conversation, when it began, the process that runs it, and what the
review needs to know of the time before (the ``.git`` entries, the protected places that
were missing). The review removes it (:func:`close_run`). A record whose process is gone
(:func:`dead_runs`) belongs to a run that a ``roost daemon stop``, a ``kill -9`` or a crash
ended: the daemon reviews its root when it stops and when it starts, and the project's
ToolRunner records the outcome as an event (``runtime.guard.review.leftovers.recover_runs``).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from typing import Any

import msgspec
import psutil

from runtime.guard.home import roost_home

__all__ = [
    "RUNS_DIR",
    "RunLabel",
    "RunRecord",
    "close_run",
    "dead_runs",
    "live_runs",
    "open_run",
    "runs_dir",
    "save_run",
]

RUNS_DIR = "runs"
"""The records' directory in ``ROOST_HOME``."""


class RunLabel(msgspec.Struct, frozen=True, kw_only=True):
    """Who a run is for: what its record and its event name."""

    project_id: str
    """The project."""
    call_id: str
    """The tool call."""
    tool: str = "command.run"
    """The tool."""
    conversation_id: str | None = None
    """The call's conversation, when there is one."""
    run_id: str = msgspec.field(default_factory=lambda: uuid.uuid4().hex[:16])
    """This run (names its record and its quarantine directory)."""


class RunRecord(msgspec.Struct, kw_only=True):
    """One run's durable record (``runs/<run_id>.json``)."""

    label: RunLabel
    """Who the run is for."""
    root: str
    """The project root the run could write."""
    started_at: float
    """Wall-clock start (seconds since the epoch), before the process started."""
    pid: int
    """The process that started the run (a ToolRunner)."""
    pid_started: float
    """That process's start time, so a reused pid is not taken for it."""
    gits: list[str] = []
    """``.git`` entries (relative) that existed before the run."""
    missing: list[str] = []
    """Protected places (relative: ``.roost``, hooks directories) missing before the run."""
    sensitive: list[list[str]] = []
    """The project's ``[sensitive_path_denylist, sensitive_path_allowlist]``: not hashed."""
    report: dict[str, Any] | None = None
    """The review's report once a stop or start reviewed the dead run (event still due)."""


def runs_dir() -> str:
    """Where the records are (``ROOST_HOME/runs``)."""
    return os.path.join(roost_home.home(), RUNS_DIR)


def _path(run_id: str) -> str:
    return os.path.join(runs_dir(), f"{run_id}.json")


def _fsync_dir(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def save_run(record: RunRecord) -> None:
    """Write ``record`` durably (temporary file, fsync, rename, fsync of the directory)."""
    directory = runs_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    final = _path(record.label.run_id)
    temp = f"{final}.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, msgspec.json.encode(record))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, final)
    _fsync_dir(directory)


def open_run(
    label: RunLabel,
    *,
    root: str,
    started_at: float,
    gits: frozenset[str] | list[str],
    missing: tuple[str, ...] | list[str],
    sensitive: tuple[tuple[str, ...], tuple[str, ...]] = ((), ()),
) -> RunRecord:
    """Write the durable record of a run about to start (see the module docstring)."""
    me = psutil.Process()
    record = RunRecord(
        label=label,
        root=root,
        started_at=started_at,
        pid=me.pid,
        pid_started=me.create_time(),
        gits=sorted(gits),
        missing=list(missing),
        sensitive=[list(sensitive[0]), list(sensitive[1])],
    )
    save_run(record)
    return record


def close_run(record: RunRecord) -> None:
    """Remove a reviewed run's record.

    Not fsync'd: a removal lost to a power cut only brings the record back, and its run
    is then reviewed once more, by a walk.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(record.label.run_id))


def _alive(record: RunRecord) -> bool:
    try:
        proc = psutil.Process(record.pid)
        same = abs(proc.create_time() - record.pid_started) < 0.01
        return same and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, OSError):
        return False


def dead_runs(project_id: str | None = None) -> list[RunRecord]:
    """Records of runs whose process is gone (of ``project_id`` only, when given), oldest first.

    A record that cannot be read is removed (it cannot name a root to review).
    """
    return [r for r in _records(project_id) if not _alive(r)]


def live_runs(project_id: str | None = None) -> list[RunRecord]:
    """Records of runs whose process is still there (of ``project_id`` only, when given)."""
    return [r for r in _records(project_id) if _alive(r)]


def _records(project_id: str | None) -> list[RunRecord]:
    try:
        names = sorted(os.listdir(runs_dir()))
    except OSError:
        return []
    found: list[RunRecord] = []
    for name in names:
        if not name.endswith(".json"):
            if name.endswith(".tmp") and _stale(os.path.join(runs_dir(), name)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(runs_dir(), name))
            continue
        path = os.path.join(runs_dir(), name)
        try:
            with open(path, "rb") as f:
                record = msgspec.json.decode(f.read(1 << 20), type=RunRecord)
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            with contextlib.suppress(OSError):
                os.unlink(path)
            continue
        if project_id is None or record.label.project_id == project_id:
            found.append(record)
    return sorted(found, key=lambda r: r.started_at)


def _stale(path: str) -> bool:
    try:
        return time.time() - os.lstat(path).st_mtime > 60
    except OSError:
        return False
