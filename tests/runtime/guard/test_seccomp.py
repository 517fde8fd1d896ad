"""The seccomp filter of tool processes (``runtime.guard.sandbox.seccomp``).

Two ways in: the compiled program is run by a small classic-BPF interpreter over
``struct seccomp_data`` values (every denied syscall, every argument rule, the foreign ABIs,
with no risk to the host), and the program is loaded for real in a child process
(``prctl(PR_SET_SECCOMP)``), which then makes the syscalls and reports their errno.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runtime.guard.sandbox import seccomp

pytestmark = pytest.mark.skipif(
    not seccomp.available()[0], reason=f"no seccomp filter here: {seccomp.available()[1]}"
)

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
ARCH = AUDIT_ARCH.get(platform.machine())
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000


def _ret_errno(code: int) -> int:
    return 0x00050000 | code


def _number(name: str) -> int:
    lib = ctypes.CDLL("libseccomp.so.2")
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    return int(lib.seccomp_syscall_resolve_name(name.encode()))


def run_filter(nr: int, args: tuple[int, ...] = (), arch: int | None = ARCH) -> int:
    """What the program returns for syscall ``nr`` with ``args`` (a classic-BPF interpreter)."""
    full = (*args, *([0] * (6 - len(args))))
    data = struct.pack("<iIQ6Q", nr, arch or 0, 0, *(a & (2**64 - 1) for a in full))
    prog = seccomp.program()
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = struct.unpack_from("=HBBI", prog, pc * 8)
        pc += 1
        if code == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            acc = struct.unpack_from("<I", data, k)[0]
        elif code == 0x54:  # BPF_ALU | BPF_AND | BPF_K
            acc &= k
        elif code in (0x15, 0x25, 0x35):  # BPF_JMP | JEQ / JGT / JGE | BPF_K
            taken = {0x15: acc == k, 0x25: acc > k, 0x35: acc >= k}[code]
            pc += jt if taken else jf
        elif code == 0x06:  # BPF_RET | BPF_K
            return int(k)
        else:
            raise AssertionError(f"instruction {code:#x} not interpreted")


needs_known_arch = pytest.mark.skipif(ARCH is None, reason="the interpreter knows x86_64/aarch64")


def test_the_lists_do_not_overlap() -> None:
    allowed, denied = set(seccomp.ALLOWED), set(seccomp.DENIED)
    conditional, enosys = set(seccomp.CONDITIONAL), set(seccomp.ENOSYS)
    assert not allowed & denied
    assert not (allowed | denied) & (conditional | enosys)
    assert not conditional & enosys


@needs_known_arch
@pytest.mark.parametrize("name", seccomp.DENIED)
def test_every_denied_syscall_fails_with_eperm(name: str) -> None:
    nr = _number(name)
    if nr < 0:
        pytest.skip(f"{name} is not a syscall of {platform.machine()}")
    assert run_filter(nr) == _ret_errno(errno.EPERM)


@needs_known_arch
def test_allowed_syscalls_run_and_clone3_openat2_say_enosys() -> None:
    for name in ("read", "write", "execve", "getpid", "statx", "futex", "prctl"):
        assert run_filter(_number(name)) == RET_ALLOW, name
    for name in seccomp.ENOSYS:
        assert run_filter(_number(name)) == _ret_errno(errno.ENOSYS), name


@needs_known_arch
def test_syscalls_newer_than_the_lists_say_enosys_and_none_is_allowed() -> None:
    named = {_number(n) for n in (*seccomp.ALLOWED, *seccomp.CONDITIONAL)}
    for number in seccomp.NEWER:
        got = run_filter(number)
        if number in named:
            continue
        assert got in (_ret_errno(errno.ENOSYS), _ret_errno(errno.EPERM)), (number, hex(got))
    assert run_filter(462) == _ret_errno(errno.ENOSYS)  # mseal (Linux 6.10)
    assert run_filter(_number("mount_setattr")) == _ret_errno(errno.EPERM)
    assert run_filter(600) == _ret_errno(errno.EPERM)  # past every known number


@needs_known_arch
@pytest.mark.parametrize(
    ("name", "args", "allowed"),
    [
        ("chmod", (0, 0o755), True),
        ("chmod", (0, 0o4755), False),
        ("chmod", (0, 0o2755), False),
        ("fchmod", (3, 0o6755), False),
        ("fchmodat", (-100, 0, 0o4700), False),
        ("fchmodat", (-100, 0, 0o700), True),
        ("fchmodat2", (-100, 0, 0o2700, 0), False),
        ("openat", (-100, 0, 0o1101, 0o644), True),  # O_CREAT|O_TRUNC|O_WRONLY, 0644
        ("openat", (-100, 0, 0o1101, 0o4755), False),
        ("openat", (-100, 0, 0o20200002, 0o2755), False),  # O_TMPFILE, set-gid
        ("openat", (-100, 0, 0, 0o4755), True),  # no O_CREAT: the mode is ignored
        ("creat", (0, 0o4755), False),
        ("mknodat", (-100, 0, 0o100644, 0), True),  # a regular file
        ("mknodat", (-100, 0, 0o010644, 0), False),  # a FIFO
        ("mknodat", (-100, 0, 0o020644, 0x103), False),  # a character device
        ("mknodat", (-100, 0, 0o140644, 0), False),  # a socket
        ("clone", (0x01200011, 0), True),  # fork() as glibc calls it
        ("clone", (0x10000000 | 17, 0), False),  # CLONE_NEWUSER
        ("clone", (0x00020000 | 17, 0), False),  # CLONE_NEWNS
        ("socket", (1, 1, 0), True),  # AF_UNIX
        ("socket", (10, 1, 0), True),  # AF_INET6
        ("socket", (40, 1, 0), False),  # AF_VSOCK
        ("socket", (40 | 1 << 32, 1, 0), False),  # AF_VSOCK behind high bits
        ("personality", (0xFFFFFFFF,), True),
        ("personality", (0x0400000,), False),  # READ_IMPLIES_EXEC
    ],
)
def test_argument_rules(name: str, args: tuple[int, ...], allowed: bool) -> None:
    nr = _number(name)
    if nr < 0:
        pytest.skip(f"{name} is not a syscall of {platform.machine()}")
    got = run_filter(nr, args)
    assert got == (RET_ALLOW if allowed else _ret_errno(errno.EPERM)), hex(got)


@needs_known_arch
def test_foreign_abis_are_killed() -> None:
    assert run_filter(20, arch=0x40000003) == RET_KILL_PROCESS  # i386 (int 0x80)
    if platform.machine() == "x86_64":
        assert run_filter(0x40000000 | 39) == RET_KILL_PROCESS  # x32 getpid


CHILD = textwrap.dedent(
    """
    import ctypes, json, os, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    prog = open(sys.argv[1], "rb").read()
    buf = ctypes.create_string_buffer(prog, len(prog))
    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0  # PR_SET_SECCOMP, FILTER
    out = {}
    for name, nr, args in json.loads(sys.argv[2]):
        ctypes.set_errno(0)
        rc = libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))
        out[name] = 0 if rc >= 0 else ctypes.get_errno()
    status = open("/proc/self/status").read()
    out["seccomp_mode"] = [l.split()[1] for l in status.splitlines() if l.startswith("Seccomp:")][0]
    exec(sys.argv[3]) if len(sys.argv) > 3 else print(json.dumps(out))
    """
)


def _under_filter(tmp_path: Path, table: list[Any], code: str | None = None) -> str:
    """Load the program in a child, make the raw syscalls of ``table``, then run ``code``."""
    prog = tmp_path / "filter.bpf"
    prog.write_bytes(seccomp.program())
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(prog), json.dumps(table), *([code] if code else [])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _in_child(tmp_path: Path, calls: list[tuple[str, str, tuple[int, ...]]]) -> dict[str, int]:
    table = [(label, _number(name), args) for label, name, args in calls]
    result: dict[str, int] = json.loads(_under_filter(tmp_path, table))
    return result


def test_a_child_under_the_filter_is_refused_what_it_denies(tmp_path: Path) -> None:
    got = _in_child(
        tmp_path,
        [
            ("getpid", "getpid", ()),
            ("keyctl", "keyctl", (0, -3, 0)),  # KEYCTL_GET_KEYRING_ID of the session keyring
            ("unshare_user", "unshare", (0x10000000,)),
            ("clone3", "clone3", (0, 0)),
            ("openat2", "openat2", (-100, 0, 0, 0)),
            ("io_uring_setup", "io_uring_setup", (1, 0)),
            ("bpf", "bpf", (100, 0, 0)),
            ("userfaultfd", "userfaultfd", (0,)),
            ("socket_vsock", "socket", (40, 1, 0)),
            ("socket_unix", "socket", (1, 1, 0)),
        ],
    )
    assert got.pop("seccomp_mode") == "2"
    assert got == {
        "getpid": 0,
        "keyctl": errno.EPERM,
        "unshare_user": errno.EPERM,
        "clone3": errno.ENOSYS,
        "openat2": errno.ENOSYS,
        "io_uring_setup": errno.EPERM,
        "bpf": errno.EPERM,
        "userfaultfd": errno.EPERM,
        "socket_vsock": errno.EPERM,
        "socket_unix": 0,
    }


def test_set_id_modes_and_special_files_are_refused_by_a_real_kernel(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import os, stat
        out = {}
        for label, fn in [
            ("chmod_plain", lambda: os.chmod("f", 0o755)),
            ("chmod_suid", lambda: os.chmod("f", 0o4755)),
            ("chmod_sgid", lambda: os.chmod("f", 0o2755)),
            ("create_suid", lambda: os.close(os.open("g", os.O_CREAT | os.O_WRONLY, 0o4755))),
            ("create_plain", lambda: os.close(os.open("h", os.O_CREAT | os.O_WRONLY, 0o644))),
            ("mkfifo", lambda: os.mkfifo("p")),
            ("mknod_reg", lambda: os.mknod("r", 0o644 | stat.S_IFREG)),
        ]:
            try:
                fn()
                out[label] = 0
            except OSError as e:
                out[label] = e.errno
        print(out)
        """
    )
    (tmp_path / "f").write_text("x")
    assert _under_filter(tmp_path, [], code).strip() == str(
        {
            "chmod_plain": 0,
            "chmod_suid": errno.EPERM,
            "chmod_sgid": errno.EPERM,
            "create_suid": errno.EPERM,
            "create_plain": 0,
            "mkfifo": errno.EPERM,
            "mknod_reg": 0,
        }
    )
    assert not (tmp_path / "g").exists() and not (tmp_path / "p").exists()
    assert (tmp_path / "f").stat().st_mode & 0o6000 == 0


def test_program_fd_holds_the_program_at_offset_zero() -> None:
    fd = seccomp.program_fd()
    try:
        assert os.lseek(fd, 0, os.SEEK_CUR) == 0
        assert os.read(fd, 1 << 20) == seccomp.program()
    finally:
        os.close(fd)
