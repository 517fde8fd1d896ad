"""A negative result of libseccomp or libc becomes an ``OSError`` naming its errno."""

from __future__ import annotations

import ctypes
import errno

import pytest

from runtime.guard.review import inotify
from runtime.guard.sandbox import seccomp


def test_a_negative_libseccomp_code_is_an_os_error_with_its_reason() -> None:
    seccomp._check(0, "unused {strerror}")
    with pytest.raises(OSError, match=r"^\[Errno 22\] seccomp_export_bpf: Invalid argument$"):
        seccomp._check(-errno.EINVAL, "seccomp_export_bpf: {strerror}")
    with pytest.raises(OSError, match=r"^\[Errno 12\] seccomp_attr_set\(ACT_BADARCH\) failed$"):
        seccomp._check(-errno.ENOMEM, "seccomp_attr_set(ACT_BADARCH) failed")


def test_a_watch_of_a_missing_directory_names_it() -> None:
    with (
        inotify.Inotify() as notify,
        pytest.raises(OSError, match=r"^\[Errno 2\] No such file or directory: '/nonexistent'$"),
    ):
        notify.watch("/nonexistent")


def test_a_negative_libc_result_takes_its_errno() -> None:
    assert inotify._checked(7) == 7
    ctypes.set_errno(errno.EMFILE)
    with pytest.raises(OSError, match=r"^\[Errno 24\] Too many open files$"):
        inotify._checked(-1)
