"""A ctypes wrapper for Linux ``openat2(2)``, the kernel's confined path resolution.

``openat2`` (Linux 5.6+) takes a ``struct open_how`` whose ``resolve`` flags make the
kernel itself refuse any resolution that leaves the directory ``dirfd`` refers to
(``RESOLVE_BENEATH``: ``..`` above it, absolute paths and absolute or escaping symlinks
fail with ``EXDEV``) or that goes through ``/proc`` magic links (``RESOLVE_NO_MAGICLINKS``).
The check and the open are one system call, so no rename or symlink swap can slip in
between them. Python has no binding, so this module calls ``syscall(437, ...)`` through
libc; :func:`available` probes once whether the kernel (and any seccomp filter) allows it.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform

__all__ = [
    "RESOLVE_BENEATH",
    "RESOLVE_IN_ROOT",
    "RESOLVE_NO_MAGICLINKS",
    "RESOLVE_NO_SYMLINKS",
    "RESOLVE_NO_XDEV",
    "SYS_OPENAT2",
    "available",
    "names_root",
    "openat2",
]

SYS_OPENAT2 = 437
"""``openat2``'s system call number; the same on every architecture with the unified table."""

RESOLVE_NO_XDEV = 0x01
"""Refuse to cross a mount point."""
RESOLVE_NO_MAGICLINKS = 0x02
"""Refuse ``/proc/*/fd``-style magic links."""
RESOLVE_NO_SYMLINKS = 0x04
"""Refuse every symlink."""
RESOLVE_BENEATH = 0x08
"""Refuse anything that resolves outside ``dirfd`` (``EXDEV``)."""
RESOLVE_IN_ROOT = 0x10
"""Treat ``dirfd`` as ``/`` (chroot-like); not used by Roost, it would redirect escapes."""

# Architectures whose syscall table gives openat2 the number 437 (all the 64-bit ones
# Roost runs on; alpha, ia64 and the MIPS ABIs use other numbers and get the fallback).
_SUPPORTED_MACHINES = frozenset(
    {"x86_64", "amd64", "aarch64", "arm64", "riscv64", "ppc64le", "ppc64", "s390x", "i686"}
)


class _OpenHow(ctypes.Structure):
    """``struct open_how`` from ``<linux/openat2.h>``."""

    _fields_ = [
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    ]


@functools.cache
def _syscall() -> ctypes._FuncPointer | None:
    """Return libc's ``syscall`` with its signature set, or None without a usable libc."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syscall
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_long
    fn.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    return fn


def openat2(dirfd: int, path: str | bytes, flags: int, *, mode: int = 0, resolve: int = 0) -> int:
    """Open ``path`` relative to ``dirfd`` with ``openat2(2)``; return the new fd.

    Raises ``OSError`` with the kernel's errno (``EXDEV`` for an escape under
    ``RESOLVE_BENEATH``, ``ELOOP``, ``ENOENT``, ...), or ``ENOSYS`` when there is no libc
    ``syscall`` to call. ``O_CLOEXEC`` is always added.
    """
    fn = _syscall()
    if fn is None or platform.machine().lower() not in _SUPPORTED_MACHINES:
        raise OSError(errno.ENOSYS, "openat2 is not available on this platform")
    raw = os.fsencode(path)
    how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
    while True:
        fd = int(fn(SYS_OPENAT2, dirfd, raw, ctypes.byref(how), ctypes.sizeof(how)))
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        # EAGAIN: the kernel saw a concurrent rename and asks the caller to retry.
        if err not in (errno.EINTR, errno.EAGAIN):
            raise OSError(err, os.strerror(err), os.fsdecode(raw))


@functools.cache
def available() -> bool:
    """Whether ``openat2`` works here: kernel support, no seccomp veto, ``/proc`` mounted.

    Roost's openat2 mode also reads ``/proc/self/fd`` to learn where an fd landed, so a
    missing ``/proc`` makes the mode unavailable as well. Cached for the process.
    """
    root = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = openat2(
            root, ".", os.O_PATH | os.O_DIRECTORY, resolve=RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
        )
    except OSError:
        return False
    finally:
        os.close(root)
    try:
        return names_root(fd)
    finally:
        os.close(fd)


def names_root(fd: int) -> bool:
    """Whether ``/proc/self/fd`` says ``fd`` is ``/`` (False when ``/proc`` cannot tell)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == "/"
    except OSError:
        return False
