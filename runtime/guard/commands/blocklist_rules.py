"""Per-program blocklist rules: what makes ``rm``, ``dd``, ``kill``, ... destructive.

These judge one program and its arguments after ``runtime.guard.commands.blocklist`` has lexed the
command and peeled its wrappers; nothing here recurses into nested commands.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection
from fnmatch import fnmatchcase

from runtime.guard.commands.shellwords import Segment

__all__ = [
    "DECODERS",
    "DOWNLOADERS",
    "PRIVILEGE",
    "SHELLS",
    "check_program",
    "check_redirects",
    "is_device",
    "is_program",
    "name",
    "reads_program_from_stdin",
    "runs_code",
    "target_kind",
]

PRIVILEGE = {"sudo": "sudo", "sudoedit": "sudo", "su": "su", "runuser": "su"}
PRIVILEGE |= {"doas": "doas", "pkexec": "pkexec"}
"""Privilege-escalation programs and the pattern each one is blocked as."""
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "posh"})
SHELLS |= frozenset({"fish", "tcsh", "csh"})
"""Shells: their ``-c`` strings are checked as nested commands."""
_INTERPRETER = re.compile(
    r"(python|pypy|perl|ruby|node|nodejs|php|lua|luajit|tclsh|Rscript|deno|bun|pwsh)[0-9.]*"
)
_CODE_FLAGS = frozenset({"-c", "-e", "-E", "-r", "-p", "--eval", "--print", "-m", "--command"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request"})
DOWNLOADERS |= frozenset({"GET", "nc", "ncat", "netcat", "socat", "tftp", "ftp"})
"""Programs that fetch data from the network (``pipe_to_shell`` sources)."""
DECODERS = frozenset({"base64", "base32", "basenc", "xxd", "uudecode", "openssl", "rev"})
DECODERS |= frozenset({"gunzip", "zcat", "bzcat", "xzcat", "zstdcat", "gzip", "bzip2", "xz"})
"""Programs that decode hidden text (``decode_to_shell`` sources)."""
_STDIN_PATHS = frozenset({"-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"})
_MKFS = frozenset({"mke2fs", "mkswap", "wipefs", "mkdosfs", "newfs"})
_POWER = frozenset({"shutdown", "reboot", "halt", "poweroff", "kexec"})
_POWER_VERBS = frozenset({"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate"})
_SYSTEM_DIRS = frozenset(
    {"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt"}
    | {"opt", "proc", "root", "run", "sbin", "srv", "sys", "usr", "var"}
)
_SAFE_DEVICES = frozenset(
    {"null", "zero", "full", "stdout", "stderr", "stdin", "tty", "random", "urandom", "ptmx"}
)
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


def name(word: str) -> str:
    """Return the basename of the program ``word`` names."""
    return posixpath.basename(word.rstrip("/")) if word else ""


def is_program(word: str, names: Collection[str]) -> str | None:
    """Return the entry of ``names`` that program ``word`` runs (basename, glob-aware)."""
    base = name(word)
    if base in names:
        return base
    if any(ch in base for ch in "*?["):
        for candidate in names:
            if fnmatchcase(candidate, base):
                return candidate
    return None


def check_redirects(segment: Segment) -> str | None:
    """Judge a command's redirections (device writes, ``/dev/tcp``)."""
    for op, target in segment.redirects:
        path = target.text
        if re.match(r"/+dev/+(tcp|udp)/", path):
            return "reverse_shell"
        if op in _WRITE_REDIRECTS and is_device(path):
            return "write_to_device"
    return None


def is_device(path: str) -> bool:
    """Tell whether ``path`` is under ``/dev`` and not a harmless pseudo-device."""
    norm = posixpath.normpath(path) if path.startswith("/") else ""
    if not norm.startswith("/dev/"):
        return False
    rest = norm[len("/dev/") :]
    return rest not in _SAFE_DEVICES and not rest.startswith(("fd/", "shm/", "pts/"))


def target_kind(path: str) -> str | None:
    """Classify an rm/chmod target: ``"root"`` (``/``, ``/*``, a system dir) or ``"home"``."""
    if re.fullmatch(r"(~[\w.-]*|\$HOME|\$\{HOME\})(/+\.?)*(/\*)?/*", path):
        return "home"
    if not path.startswith("/"):
        return None
    norm = posixpath.normpath("/" + path.lstrip("/"))
    while norm.endswith(("/*", "/.*")) and norm not in ("/*", "/.*"):
        norm = norm.rsplit("/", 1)[0] or "/"
    if norm in ("/", "/*", "/.*"):
        return "root"
    top = norm[1:]
    if "/" in top:
        return None
    globbed = any(ch in top for ch in "*?[")
    if top in _SYSTEM_DIRS or (globbed and any(fnmatchcase(d, top) for d in _SYSTEM_DIRS)):
        return "root"
    return None


def _check_rm(args: list[str]) -> str | None:
    options = args[: args.index("--")] if "--" in args else args
    if "--no-preserve-root" in options:
        return "rm_rf_root"
    recursive = any(
        a == "--recursive" or re.fullmatch(r"-[a-zA-Z]*[rR][a-zA-Z]*", a) for a in options
    )
    operands = [a for a in options if not a.startswith("-")]
    if "--" in args:
        operands += args[args.index("--") + 1 :]
    kinds = {target_kind(a) for a in operands}
    if recursive and "root" in kinds:
        return "rm_rf_root"
    if recursive and "home" in kinds:
        return "rm_rf_home"
    return None


def _check_chmod(args: list[str]) -> str | None:
    recursive = any(a == "--recursive" or re.fullmatch(r"-[a-zA-Z]*R[a-zA-Z]*", a) for a in args)
    if recursive and any(target_kind(a) for a in args if not a.startswith("-")):
        return "chmod_recursive_root"
    return None


def _check_dd(args: list[str]) -> str | None:
    if any(a.startswith("of=") and is_device(a[3:]) for a in args):
        return "dd_to_device"
    return None


def _check_kill(args: list[str]) -> str | None:
    n = 0
    if args and args[0] in ("-s", "-n"):
        n = 2
    elif args and args[0].startswith("-") and args[0] != "--" and len(args) > 1:
        n = 1
    targets = args[n:]
    if targets[:1] == ["--"]:
        targets = targets[1:]
    return "kill_all" if "-1" in targets else None


def runs_code(argv: list[str]) -> bool:
    """Tell whether ``argv`` executes its arguments as code (shells, eval, source)."""
    return bool(
        is_program(argv[0], SHELLS)
        or _INTERPRETER.fullmatch(name(argv[0]))
        or name(argv[0]) in ("eval", "source", ".")
    )


def reads_program_from_stdin(argv: list[str]) -> bool:
    """Tell whether a shell or interpreter ``argv`` reads the program it runs from stdin."""
    program, args = argv[0], argv[1:]
    is_shell = is_program(program, SHELLS) is not None
    if not is_shell and not _INTERPRETER.fullmatch(name(program)):
        return name(program) in ("source", ".") and bool(set(args) & _STDIN_PATHS)
    for arg in args:
        if is_shell and re.fullmatch(r"-[a-zA-Z]*s[a-zA-Z]*", arg):
            return True
        if arg in _CODE_FLAGS or (is_shell and re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", arg)):
            return False
        if not is_shell and re.fullmatch(r"-[ce].+", arg):
            return False
        if arg in _STDIN_PATHS:
            return True
        if not arg.startswith("-"):
            return False
    return True


def check_program(program: str, args: list[str]) -> str | None:
    """Judge a program and its arguments by the rules that need no recursion."""
    if found := is_program(program, PRIVILEGE):
        return PRIVILEGE[found]
    base = name(program)
    if re.fullmatch(r"mkfs(\.[\w.-]+)?", base) or is_program(program, _MKFS):
        return "mkfs"
    if is_program(program, _POWER) or (base in ("init", "telinit") and args[:1] in (["0"], ["6"])):
        return "shutdown"
    if base == "systemctl" and _POWER_VERBS.intersection(args):
        return "shutdown"
    checks = {
        "rm": _check_rm,
        "chmod": _check_chmod,
        "chown": _check_chmod,
        "chgrp": _check_chmod,
        "dd": _check_dd,
        "kill": _check_kill,
    }
    for candidate, check in checks.items():
        if is_program(program, frozenset({candidate})):
            return check(args)
    if is_program(program, frozenset({"nc", "ncat", "netcat"})) and any(
        re.fullmatch(r"-[a-zA-Z]*[ec][a-zA-Z]*|--(exec|sh-exec|lua-exec)(=.*)?", a) for a in args
    ):
        return "reverse_shell"
    if base == "socat" and any(re.match(r"(?i)(exec|system):", a) for a in args):
        return "reverse_shell"
    if is_program(program, frozenset({"shred", "tee", "cp", "mv", "install", "truncate"})) and any(
        is_device(a) for a in args
    ):
        return "write_to_device"
    return None
