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
from collections.abc import Iterable
from typing import Required, TypedDict

from runtime.guard.sandbox import cgroups, seccomp
from runtime.guard.sandbox.view import MASKED_PATHS, PROC_READ_ONLY

__all__ = ["PROBE_TMPFS_BYTES", "WITHOUT", "LayerEntry", "Layers", "probe"]

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

GUARDS = ("seccomp", "no_new_privs", "proc_masks", "tmpfs_size")
"""The guards that come with bubblewrap."""


class LayerEntry(TypedDict, total=False):
    """One layer of ``probe_layers``: whether it works here, through what, and why not."""

    available: Required[bool]
    """Whether the layer works here."""
    detail: str
    """What it does, or why it is missing and what a command may then do."""
    via: str | None
    """The program or mechanism that provides it (``bwrap``, ``cgroup_v2``, ...)."""
    user_namespace: bool
    """``unshare`` only: it goes through a user namespace (not root)."""
    drop_caps: bool
    """``unshare`` only: ``setpriv`` drops the capabilities inside it."""


Layers = dict[str, LayerEntry]
"""Layer name -> its entry (what ``probe_layers`` returns)."""

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


def _unavailable(name: str, why: str) -> LayerEntry:
    return {"available": False, "via": None, "detail": f"{why}; {WITHOUT[name]}"}


def _entry(
    name: str, via: str | None, detail: str, refusals: Iterable[tuple[bool, str]]
) -> LayerEntry:
    """``name``'s entry: unavailable for the first refusal that holds (its reason), else held."""
    for refused, why in refusals:
        if refused:
            return _unavailable(name, why)
    return {"available": True, "via": via, "detail": detail}


def probe(disabled: frozenset[str], disabled_why: str, bwrap_prefix: list[str] | None) -> Layers:
    """The cgroup limits and kernel guards here, as ``probe_layers`` entries.

    ``disabled`` are the layer names switched off (``cgroups``, ``seccomp``), reported with
    ``disabled_why``; ``bwrap_prefix`` is bubblewrap's argv for a view with a
    :data:`PROBE_TMPFS_BYTES` tmpfs (ending in ``--``), or ``None`` where bubblewrap
    cannot run.
    """
    limits: Layers
    if "cgroups" in disabled:
        limits = {name: _unavailable(name, disabled_why) for name in cgroups.LAYER_NAMES.values()}
    else:
        found = cgroups.probe_controllers()
        limits = {}
        for controller, name in cgroups.LAYER_NAMES.items():
            ok, detail, via = found[controller]
            limits[name] = _entry(name, via, detail, [(not ok, detail)])
    return limits | _guards(disabled, disabled_why, bwrap_prefix)


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


def _guards(disabled: frozenset[str], disabled_why: str, prefix: list[str] | None) -> Layers:
    if prefix is None:
        why = "they come with bubblewrap, which cannot run here"
        return {name: _unavailable(name, why) for name in GUARDS}
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
    return _verdicts(said, disabled, disabled_why, filter_ok, filter_detail)


def _verdicts(
    said: dict[str, str],
    disabled: frozenset[str],
    disabled_why: str,
    filter_ok: bool,
    filter_detail: str,
) -> Layers:
    """Each guard's entry from what the kernel ``said`` in bubblewrap: its refusals, in order."""
    failed = said.get("error") or said
    privileged = not (said.get("NoNewPrivs") == "1" and said.get("CapEff", "").strip("0") == "")
    unmasked = "sys_writable" in said or "kcore_readable" in said or "error" in said
    shown = [p for p in (*PROC_READ_ONLY, *MASKED_PATHS) if os.path.lexists(p)]
    blocks, _, size = said.get("tmp_blocks", "").partition(" ")
    sized = blocks.isdigit() and size.isdigit() and int(blocks) * int(size) <= PROBE_TMPFS_BYTES
    refusals = {
        "seccomp": [
            ("seccomp" in disabled, disabled_why),
            (not filter_ok, filter_detail),
            (said.get("Seccomp") != "2", f"bubblewrap did not apply the filter ({failed})"),
        ],
        "no_new_privs": [(privileged, f"the kernel says {said}")],
        "proc_masks": [(unmasked, f"the masks did not hold ({failed})")],
        "tmpfs_size": [(not sized, "bubblewrap cannot size a tmpfs (0.8.0 and later can: --size)")],
    }
    held = {
        "seccomp": filter_detail,
        "no_new_privs": "no capabilities",
        "proc_masks": f"read-only or masked: {', '.join(shown)}",
        "tmpfs_size": "bwrap --size",
    }
    return {name: _entry(name, "bwrap", held[name], refusals[name]) for name in GUARDS}
