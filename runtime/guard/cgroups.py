"""A process-count limit per command: one child cgroup of the ``pids`` controller per run.

``RLIMIT_NPROC`` counts every process of a user (and is not enforced for root), so it
cannot bound one command. The ``pids`` controller can: each run gets its own cgroup under
the runtime's own (cgroup v1 ``pids`` hierarchy, or the v2 unified one when its ``pids``
controller is enabled for our subtree), with ``pids.max`` set before the command starts.
A fork bomb then fails with ``EAGAIN`` inside that cgroup while the daemon and every other
call keep working. The command joins the cgroup through :func:`join_argv` (a shell that
writes its own pid to ``cgroup.procs`` and then execs the rest), so nothing runs between
``fork`` and ``exec`` in the runtime.

A long-lived tool process (an MCP stdio server) also gets a :class:`FreezerCgroup` (the v1
``freezer`` hierarchy's ``freezer.state``, or v2's ``cgroup.freeze``) so the launcher can
stop its whole tree between calls and let it run only while a call is in flight.

:func:`probe` tries it once per process; where no writable ``pids`` hierarchy exists (an
unprivileged user without a delegated cgroup), the layer is reported unavailable and
commands run without it (``docs/security-commands.md``); :func:`probe_freezer` does the
same for the freezer.

A runner killed while its tools ran cannot remove their cgroups: the next cgroup made
under the same parent kills what is left in those of dead owners (thawing a frozen one, so
its tasks can die) and removes them (:func:`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
import uuid

__all__ = [
    "FreezerCgroup",
    "PidsCgroup",
    "join_argv",
    "probe",
    "probe_freezer",
    "sweep_stale",
]

_PREFIX = "roost-"
_JOIN_NAME = "roost-cgroup-join"
_JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
_READ_MAX = 1 << 20


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``(mount point, fstype, super options)`` of every cgroup mount."""
    found = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                    found.append((fields[4], rest[0], set(rest[2].split(","))))
    except OSError:
        pass
    return found


def _own_cgroups() -> dict[str, str]:
    """Controller list (``"pids"``, ``""`` for v2) -> this process's cgroup path."""
    own: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for controller in parts[1].split(",") if parts[1] else [""]:
                        own[controller] = parts[2]
    except OSError:
        pass
    return own


def _parent_dir(controller: str = "pids") -> tuple[str, str] | None:
    """The directory to create call cgroups in for ``controller``, and its hierarchy.

    ``controller`` is ``pids`` or ``freezer``; v2's freezer (``cgroup.freeze``) is in every
    non-root cgroup, so it needs no enabled controller.
    """
    own = _own_cgroups()
    for mount, fstype, options in _mounts():
        if fstype == "cgroup" and controller in options and controller in own:
            return os.path.join(mount, own[controller].lstrip("/")), "v1"
    for mount, fstype, _ in _mounts():
        if fstype == "cgroup2" and "" in own:
            base = os.path.join(mount, own[""].lstrip("/"))
            if controller == "freezer":
                if os.access(base, os.W_OK):
                    return base, "v2"
                continue
            try:
                with open(os.path.join(base, "cgroup.subtree_control"), encoding="ascii") as f:
                    if controller in f.read().split():
                        return base, "v2"
            except OSError:
                continue
    return None


def _read(path: str) -> str:
    """A cgroup file's text (bounded; cgroupfs files are the kernel's, never a tool's)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        return os.read(fd, _READ_MAX).decode("ascii", "replace")
    finally:
        os.close(fd)


def _tasks(path: str) -> list[int]:
    try:
        return [int(x) for x in _read(os.path.join(path, "cgroup.procs")).split()]
    except (OSError, ValueError):
        return []


def _kill_and_remove(path: str, timeout_s: float) -> bool:
    """SIGKILL every task of the cgroup at ``path`` (thawing it first) and remove it."""
    deadline = time.monotonic() + timeout_s
    while True:
        for pid in _tasks(path):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _thaw(path)  # a frozen task dies of its SIGKILL only once thawed (cgroup v1)
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def _thaw(path: str) -> None:
    for name, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
        target = os.path.join(path, name)
        if os.path.exists(target):
            with contextlib.suppress(OSError), open(target, "w", encoding="ascii") as f:
                f.write(value)


def _remove_stale(parent: str) -> list[str]:
    """Kill what is left in the call cgroups of processes that are gone, and remove them.

    A runner killed during a command, or while its MCP server was frozen, cannot remove its
    cgroups; the next one made under the same parent does. Returns what was removed.
    """
    removed: list[str] = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        owner = name[len(_PREFIX) :].split("-", 1)[0] if name.startswith(_PREFIX) else ""
        if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
            continue
        if _kill_and_remove(os.path.join(parent, name), 1.0):
            removed.append(name)
    return removed


def sweep_stale() -> list[str]:
    """Clean the call cgroups of dead owners in every hierarchy Roost uses; what was removed."""
    removed: list[str] = []
    for controller in ("pids", "freezer"):
        where = _parent_dir(controller)
        if where is not None:
            removed += _remove_stale(where[0])
    return removed


def _make(controller: str) -> tuple[str, str]:
    where = _parent_dir(controller)
    if where is None:
        raise OSError(f"no writable {controller} cgroup hierarchy")
    _remove_stale(where[0])
    path = os.path.join(where[0], f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")
    os.mkdir(path, 0o755)
    return path, where[1]


class PidsCgroup:
    """One run's cgroup: create it, put the command in with :func:`join_argv`, then close."""

    def __init__(self, path: str, max_pids: int) -> None:
        self.path = path
        """The cgroup's directory."""
        self.max_pids = max_pids
        """Its ``pids.max``."""

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup:
        """Make a fresh cgroup limited to ``max_pids`` tasks; ``OSError`` when impossible."""
        path, _ = _make("pids")
        try:
            with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as f:
                f.write(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            raise
        return cls(path, max_pids)

    @property
    def procs_file(self) -> str:
        """The file a process writes its pid to in order to join."""
        return os.path.join(self.path, "cgroup.procs")

    def pids(self) -> list[int]:
        """Processes in the cgroup now."""
        return _tasks(self.path)

    def peak_refused(self) -> int:
        """How many forks the limit refused (``pids.events`` ``max``), 0 when unknown."""
        try:
            for line in _read(os.path.join(self.path, "pids.events")).splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def close(self, timeout_s: float = 2.0) -> None:
        """Kill whatever is left in the cgroup and remove it (best effort, bounded)."""
        _kill_and_remove(self.path, timeout_s)


class FreezerCgroup:
    """A long-lived tool's freezer cgroup: its whole tree runs only while it is thawed."""

    def __init__(self, path: str, hierarchy: str) -> None:
        self.path = path
        """The cgroup's directory."""
        self.hierarchy = hierarchy
        """``v1`` (``freezer.state``) or ``v2`` (``cgroup.freeze``)."""

    @classmethod
    def create(cls) -> FreezerCgroup:
        """Make a fresh, thawed freezer cgroup; ``OSError`` when impossible."""
        path, hierarchy = _make("freezer")
        return cls(path, hierarchy)

    @property
    def procs_file(self) -> str:
        """The file a process writes its pid to in order to join."""
        return os.path.join(self.path, "cgroup.procs")

    def pids(self) -> list[int]:
        """Processes in the cgroup now."""
        return _tasks(self.path)

    def freeze(self, timeout_s: float = 5.0) -> bool:
        """Stop every task of the cgroup; True once the kernel reports it frozen."""
        if self.hierarchy == "v1":
            target, value = "freezer.state", "FROZEN"
        else:
            target, value = "cgroup.freeze", "1"
        try:
            with open(os.path.join(self.path, target), "w", encoding="ascii") as f:
                f.write(value)
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
        try:
            if self.hierarchy == "v1":
                return _read(os.path.join(self.path, "freezer.state")).strip() == "FROZEN"
            return "frozen 1" in _read(os.path.join(self.path, "cgroup.events")).splitlines()
        except OSError:
            return False

    def thaw(self) -> None:
        """Let the cgroup's tasks run again."""
        _thaw(self.path)

    def close(self, timeout_s: float = 2.0) -> None:
        """Kill whatever is left in the cgroup (thawing it) and remove it (bounded)."""
        _kill_and_remove(self.path, timeout_s)


def join_argv(*groups: PidsCgroup | FreezerCgroup) -> list[str]:
    """The prefix that moves the process into every one of ``groups`` before it execs."""
    return ["/bin/sh", "-c", _JOIN_SCRIPT, _JOIN_NAME, *(g.procs_file for g in groups), "--"]


@functools.lru_cache(maxsize=1)
def probe() -> tuple[bool, str, str | None]:
    """Return ``(available, detail, via)``: can this process make and join a limited cgroup."""
    where = _parent_dir()
    if where is None:
        return False, "no writable pids cgroup hierarchy (v1 pids or v2 with pids delegated)", None
    try:
        group = PidsCgroup.create(8)
    except OSError as e:
        return False, f"cannot create a pids cgroup: {e.strerror or e}", None
    try:
        joined = subprocess.run(
            [*join_argv(group), "/bin/true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"cannot join a pids cgroup: {e}", None
    finally:
        group.close()
    if joined.returncode != 0:
        return False, "cannot join a pids cgroup", None
    return True, "ok", f"cgroup_{where[1]}"


@functools.lru_cache(maxsize=1)
def probe_freezer() -> tuple[bool, str, str | None]:
    """Return ``(available, detail, via)``: can this process make, join and freeze a cgroup."""
    if _parent_dir("freezer") is None:
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
    return True, "ok", f"cgroup_{group.hierarchy}"
