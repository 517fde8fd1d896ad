"""The seccomp filter every tool process runs under, modeled on Docker's default profile.

The filter is an allowlist: the syscalls of :data:`ALLOWED` run, a few more run when their
arguments are harmless (:data:`CONDITIONAL`), :data:`ENOSYS` answer "not implemented" (so
libc falls back to a call whose arguments the filter can see), so do syscalls newer than
these lists (:data:`NEWER`), and everything else fails
with ``EPERM`` -- among them every syscall of :data:`DENIED`, which reach the kernel's
privileged surface (keyrings, ``ptrace``, mounts, namespaces, BPF, perf, module loading,
``io_uring``, clocks, ...). Calls of a foreign ABI (i386 ``int 0x80`` or x32 from an x86_64
process, AArch32 from an AArch64 one) kill the process: the per-ABI syscall numbers differ,
so a filter written for one ABI is no filter for another.

The program is compiled by the system's libseccomp (``libseccomp.so.2``, called through
``ctypes``): it holds the syscall tables of every architecture, the ABI checks and the
argument comparisons, as it does for Docker, runc, podman and systemd, so Roost carries no
syscall numbers of its own. bubblewrap loads the program (``bwrap --seccomp FD``) after it
has built the view and set ``no_new_privs``, just before it runs the command; a program is
read from its descriptor at start, so a long-lived process (an MCP stdio server) takes it
the same way. Where libseccomp is missing, :func:`available` says why and commands run
without the filter; ``diagnostics`` reports the layer unavailable.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os

__all__ = [
    "ALLOWED",
    "CONDITIONAL",
    "DENIED",
    "ENOSYS",
    "NEWER",
    "available",
    "program",
    "program_fd",
]

# libseccomp's constants (seccomp.h); stable across its 2.x releases.
_ACT_KILL_PROCESS = 0x80000000
_ACT_ALLOW = 0x7FFF0000
_ATTR_ACT_BADARCH = 2
_CMP_LT = 2
_CMP_EQ = 4
_CMP_MASKED_EQ = 7


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


# Flag and mode bits the argument rules test (the same on x86_64 and AArch64).
_S_ISUID, _S_ISGID = 0o4000, 0o2000
_SETID = _S_ISUID | _S_ISGID
_S_IFMT, _S_IFREG = 0o170000, 0o100000
_O_CREAT, _O_TMPFILE = 0o100, 0o20000000  # _O_TMPFILE: the bit without O_DIRECTORY
_CLONE_NEW = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_AF_VSOCK, _AF_MAX = 40, 46
_LOW32 = 0xFFFFFFFF

ALLOWED: tuple[str, ...] = (
    # processes, signals, scheduling
    "arch_prctl", "capget", "capset", "exit", "exit_group", "fork", "vfork", "execve",
    "execveat", "wait4", "waitid", "kill", "tkill", "tgkill", "getpid", "getppid", "gettid",
    "getpgid", "setpgid", "getpgrp", "getsid", "setsid", "getuid", "geteuid", "getgid",
    "getegid", "getresuid", "getresgid", "getgroups", "setuid", "setgid", "setreuid",
    "setregid", "setresuid", "setresgid", "setfsuid", "setfsgid", "setgroups", "prctl",
    "getpriority", "setpriority", "getrlimit", "setrlimit", "prlimit64", "getrusage",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getattr", "sched_setattr",
    "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval", "getcpu",
    "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "futex", "futex_waitv",
    "restart_syscall", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
    "rt_sigsuspend", "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack",
    "signalfd", "signalfd4", "pause", "alarm", "getitimer", "setitimer", "times", "seccomp",
    "pidfd_open", "pidfd_send_signal", "ioprio_get", "ioprio_set", "membarrier",
    "modify_ldt", "get_thread_area", "set_thread_area", "umask", "uname", "sysinfo",
    "getrandom", "process_mrelease",
    # memory
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "msync", "mincore", "mlock",
    "mlock2", "mlockall", "munlock", "munlockall", "remap_file_pages", "memfd_create",
    "pkey_alloc", "pkey_free", "pkey_mprotect", "get_mempolicy", "set_mempolicy", "mbind",
    # time (reading it, sleeping, timers)
    "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "timer_create", "timer_delete", "timer_gettime", "timer_settime", "timer_getoverrun",
    "timerfd_create", "timerfd_gettime", "timerfd_settime",
    # files and directories
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
    "preadv2", "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3", "fcntl",
    "flock", "fsync", "fdatasync", "syncfs", "sync", "sync_file_range", "fadvise64",
    "readahead", "fallocate", "ftruncate", "truncate", "stat", "fstat", "lstat",
    "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
    "getcwd", "chdir", "fchdir", "getdents", "getdents64", "mkdir", "mkdirat", "rmdir",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink",
    "unlinkat", "readlink", "readlinkat", "chown", "fchown", "fchownat", "lchown", "utime",
    "utimes", "utimensat", "futimesat", "getxattr", "lgetxattr", "fgetxattr", "setxattr",
    "lsetxattr", "fsetxattr", "listxattr", "llistxattr", "flistxattr", "removexattr",
    "lremovexattr", "fremovexattr", "copy_file_range", "sendfile", "splice", "tee",
    "vmsplice", "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch",
    "fanotify_mark", "ioctl",
    # waiting and events
    "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
    "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "pipe", "pipe2",
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
    # sockets (reach is the network namespace's business) and System V / POSIX IPC
    "socketpair", "connect", "accept", "accept4", "bind", "listen", "getsockname",
    "getpeername", "getsockopt", "setsockopt", "sendto", "recvfrom", "sendmsg", "recvmsg",
    "sendmmsg", "recvmmsg", "shutdown", "shmget", "shmat", "shmdt", "shmctl", "semget",
    "semop", "semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open",
    "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    # landlock: a process may confine itself further
    "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
)  # fmt: skip
"""Syscalls every tool process may make, whatever their arguments."""

DENIED: tuple[str, ...] = (
    "keyctl", "add_key", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
    "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr",
    "setns", "unshare",
    "bpf", "perf_event_open", "userfaultfd", "fanotify_init", "lookup_dcookie",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "nfsservctl",
    "syslog", "vhangup", "sethostname", "setdomainname",
    "open_by_handle_at", "name_to_handle_at",
    "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "uselib", "ustat", "sysfs", "_sysctl", "vm86", "vm86old", "memfd_secret",
)  # fmt: skip
"""Syscalls refused with ``EPERM`` (not in :data:`ALLOWED`; listed so tests and docs name them)."""

ENOSYS: tuple[str, ...] = ("clone3", "openat2")
"""Syscalls answered ``ENOSYS``: their flags or mode sit behind a pointer the filter cannot
read, so libc falls back to ``clone`` and ``openat``, whose arguments it checks."""

NEWER = range(424, 512)
"""Syscall numbers shared by every architecture since Linux 5.1. Those the lists above do not
name (newer than this module, or than libseccomp) answer ``ENOSYS``, as runc does, so a
newer libc falls back to an older call instead of failing with ``EPERM``; none is allowed."""

_Rule = tuple[tuple[int, int, int, int], ...]  # ((arg index, op, datum a, datum b), ...)

CONDITIONAL: dict[str, tuple[_Rule, ...]] = {
    # no set-uid or set-gid bit on a file: by mode change, by creation, by mknod
    "chmod": (((1, _CMP_MASKED_EQ, _SETID, 0),),),
    "fchmod": (((1, _CMP_MASKED_EQ, _SETID, 0),),),
    "fchmodat": (((2, _CMP_MASKED_EQ, _SETID, 0),),),
    "fchmodat2": (((2, _CMP_MASKED_EQ, _SETID, 0),),),
    "creat": (((1, _CMP_MASKED_EQ, _SETID, 0),),),
    "open": (
        ((1, _CMP_MASKED_EQ, _O_CREAT | _O_TMPFILE, 0),),
        ((2, _CMP_MASKED_EQ, _SETID, 0),),
    ),
    "openat": (
        ((2, _CMP_MASKED_EQ, _O_CREAT | _O_TMPFILE, 0),),
        ((3, _CMP_MASKED_EQ, _SETID, 0),),
    ),
    # only regular files: no FIFO, socket or device node
    "mknod": (
        ((1, _CMP_MASKED_EQ, _S_IFMT | _SETID, _S_IFREG),),
        ((1, _CMP_MASKED_EQ, _S_IFMT | _SETID, 0),),
    ),
    "mknodat": (
        ((2, _CMP_MASKED_EQ, _S_IFMT | _SETID, _S_IFREG),),
        ((2, _CMP_MASKED_EQ, _S_IFMT | _SETID, 0),),
    ),
    # threads and processes, but no new namespace
    "clone": (((0, _CMP_MASKED_EQ, _CLONE_NEW, 0),),),
    # every address family but AF_VSOCK (the host's hypervisor sockets); compared as the
    # full 64-bit register, so high bits the kernel ignores cannot smuggle AF_VSOCK past
    "socket": (
        ((0, _CMP_LT, _AF_VSOCK, 0),),
        *(((0, _CMP_EQ, family, 0),) for family in range(_AF_VSOCK + 1, _AF_MAX)),
    ),
    # the execution domains Docker allows: PER_LINUX, PER_LINUX32, UNAME26, both, a query
    "personality": tuple(
        ((0, _CMP_EQ, value, 0),) for value in (0x0, 0x8, 0x20000, 0x20008, _LOW32)
    ),
}
"""Syscalls allowed when one of their rules holds (each rule: all its comparisons)."""


_NAMED = (*ALLOWED, *DENIED, *ENOSYS, *CONDITIONAL)


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class _Version(ctypes.Structure):
    _fields_ = (("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint))


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        found = ctypes.util.find_library("seccomp")  # slower: asks ldconfig
        if found is None:
            return None
        try:
            lib = ctypes.CDLL(found, use_errno=True)
        except OSError:
            return None
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.restype = None
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_version.restype = ctypes.POINTER(_Version)
    return lib


def _version(lib: ctypes.CDLL) -> str:
    found = lib.seccomp_version().contents
    return f"{found.major}.{found.minor}.{found.micro}"


def _add(lib: ctypes.CDLL, ctx: int, action: int, number: int, rule: _Rule = ()) -> None:
    args = (_ArgCmp * max(1, len(rule)))(*(_ArgCmp(*cmp) for cmp in rule))
    code = lib.seccomp_rule_add_array(ctx, action, number, len(rule), args)
    _check(code, f"seccomp_rule_add: {{strerror}} (syscall {number})")


def _check(code: int, message: str) -> None:
    """``OSError`` for libseccomp's negative errno ``code`` (``{strerror}`` in ``message``)."""
    if code < 0:
        raise OSError(-code, message.format(strerror=os.strerror(-code)))


def _compile(lib: ctypes.CDLL) -> bytes:
    ctx = lib.seccomp_init(_act_errno(errno.EPERM))
    if not ctx:
        raise OSError(errno.ENOMEM, "seccomp_init failed")
    try:
        code = lib.seccomp_attr_set(ctx, _ATTR_ACT_BADARCH, _ACT_KILL_PROCESS)
        _check(code, "seccomp_attr_set(ACT_BADARCH) failed")
        for name, action, rules in (
            *((n, _ACT_ALLOW, ((),)) for n in ALLOWED),
            *((n, _act_errno(errno.ENOSYS), ((),)) for n in ENOSYS),
            *((n, _ACT_ALLOW, r) for n, r in CONDITIONAL.items()),
        ):
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not a syscall of this architecture (or newer than libseccomp)
            for rule in rules:
                _add(lib, ctx, action, number, rule)
        named = {lib.seccomp_syscall_resolve_name(n.encode()) for n in _NAMED}
        for number in NEWER:
            if number not in named:
                _add(lib, ctx, _act_errno(errno.ENOSYS), number)
        fd = os.memfd_create("roost-seccomp-compile")
        try:
            _check(lib.seccomp_export_bpf(ctx, fd), "seccomp_export_bpf: {strerror}")
            size = os.lseek(fd, 0, os.SEEK_END)
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)


@functools.lru_cache(maxsize=1)
def _built() -> tuple[bytes | None, str]:
    lib = _library()
    if lib is None:
        return None, "libseccomp.so.2 not found (install libseccomp2)"
    try:
        return _compile(lib), f"libseccomp {_version(lib)}"
    except OSError as e:
        return None, f"libseccomp {_version(lib)} cannot compile the filter: {e}"


def available() -> tuple[bool, str]:
    """Whether the filter can be built here, and by what (or why not)."""
    built, detail = _built()
    return built is not None, detail


def program() -> bytes:
    """The compiled BPF program (``struct sock_filter`` array); ``OSError`` when unavailable."""
    built, detail = _built()
    if built is None:
        raise OSError(errno.ENOSYS, detail)
    return built


def program_fd() -> int:
    """A new memory file holding :func:`program` at offset 0, for ``bwrap --seccomp FD``.

    The caller passes it to bubblewrap (``pass_fds``) and closes it once bwrap has started.
    """
    data = program()
    fd = os.memfd_create("roost-seccomp")
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
