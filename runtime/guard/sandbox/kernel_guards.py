"""Probing what holds a tool process's privilege down, and saying what is missing.

:func:`probe` finds the cgroup limits (``pids_limit``, ``memory_limit``, ``cpu_limit``,
through :func:`runtime.guard.sandbox.cgroups.probe_controllers`) and the guards that come with
bubblewrap (``seccomp``, ``no_new_privs``, ``proc_masks``, ``tmpfs_size``) by running
bubblewrap once with the seccomp filter and a sized tmpfs and reading what the kernel says
of the process inside (``/proc/self/status``: ``Seccomp: 2``, ``NoNewPrivs: 1``,
``CapEff: 0``; ``/proc/sys`` not writable; the size of ``/tmp``). An unavailable entry's
``detail`` says why and then what a command may do without it, so ``diagnostics`` tells
the operator what the missing layer means. :func:`runtime.guard.sandbox.layers.probe_layers`
merges the entries into its report.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from runtime.guard.sandbox import cgroups, seccomp
from runtime.guard.sandbox.view import MASKED_PATHS, PROC_READ_ONLY

__all__ = ["PROBE_TMPFS_BYTES", "WITHOUT", "probe"]

PROBE_TMPFS_BYTES = 4 * 1024**2
"""The tmpfs size the probe asks bubblewrap for (the probe checks ``/tmp`` is no larger)."""

WITHOUT: dict[str, str] = {
    "pids_limit": "a command may start processes until the host's own limits",
    "memory_limit": "a command's memory is bounded per process (RLIMIT_AS) and its /tmp by "
    "tool_tmpfs_bytes, not per call",
    "cpu_limit": "a command may use every core until its timeout (RLIMIT_CPU per process)",
    "seccomp": "commands run without the syscall filter: keyrings, ptrace, mount, bpf, "
    "io_uring and set-id or device files are refused only by dropped capabilities",
    "no_new_privs": "a set-uid program inside the view could raise a command's privileges",
    "proc_masks": "a command started by a root daemon could write /proc/sys",
    "tmpfs_size": "/tmp, /var/tmp and /run of a command may each grow to half the host's memory",
}
"""What a command may do where a layer is missing (appended to the layer's ``detail``)."""

_TIMEOUT_S = 10.0
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}

# Prints what the kernel says of the process bubblewrap started, and whether the control
# files are writable and the tmpfs sized.
_GUARD_SCRIPT = (
    "grep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status; "
    "[ -w /proc/sys/kernel/core_pattern ] && echo sys_writable; "
    "[ -r /proc/kcore ] && [ -s /proc/kcore ] && echo kcore_readable; "
    "stat -f -c 'tmp_blocks: %b %S' /tmp"
)


def _unavailable(name: str, why: str) -> dict[str, Any]:
    return {"available": False, "via": None, "detail": f"{why}; {WITHOUT[name]}"}


def probe(
    disabled: frozenset[str], disabled_why: str, bwrap_prefix: list[str] | None
) -> dict[str, Any]:
    """The cgroup limits and kernel guards here, as ``probe_layers`` entries.

    ``disabled`` are the layer names switched off (``cgroups``, ``seccomp``), reported with
    ``disabled_why``; ``bwrap_prefix`` is bubblewrap's argv for a view with a
    :data:`PROBE_TMPFS_BYTES` tmpfs (ending in ``--``), or ``None`` where bubblewrap
    cannot run.
    """
    layers: dict[str, Any] = {}
    found = None if "cgroups" in disabled else cgroups.probe_controllers()
    for controller, name in cgroups.LAYER_NAMES.items():
        if found is None:
            layers[name] = _unavailable(name, disabled_why)
            continue
        ok, detail, via = found[controller]
        ok_entry = {"available": True, "via": via, "detail": detail}
        layers[name] = ok_entry if ok else _unavailable(name, detail)
    layers.update(_guards(disabled, disabled_why, bwrap_prefix))
    return layers


def _ask_the_kernel(prefix: list[str], fd: int | None) -> dict[str, str]:
    argv = [prefix[0], *(["--seccomp", str(fd)] if fd is not None else []), *prefix[1:]]
    try:
        done = subprocess.run(
            [*argv, "/bin/sh", "-c", _GUARD_SCRIPT],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            env=_ENV,
            cwd="/",
            pass_fds=() if fd is None else (fd,),
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return {"error": str(e)}
    lines = (x.partition(":") for x in done.stdout.splitlines())
    said = {k.strip(): v.strip() for k, _, v in lines}
    if done.returncode != 0:
        said["error"] = done.stderr.strip()[-200:] or f"exit status {done.returncode}"
    return said


def _guards(
    disabled: frozenset[str], disabled_why: str, prefix: list[str] | None
) -> dict[str, Any]:
    names = ("seccomp", "no_new_privs", "proc_masks", "tmpfs_size")
    if prefix is None:
        why = "they come with bubblewrap, which cannot run here"
        return {name: _unavailable(name, why) for name in names}
    layers: dict[str, Any] = {}
    filter_ok, filter_detail = seccomp.available()
    fd = seccomp.program_fd() if filter_ok and "seccomp" not in disabled else None
    try:
        said = _ask_the_kernel(prefix, fd)
    finally:
        if fd is not None:
            os.close(fd)
    if fd is not None and "Seccomp" not in said:  # bubblewrap refused the filter itself
        filter_ok, filter_detail = False, f"bubblewrap did not load the filter ({said})"
        said = _ask_the_kernel(prefix, None)
    if "seccomp" in disabled:
        layers["seccomp"] = _unavailable("seccomp", disabled_why)
    elif not filter_ok:
        layers["seccomp"] = _unavailable("seccomp", filter_detail)
    elif said.get("Seccomp") == "2":
        layers["seccomp"] = {"available": True, "via": "bwrap", "detail": filter_detail}
    else:
        why = f"bubblewrap did not apply the filter ({said.get('error') or said})"
        layers["seccomp"] = _unavailable("seccomp", why)
    if said.get("NoNewPrivs") == "1" and said.get("CapEff", "").strip("0") == "":
        layers["no_new_privs"] = {"available": True, "via": "bwrap", "detail": "no capabilities"}
    else:
        layers["no_new_privs"] = _unavailable("no_new_privs", f"the kernel says {said}")
    if "sys_writable" in said or "kcore_readable" in said or "error" in said:
        why = f"the masks did not hold ({said.get('error') or said})"
        layers["proc_masks"] = _unavailable("proc_masks", why)
    else:
        shown = [p for p in (*PROC_READ_ONLY, *MASKED_PATHS) if os.path.lexists(p)]
        detail = f"read-only or masked: {', '.join(shown)}"
        layers["proc_masks"] = {"available": True, "via": "bwrap", "detail": detail}
    blocks, _, size = said.get("tmp_blocks", "").partition(" ")
    if blocks.isdigit() and size.isdigit() and int(blocks) * int(size) <= PROBE_TMPFS_BYTES:
        layers["tmpfs_size"] = {"available": True, "via": "bwrap", "detail": "bwrap --size"}
    else:
        why = "bubblewrap cannot size a tmpfs (0.8.0 and later can: --size)"
        layers["tmpfs_size"] = _unavailable("tmpfs_size", why)
    return layers
