"""A long-lived tool process's freezer cgroup: its whole tree stopped between calls.

The v1 ``freezer`` hierarchy's ``freezer.state``, or v2's ``cgroup.freeze``; the launcher
freezes an MCP stdio server between its calls. :func:`probe_freezer` says whether one can
be had here.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
from collections.abc import Callable
from typing import NamedTuple

from runtime.guard.sandbox.cgroupfs import (
    Version,
    freezer_parent,
    fresh_name,
    join_argv,
    kill_and_remove,
    make_cgroup,
    read_control,
    remove_stale,
    tasks,
    thaw,
    write_control,
)

__all__ = ["FreezerCgroup", "probe_freezer"]


class _Control(NamedTuple):
    """How one cgroup version freezes a cgroup and tells that it is frozen."""

    freeze_file: str
    """The control file written to freeze."""
    freeze_value: str
    """What is written there."""
    state_file: str
    """The file the kernel says the state in."""
    is_frozen: Callable[[str], bool]
    """Whether that file's text says frozen."""


_CONTROLS: dict[Version, _Control] = {
    "v1": _Control("freezer.state", "FROZEN", "freezer.state", lambda s: s.strip() == "FROZEN"),
    "v2": _Control("cgroup.freeze", "1", "cgroup.events", lambda s: "frozen 1" in s.splitlines()),
}


class FreezerCgroup:
    """A long-lived tool's freezer cgroup: its whole tree runs only while it is thawed."""

    def __init__(self, path: str, version: Version) -> None:
        self.path = path
        """The cgroup's directory."""
        self.version = version
        """``v1`` (``freezer.state``) or ``v2`` (``cgroup.freeze``)."""

    @classmethod
    def create(cls) -> FreezerCgroup:
        """Make a fresh, thawed freezer cgroup; ``OSError`` when impossible."""
        where = freezer_parent()
        if where is None:
            raise OSError("no writable freezer cgroup")
        remove_stale(where[0])
        return cls(make_cgroup(where[0], fresh_name(), []), where[1])

    @property
    def procs_files(self) -> list[str]:
        """The file a process writes its pid to in order to join."""
        return [os.path.join(self.path, "cgroup.procs")]

    def pids(self) -> list[int]:
        """Processes in the cgroup now."""
        return tasks(self.path)

    def freeze(self, timeout_s: float = 5.0) -> bool:
        """Stop every task of the cgroup; True once the kernel reports it frozen."""
        control = _CONTROLS[self.version]
        try:
            write_control(self.path, control.freeze_file, control.freeze_value)
        except OSError:
            return False
        deadline = time.monotonic() + timeout_s
        while not self.frozen():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        return True

    def frozen(self) -> bool:
        """Whether the kernel reports every task of the cgroup stopped."""
        control = _CONTROLS[self.version]
        try:
            said = read_control(os.path.join(self.path, control.state_file))
        except OSError:
            return False
        return control.is_frozen(said)

    def thaw(self) -> None:
        """Let the cgroup's tasks run again."""
        thaw(self.path)

    def close(self, timeout_s: float = 2.0) -> None:
        """Kill whatever is left in the cgroup (thawing it) and remove it (bounded)."""
        kill_and_remove(self.path, timeout_s)


@functools.lru_cache(maxsize=1)
def probe_freezer() -> tuple[bool, str, str | None]:
    """Return ``(available, detail, via)``: can this process make, join and freeze a cgroup."""
    if freezer_parent() is None:
        return False, "no writable freezer cgroup (v1 freezer or a v2 cgroup of our own)", None
    try:
        group = FreezerCgroup.create()
    except OSError as e:
        return False, f"cannot create a freezer cgroup: {e.strerror or e}", None
    try:
        proc = subprocess.Popen(
            [*join_argv(group), "/bin/sleep", "10"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 5
        while not group.pids() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        ok = bool(group.pids()) and group.freeze(5.0)
        group.close()
        proc.wait(10)
    except (OSError, subprocess.SubprocessError) as e:
        group.close()
        return False, f"cannot freeze a cgroup: {e}", None
    if not ok:
        return False, "cannot freeze a cgroup", None
    return True, "ok", f"cgroup_{group.version}"
