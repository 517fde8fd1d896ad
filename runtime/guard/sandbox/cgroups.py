"""Per-call limits on tasks, memory and CPU: one child cgroup per run, per controller.

``RLIMIT_NPROC`` counts every process of a user (and is not enforced for root), and
``RLIMIT_AS`` bounds one process's address space, not a call's memory. Cgroups bound the
whole call: each run gets its own cgroup under the runtime's own, in each controller this
process may write (cgroup v1's ``pids``, ``memory`` and ``cpu`` hierarchies, or the v2
unified one where they are delegated), with the limits written before the command starts.
A fork bomb then fails with ``EAGAIN``, a memory hog is killed by the OOM killer inside its
cgroup (:meth:`ToolCgroup.oom_kills` tells), a busy loop gets its share of CPU.
:func:`probe_controllers` tries each controller once per process; one that cannot be had
is reported unavailable (``docs/security-commands.md``). The cgroup files:
:mod:`runtime.guard.sandbox.cgroupfs`; the freezer: :mod:`runtime.guard.sandbox.freezer`.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import time
from collections.abc import Callable

import msgspec

from runtime.guard.sandbox.cgroupfs import (
    CONTROLLERS,
    Controller,
    Version,
    freezer_parent,
    fresh_name,
    join_argv,
    kill_and_remove,
    make_cgroup,
    parent_dir,
    remove_stale,
)

__all__ = [
    "CPU_PERIOD_US",
    "LAYER_NAMES",
    "CgroupLimits",
    "ToolCgroup",
    "probe",
    "probe_controllers",
    "sweep_stale",
]

LAYER_NAMES: dict[Controller, str] = {
    "pids": "pids_limit",
    "memory": "memory_limit",
    "cpu": "cpu_limit",
}
"""The ``probe_layers`` entry that reports each controller's limit."""

CPU_PERIOD_US = 100_000
"""The CFS period the CPU quota is a share of (100 ms, the kernel's default)."""


class CgroupLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The limits of one call's cgroup."""

    max_pids: int
    """Tasks (processes and threads) at once (``pids.max``)."""
    memory_bytes: int | None = None
    """Memory of the whole call, page cache and tmpfs included; ``None``: no limit."""
    cpu_cores: float | None = None
    """CPU time per wall time, in cores (``1.5``: one and a half); ``None``: no limit."""

    def asked(self, controller: Controller) -> float | None:
        """The limit asked of ``controller`` (``None``: none)."""
        return {"pids": self.max_pids, "memory": self.memory_bytes, "cpu": self.cpu_cores}[
            controller
        ]


def sweep_stale(*, any_owner: bool = False, wait_s: float = 1.0) -> dict[str, list[int]]:
    """Clean this home's cgroups of dead owners (``any_owner``: all of them) in every hierarchy.

    The freezer's first: a frozen process dies of its SIGKILL only once thawed, and until
    then holds its other cgroups. Returns each removed cgroup's path and what it held.
    """
    parents = [freezer_parent(), *map(parent_dir, CONTROLLERS)]
    removed: dict[str, list[int]] = {}
    for parent in dict.fromkeys(where[0] for where in parents if where):
        for name, held in remove_stale(parent, any_owner=any_owner, wait_s=wait_s).items():
            removed[os.path.join(parent, name)] = held
    return removed


def _limit_files(
    controller: Controller, version: Version, limits: CgroupLimits
) -> list[tuple[str, str, bool]]:
    """``(file, value, required)`` to write for ``controller``; ``[]``: no limit asked."""
    value = limits.asked(controller)
    if value is None:
        return []
    return _LIMIT_FILES[controller, version](value)


def _quota(cores: float) -> int:
    """The CPU quota per :data:`CPU_PERIOD_US` for ``cores`` (the kernel's floor: 1 ms)."""
    return max(1000, math.ceil(cores * CPU_PERIOD_US))


def _pids_files(value: float) -> list[tuple[str, str, bool]]:
    return [("pids.max", str(value), True)]


_LIMIT_FILES: dict[tuple[Controller, Version], Callable[[float], list[tuple[str, str, bool]]]] = {
    ("pids", "v1"): _pids_files,
    ("pids", "v2"): _pids_files,
    # v1's memsw (memory + swap) must stay >= the memory limit
    ("memory", "v1"): lambda value: [
        ("memory.limit_in_bytes", str(value), True),
        ("memory.memsw.limit_in_bytes", str(value), False),
    ],
    ("memory", "v2"): lambda value: [
        ("memory.max", str(value), True),
        ("memory.swap.max", "0", False),
    ],
    ("cpu", "v1"): lambda value: [
        ("cpu.cfs_period_us", str(CPU_PERIOD_US), True),
        ("cpu.cfs_quota_us", str(_quota(value)), True),
    ],
    ("cpu", "v2"): lambda value: [("cpu.max", f"{_quota(value)} {CPU_PERIOD_US}", True)],
}
"""The files that set each controller's limit (its value asked) on each cgroup version."""


class ToolCgroup:
    """One run's cgroups: create them, put the command in with :func:`join_argv`, then close."""

    def __init__(self, dirs: dict[Controller, str], limits: CgroupLimits, version: Version) -> None:
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
        name = fresh_name()
        dirs: dict[Controller, str] = {}
        skipped: dict[Controller, str] = {}
        version: Version = "v1"
        try:
            for controller in controllers:
                where = parent_dir(controller)
                files = _limit_files(controller, where[1] if where else "v1", limits)
                if not files:
                    continue
                if where is None:
                    if controller == "pids":
                        raise OSError("no writable pids cgroup hierarchy")
                    skipped[controller] = f"no writable {controller} cgroup hierarchy"
                    continue
                version = where[1]
                remove_stale(where[0])
                try:
                    dirs[controller] = make_cgroup(where[0], name, files)
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
        """Kill whatever is left in the cgroups and remove them, ``pids`` first (bounded)."""
        deadline = time.monotonic() + timeout_s
        for path in sorted(set(self.dirs.values()), key=lambda d: d != self.dirs.get("pids")):
            kill_and_remove(path, deadline - time.monotonic())


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
            if parent_dir("pids") is None
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
