"""A tool process's resource limits: per process (``setrlimit``) and per tool (cgroups).

:class:`Limits` is what a caller asks; :func:`rlimit_values` turns it into the ``setrlimit``
values of one run, applied by the prefix's first shell (:func:`ulimit_script`) or ``prlimit``
(:func:`prlimit_argv`), or without it in the child before exec (:func:`apply_rlimits`);
:func:`cgroup_limits` keeps the cgroup limits whose layer works here. The one launcher
(:mod:`runtime.guard.sandbox.launcher`) applies them.
"""

from __future__ import annotations

import functools
import math
import resource
from collections.abc import Callable, Mapping

import msgspec

from runtime.guard.sandbox import cgroupfs, cgroups
from runtime.guard.sandbox.kernel_guards import Layers
from runtime.guard.sandbox.layers import executables

__all__ = [
    "Limits",
    "apply_rlimits",
    "cgroup_layers",
    "cgroup_limits",
    "prlimit_argv",
    "rlimit_steps",
    "rlimit_values",
    "ulimit_script",
]


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    """Resource limits applied to every process of a tool (``setrlimit``, the pids cgroup)."""

    cpu_seconds: int | None = None
    """CPU seconds per process; ``None``: the timeout rounded up, plus one."""
    address_space_bytes: int = 2 * 1024**3
    """Virtual memory per process (``RLIMIT_AS``)."""
    file_size_bytes: int = 1024**3
    """Largest file a process may write (``RLIMIT_FSIZE``)."""
    open_files: int = 1024
    """Open file descriptors per process (``RLIMIT_NOFILE``)."""
    max_processes: int = 512
    """Tasks (processes and threads) of the whole tool at once (``pids`` cgroup)."""
    memory_bytes: int | None = None
    """Memory of the whole tool, tmpfs pages included (``memory`` cgroup); ``None``: none."""
    cpu_cores: float | None = None
    """CPU of the whole tool, in cores (``cpu`` cgroup quota); ``None``: none."""


def rlimit_values(limits: Limits, timeout_s: float) -> dict[int, tuple[int, int]]:
    """Compute the ``setrlimit`` values for a run: resource -> (soft, hard)."""
    cpu = limits.cpu_seconds or math.ceil(timeout_s) + 1
    wanted = {
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_AS: (limits.address_space_bytes, limits.address_space_bytes),
        resource.RLIMIT_FSIZE: (limits.file_size_bytes, limits.file_size_bytes),
        resource.RLIMIT_NOFILE: (limits.open_files, limits.open_files),
        resource.RLIMIT_CORE: (0, 0),
    }
    values: dict[int, tuple[int, int]] = {}
    for which, (soft, hard) in wanted.items():
        current = resource.getrlimit(which)[1]  # an unprivileged process cannot raise it
        top = hard if current == resource.RLIM_INFINITY else min(hard, current)
        values[which] = (min(soft, top), top)
    return values


def prlimit_argv(values: Mapping[int, tuple[int, int]]) -> list[str]:
    """Build the ``prlimit`` prefix applying ``values``."""
    names = {
        resource.RLIMIT_CPU: "--cpu",
        resource.RLIMIT_AS: "--as",
        resource.RLIMIT_FSIZE: "--fsize",
        resource.RLIMIT_NOFILE: "--nofile",
        resource.RLIMIT_CORE: "--core",
    }
    return [
        executables()["prlimit"],
        *(f"{names[r]}={soft}:{hard}" for r, (soft, hard) in values.items()),
        "--",
    ]


_ULIMIT: dict[int, tuple[str, int]] = {
    resource.RLIMIT_CPU: ("-t", 1),
    resource.RLIMIT_AS: ("-v", 1024),
    resource.RLIMIT_FSIZE: ("-f", 512),
    resource.RLIMIT_NOFILE: ("-n", 1),
    resource.RLIMIT_CORE: ("-c", 512),
}
"""``/bin/sh``'s ``ulimit`` option and unit for each resource (POSIX's 512-byte blocks for
``-f``, kibibytes for ``-v``, as dash, bash as ``sh`` and busybox count them)."""


def ulimit_script(values: Mapping[int, tuple[int, int]]) -> str | None:
    """Shell commands setting ``values`` on the shell itself, or None when one cannot be.

    The prefix's first shell (the cgroup join) runs them before it execs the rest, as
    ``prlimit`` did on itself, one exec fewer. None when a value is not a whole number of
    its unit (the shell would round it) or a resource has no option: ``prlimit`` then.
    Each is set whole (soft and hard) first, then a lower soft limit, so a soft limit is
    never above its hard one.
    """
    commands: list[str] = []
    for which, (soft, hard) in values.items():
        option, unit = _ULIMIT.get(which, ("", 0))
        if not option or soft < 0 or soft > hard or soft % unit or hard % unit:
            return None
        commands.append(f"ulimit {option} {hard // unit}")
        if soft != hard:
            commands.append(f"ulimit -S {option} {soft // unit}")
    return " && ".join(commands) if commands else None


def rlimit_steps(
    values: Mapping[int, tuple[int, int]], via: str | None
) -> tuple[str | None, list[str], Callable[[], None] | None]:
    """How a prefix applies ``values``: ``(ulimit script, prefix argv, preexec)``.

    ``via`` is ``probe_layers``' ``rlimits.via``. Where ``prlimit`` is, the prefix's first
    shell (the cgroup join) runs :func:`ulimit_script` itself, one exec fewer, or, for a
    value the shell cannot express exactly, ``prlimit`` sets them on itself and execs the
    rest; without it they are set in the child between ``fork`` and ``exec``.
    """
    if via == "prlimit":
        script = ulimit_script(values)
        return (script, [], None) if script is not None else (None, prlimit_argv(values), None)
    return None, [], functools.partial(apply_rlimits, values)


def cgroup_limits(limits: Limits, layers: Layers) -> cgroups.CgroupLimits:
    """The cgroup limits of a run: ``limits``, less those whose layer is unavailable here."""
    return cgroups.CgroupLimits(
        max_pids=limits.max_processes,
        memory_bytes=limits.memory_bytes if layers["memory_limit"]["available"] else None,
        cpu_cores=limits.cpu_cores if layers["cpu_limit"]["available"] else None,
    )


def cgroup_layers(group: cgroups.ToolCgroup) -> list[str]:
    """The layer names a run's cgroup applies (``pids_limit``, ``memory_limit``, ...)."""
    return [cgroups.LAYER_NAMES[c] for c in cgroupfs.CONTROLLERS if c in group.dirs]


def apply_rlimits(values: Mapping[int, tuple[int, int]]) -> None:
    """Set rlimits in the child before exec (used only when ``prlimit`` is missing)."""
    for which, limit in values.items():
        resource.setrlimit(which, limit)
