"""Per-call limits on tasks, memory and CPU: one child cgroup per run, per controller.

``RLIMIT_NPROC`` counts every process of a user (and is not enforced for root), and
``RLIMIT_AS`` bounds one process's address space, not a call's memory (ten processes, or a
tmpfs, hold ten times more). Cgroups bound the whole call: each run gets its own cgroup
under the runtime's own, in each controller this process may write -- cgroup v1's ``pids``,
``memory`` and ``cpu`` hierarchies, or one directory of the v2 unified hierarchy where those
controllers are delegated to our subtree -- with the limits written before the command
starts: ``pids.max``; ``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes`` (v1) or
``memory.max`` and ``memory.swap.max`` (v2); ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` (v1)
or ``cpu.max`` (v2). A fork bomb then fails with ``EAGAIN``, a memory hog is killed by the
kernel's OOM killer inside its cgroup (:meth:`ToolCgroup.oom_kills` tells), and a busy loop
gets its share of CPU, while the daemon and every other call keep working. Pages of the
view's tmpfs are charged to the cgroup of the process that wrote them. The command joins
through :func:`join_argv` (a shell that writes its own pid to each ``cgroup.procs`` and then
execs the rest), so nothing runs between ``fork`` and ``exec`` in the runtime.

:func:`probe_controllers` tries each controller once per process; where one cannot be had
(an unprivileged user without a delegated cgroup), that limit is reported unavailable and
commands run without it (``docs/security-commands.md``).

A long-lived tool process (an MCP stdio server) also gets a :class:`FreezerCgroup` (the v1
``freezer`` hierarchy's ``freezer.state``, or v2's ``cgroup.freeze``), so the launcher can
stop its whole tree between calls; :func:`probe_freezer` says whether one can be had. A
runner killed while its tools ran cannot remove their cgroups: the next cgroup made under
the same parent kills what is left in those of dead owners (thawing a frozen one first, so
its tasks can die of it) and removes them (:func:`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import subprocess
import time
import uuid
from typing import Literal

import msgspec

__all__ = [
    "CONTROLLERS",
    "LAYER_NAMES",
    "CgroupLimits",
    "Controller",
    "FreezerCgroup",
    "ToolCgroup",
    "join_argv",
    "probe",
    "probe_controllers",
    "probe_freezer",
    "sweep_stale",
]

Controller = Literal["pids", "memory", "cpu"]
"""A cgroup controller a call's limits use."""

CONTROLLERS: tuple[Controller, ...] = ("pids", "memory", "cpu")
"""The controllers a call's cgroup is made in, where each can be had."""

LAYER_NAMES: dict[Controller, str] = {
    "pids": "pids_limit",
    "memory": "memory_limit",
    "cpu": "cpu_limit",
}
"""The ``probe_layers`` entry that reports each controller's limit."""

CPU_PERIOD_US = 100_000
"""The CFS period the CPU quota is a share of (100 ms, the kernel's default)."""

_PREFIX = "roost-"
_JOIN_NAME = "roost-cgroup-join"
_JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


class CgroupLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The limits of one call's cgroup."""

    max_pids: int
    """Tasks (processes and threads) at once (``pids.max``)."""
    memory_bytes: int | None = None
    """Memory of the whole call, page cache and tmpfs included; ``None``: no limit."""
    cpu_cores: float | None = None
    """CPU time per wall time, in cores (``1.5``: one and a half); ``None``: no limit."""


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


def _parent_dir(controller: Controller = "pids") -> tuple[str, str] | None:
    """The directory to create call cgroups of ``controller`` in, and ``v1``/``v2``."""
    own = _own_cgroups()
    for mount, fstype, options in _mounts():
        if fstype == "cgroup" and controller in options and controller in own:
            return os.path.join(mount, own[controller].lstrip("/")), "v1"
    for mount, fstype, _ in _mounts():
        if fstype == "cgroup2" and "" in own:
            base = os.path.join(mount, own[""].lstrip("/"))
            try:
                with open(os.path.join(base, "cgroup.subtree_control"), encoding="ascii") as f:
                    if controller in f.read().split():
                        return base, "v2"
            except OSError:
                continue
    return None


def _freezer_parent() -> tuple[str, str] | None:
    """The directory to create freezer cgroups in, and ``v1``/``v2`` (v2 needs no controller)."""
    own = _own_cgroups()
    for mount, fstype, options in _mounts():
        if fstype == "cgroup" and "freezer" in options and "freezer" in own:
            return os.path.join(mount, own["freezer"].lstrip("/")), "v1"
    for mount, fstype, _ in _mounts():
        if fstype == "cgroup2" and "" in own:
            base = os.path.join(mount, own[""].lstrip("/"))
            if os.access(base, os.W_OK):
                return base, "v2"
    return None


def _read(path: str) -> str:
    """A cgroup file's text (bounded; cgroupfs files are the kernel's, never a tool's)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        return os.read(fd, 1 << 20).decode("ascii", "replace")
    finally:
        os.close(fd)


def _tasks(path: str) -> list[int]:
    try:
        return [int(x) for x in _read(os.path.join(path, "cgroup.procs")).split()]
    except (OSError, ValueError):
        return []


def _thaw(path: str) -> None:
    for name, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
        if os.path.exists(os.path.join(path, name)):
            with contextlib.suppress(OSError):
                _write(path, name, value)


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
    parents = {where for where in (*map(_parent_dir, CONTROLLERS), _freezer_parent()) if where}
    return [name for parent, _ in sorted(parents) for name in _remove_stale(parent)]


def _write(directory: str, name: str, value: str) -> None:
    with open(os.path.join(directory, name), "w", encoding="ascii") as f:
        f.write(value)


def _limit_files(
    controller: Controller, version: str, limits: CgroupLimits
) -> list[tuple[str, str, bool]]:
    """``(file, value, required)`` to write for ``controller``; ``[]``: no limit asked."""
    if controller == "pids":
        return [("pids.max", str(limits.max_pids), True)]
    if controller == "memory" and limits.memory_bytes is not None:
        value = str(limits.memory_bytes)
        if version == "v1":  # memsw (memory + swap) must stay >= the memory limit
            return [
                ("memory.limit_in_bytes", value, True),
                ("memory.memsw.limit_in_bytes", value, False),
            ]
        return [("memory.max", value, True), ("memory.swap.max", "0", False)]
    if controller == "cpu" and limits.cpu_cores is not None:
        quota = max(1000, math.ceil(limits.cpu_cores * CPU_PERIOD_US))
        if version == "v1":
            return [
                ("cpu.cfs_period_us", str(CPU_PERIOD_US), True),
                ("cpu.cfs_quota_us", str(quota), True),
            ]
        return [("cpu.max", f"{quota} {CPU_PERIOD_US}", True)]
    return []


def _make(parent: str, name: str, files: list[tuple[str, str, bool]]) -> str:
    """Create ``parent/name`` (or reuse it: v2 holds every controller in one) and limit it."""
    path = os.path.join(parent, name)
    made = False
    try:
        os.mkdir(path, 0o755)
        made = True
    except FileExistsError:
        pass
    try:
        for file, value, required in files:
            try:
                _write(path, file, value)
            except OSError:
                if required:
                    raise
    except OSError:
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise
    return path


class ToolCgroup:
    """One run's cgroups: create them, put the command in with :func:`join_argv`, then close."""

    def __init__(self, dirs: dict[Controller, str], limits: CgroupLimits, version: str) -> None:
        self.dirs = dirs
        """Controller -> the run's cgroup directory in it (one directory for all on v2)."""
        self.limits = limits
        """The limits written."""
        self.version = version
        """``v1`` or ``v2``."""
        self.skipped: dict[Controller, str] = {}
        """Controllers asked for but not had, and why."""

    @classmethod
    def create(
        cls, limits: CgroupLimits, controllers: tuple[Controller, ...] = CONTROLLERS
    ) -> ToolCgroup:
        """Make a fresh cgroup with ``limits`` in each of ``controllers`` that can be had.

        The ``pids`` cgroup is required (``OSError`` when it cannot be made); a memory or
        CPU controller that is missing or refuses its limit is left out and named in
        :attr:`skipped`. A limit that is ``None`` is not applied.
        """
        name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        dirs: dict[Controller, str] = {}
        skipped: dict[Controller, str] = {}
        version = "v1"
        try:
            for controller in controllers:
                where = _parent_dir(controller)
                files = _limit_files(controller, where[1] if where else "v1", limits)
                if not files:
                    continue
                if where is None:
                    if controller == "pids":
                        raise OSError("no writable pids cgroup hierarchy")
                    skipped[controller] = f"no writable {controller} cgroup hierarchy"
                    continue
                version = where[1]
                _remove_stale(where[0])
                try:
                    dirs[controller] = _make(where[0], name, files)
                except OSError as e:
                    if controller == "pids":
                        raise
                    skipped[controller] = f"cannot limit {controller}: {e.strerror or e}"
        except OSError:
            cls(dirs, limits, version).close()
            raise
        group = cls(dirs, limits, version)
        group.skipped = skipped
        return group

    @property
    def path(self) -> str:
        """The ``pids`` cgroup's directory."""
        return self.dirs["pids"]

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to in order to join (one per directory)."""
        return [os.path.join(d, "cgroup.procs") for d in sorted(set(self.dirs.values()))]

    def pids(self) -> list[int]:
        """Tasks in the cgroup now."""
        try:
            with open(os.path.join(self.path, "cgroup.procs"), encoding="ascii") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def _counter(self, controller: Controller, file: str, key: str) -> int:
        if controller not in self.dirs:
            return 0
        try:
            with open(os.path.join(self.dirs[controller], file), encoding="ascii") as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def peak_refused(self) -> int:
        """How many forks the limit refused (``pids.events`` ``max``), 0 when unknown."""
        return self._counter("pids", "pids.events", "max")

    def oom_kills(self) -> int:
        """Processes the kernel killed for the memory limit, 0 when unknown or not limited.

        Read from v1 ``memory.oom_control`` or v2 ``memory.events`` (their ``oom_kill``).
        """
        return self._counter("memory", "memory.oom_control", "oom_kill") or self._counter(
            "memory", "memory.events", "oom_kill"
        )

    def close(self, timeout_s: float = 2.0) -> None:
        """Kill whatever is left in the cgroup and remove it (best effort, bounded)."""
        deadline = time.monotonic() + timeout_s
        for path in sorted(set(self.dirs.values()), key=lambda d: d != self.dirs.get("pids")):
            while True:
                if path == self.dirs.get("pids"):
                    for pid in self.pids():
                        with contextlib.suppress(OSError):
                            os.kill(pid, signal.SIGKILL)
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.01)


class FreezerCgroup:
    """A long-lived tool's freezer cgroup: its whole tree runs only while it is thawed."""

    def __init__(self, path: str, version: str) -> None:
        self.path = path
        """The cgroup's directory."""
        self.version = version
        """``v1`` (``freezer.state``) or ``v2`` (``cgroup.freeze``)."""

    @classmethod
    def create(cls) -> FreezerCgroup:
        """Make a fresh, thawed freezer cgroup; ``OSError`` when impossible."""
        where = _freezer_parent()
        if where is None:
            raise OSError("no writable freezer cgroup")
        _remove_stale(where[0])
        name = f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        return cls(_make(where[0], name, []), where[1])

    @property
    def procs_files(self) -> list[str]:
        """The file a process writes its pid to in order to join."""
        return [os.path.join(self.path, "cgroup.procs")]

    def pids(self) -> list[int]:
        """Processes in the cgroup now."""
        return _tasks(self.path)

    def freeze(self, timeout_s: float = 5.0) -> bool:
        """Stop every task of the cgroup; True once the kernel reports it frozen."""
        target, value = (
            ("freezer.state", "FROZEN") if self.version == "v1" else ("cgroup.freeze", "1")
        )
        try:
            _write(self.path, target, value)
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
            if self.version == "v1":
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


def join_argv(*groups: ToolCgroup | FreezerCgroup) -> list[str]:
    """The prefix that moves the process into every one of ``groups`` before it execs."""
    files = [f for group in groups for f in group.procs_files]
    return ["/bin/sh", "-c", _JOIN_SCRIPT, _JOIN_NAME, *files, "--"]


@functools.lru_cache(maxsize=1)
def probe_controllers() -> dict[Controller, tuple[bool, str, str | None]]:
    """``controller -> (available, detail, via)``: can this process limit a call with it.

    One trial cgroup with every controller is made and joined by ``/bin/true``.
    """
    trial = CgroupLimits(max_pids=8, memory_bytes=64 * 1024**2, cpu_cores=0.5)
    try:
        group = ToolCgroup.create(trial)
    except OSError as e:
        why = (
            "no writable pids cgroup hierarchy (v1 pids or v2 with pids delegated)"
            if _parent_dir("pids") is None
            else f"cannot create a pids cgroup: {e.strerror or e}"
        )
        return {
            c: (False, why if c == "pids" else "needs the pids cgroup", None) for c in CONTROLLERS
        }
    try:
        joined = subprocess.run(
            [*join_argv(group), "/bin/true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
        ok, detail = joined.returncode == 0, "ok" if joined.returncode == 0 else "cannot join"
    except (OSError, subprocess.SubprocessError) as e:
        ok, detail = False, f"cannot join: {e}"
    finally:
        group.close()
    via = f"cgroup_{group.version}"
    found: dict[Controller, tuple[bool, str, str | None]] = {}
    for controller in CONTROLLERS:
        if controller in group.skipped:
            found[controller] = (False, group.skipped[controller], None)
        else:
            found[controller] = (
                ok,
                detail if ok else f"{detail} a {controller} cgroup",
                via if ok else None,
            )
    return found


def probe() -> tuple[bool, str, str | None]:
    """Return ``(available, detail, via)``: can this process make and join a limited cgroup."""
    return probe_controllers()["pids"]


@functools.lru_cache(maxsize=1)
def probe_freezer() -> tuple[bool, str, str | None]:
    """Return ``(available, detail, via)``: can this process make, join and freeze a cgroup."""
    if _freezer_parent() is None:
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
