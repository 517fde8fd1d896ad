"""Per-program blocklist rules: what makes ``rm``, ``dd``, ``kill``, ... destructive.

These judge one program and its arguments after ``runtime.guard.commands.blocklist`` has lexed the
command and peeled its wrappers; nothing here recurses into nested commands.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection
from fnmatch import fnmatchcase

from runtime.guard.commands.shellwords import Segment

__all__ = [
    "DECODERS",
    "DOWNLOADERS",
    "PATTERNS",
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
PATTERNS: frozenset[str] = frozenset(
    {
        "rm_rf_root",
        "rm_rf_home",
        "sudo",
        "su",
        "doas",
        "pkexec",
        "pipe_to_shell",
        "decode_to_shell",
        "mkfs",
        "fork_bomb",
        "dd_to_device",
        "write_to_device",
        "chmod_recursive_root",
        "shutdown",
        "reverse_shell",
        "kill_all",
        "too_complex",
        "program_pattern",
    }
)
"""Every pattern name ``check_blocklist`` can return."""

_SAFE_DEVICES = frozenset(
    {"null", "zero", "full", "stdout", "stderr", "stdin", "tty", "random", "urandom", "ptmx"}
)
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


def name(word: str) -> str:
    """Return the basename of the program ``word`` names."""
    return posixpath.basename(word.rstrip("/")) if word else ""


def is_program(word: str, names: Collection[str]) -> str | None:
    """Return the entry of ``names`` that program ``word`` runs (basename, glob-aware).

    A basename without glob characters matches only itself; one with them (``s?do``)
    matches the first entry it spells.
    """
    base = name(word)
    if base in names:  # the common case, without a pattern match per entry
        return base
    if not any(ch in base for ch in "*?["):
        return None
    return next((candidate for candidate in names if fnmatchcase(candidate, base)), None)


def _reaches_socket(op: str, path: str) -> bool:
    return re.match(r"/+dev/+(tcp|udp)/", path) is not None


def _writes_device(op: str, path: str) -> bool:
    return op in _WRITE_REDIRECTS and is_device(path)


_REDIRECT_RULES = ((_reaches_socket, "reverse_shell"), (_writes_device, "write_to_device"))
"""``(applies(operator, target), pattern)``: the redirections the blocklist refuses."""


def check_redirects(segment: Segment) -> str | None:
    """Judge a command's redirections (device writes, ``/dev/tcp``)."""
    for op, target in segment.redirects:
        for applies, pattern in _REDIRECT_RULES:
            if applies(op, target.text):
                return pattern
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
    if norm in ("/", "/*", "/.*") or _is_system_dir(norm[1:]):
        return "root"
    return None


def _is_system_dir(top: str) -> bool:
    """Tell whether ``top`` (one path component, maybe a glob) names a system directory."""
    return "/" not in top and any(fnmatchcase(d, top) for d in _SYSTEM_DIRS)


def _split_options(args: list[str]) -> tuple[list[str], list[str]]:
    """Split ``args`` at the first ``--``: the words before it and the operands after it."""
    end = next((n for n, arg in enumerate(args) if arg == "--"), len(args))
    return args[:end], args[end + 1 :]


def _check_rm(args: list[str]) -> str | None:
    options, after = _split_options(args)
    if "--no-preserve-root" in options:
        return "rm_rf_root"
    recursive = any(
        a == "--recursive" or re.fullmatch(r"-[a-zA-Z]*[rR][a-zA-Z]*", a) for a in options
    )
    operands = [a for a in options if not a.startswith("-")] + after
    kinds = {target_kind(a) for a in operands}
    for kind in ("root", "home"):  # the worse one first
        if recursive and kind in kinds:
            return f"rm_rf_{kind}"
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


_StdinRules = tuple[tuple[Callable[[str], object], bool], ...]
"""``(applies(arg), verdict)`` rows: the first that applies to an argument decides."""

_SHELL_STDIN: _StdinRules = (
    (re.compile(r"-[a-zA-Z]*s[a-zA-Z]*").fullmatch, True),
    (lambda arg: arg in _CODE_FLAGS or re.fullmatch(r"-[a-zA-Z]*c[a-zA-Z]*", arg), False),
    (_STDIN_PATHS.__contains__, True),
    (lambda arg: not arg.startswith("-"), False),
)
"""A shell reads stdin with ``-s``, a program string with ``-c``, else its first operand."""
_INTERPRETER_STDIN: _StdinRules = (
    (_CODE_FLAGS.__contains__, False),
    (re.compile(r"-[ce].+").fullmatch, False),
    (_STDIN_PATHS.__contains__, True),
    (lambda arg: not arg.startswith("-"), False),
)
"""An interpreter runs code given with ``-c``/``-e``, else its first operand."""
_SOURCE_STDIN: _StdinRules = ((_STDIN_PATHS.__contains__, True),)
"""``source`` / ``.`` read stdin when one of their arguments names it."""


def _stdin_rules(program: str) -> tuple[_StdinRules, bool]:
    """The rules for where ``program`` reads its program from, and the verdict if none applies."""
    if is_program(program, SHELLS) is not None:
        return _SHELL_STDIN, True
    if _INTERPRETER.fullmatch(name(program)):
        return _INTERPRETER_STDIN, True
    if name(program) in ("source", "."):
        return _SOURCE_STDIN, False
    return (), False


def reads_program_from_stdin(argv: list[str]) -> bool:
    """Tell whether a shell or interpreter ``argv`` reads the program it runs from stdin."""
    rules, otherwise = _stdin_rules(argv[0])
    for arg in argv[1:]:
        for applies, verdict in rules:
            if applies(arg):
                return verdict
    return otherwise


def _is_mkfs(program: str, args: list[str]) -> object:
    return re.fullmatch(r"mkfs(\.[\w.-]+)?", name(program)) or is_program(program, _MKFS)


def _powers_off(program: str, args: list[str]) -> object:
    return is_program(program, _POWER) or (
        name(program) in ("init", "telinit") and args[:1] in (["0"], ["6"])
    )


def _systemctl_powers_off(program: str, args: list[str]) -> object:
    return name(program) == "systemctl" and _POWER_VERBS.intersection(args)


def _netcat_runs_program(program: str, args: list[str]) -> object:
    return is_program(program, frozenset({"nc", "ncat", "netcat"})) and any(
        re.fullmatch(r"-[a-zA-Z]*[ec][a-zA-Z]*|--(exec|sh-exec|lua-exec)(=.*)?", a) for a in args
    )


def _socat_runs_program(program: str, args: list[str]) -> object:
    return name(program) == "socat" and any(re.match(r"(?i)(exec|system):", a) for a in args)


def _copies_to_device(program: str, args: list[str]) -> object:
    return is_program(
        program, frozenset({"shred", "tee", "cp", "mv", "install", "truncate"})
    ) and any(is_device(a) for a in args)


_Rules = tuple[tuple[Callable[[str, list[str]], object], str], ...]
"""``(applies(program, args), pattern)`` rows, tried in order."""

_RULES_BEFORE: _Rules = (
    (_is_mkfs, "mkfs"),
    (_powers_off, "shutdown"),
    (_systemctl_powers_off, "shutdown"),
)
"""Rules tried before the per-program checks."""
_PROGRAM_CHECKS: dict[str, Callable[[list[str]], str | None]] = {
    "rm": _check_rm,
    "chmod": _check_chmod,
    "chown": _check_chmod,
    "chgrp": _check_chmod,
    "dd": _check_dd,
    "kill": _check_kill,
}
"""Programs judged by their arguments alone; the first one the program spells decides."""
_RULES_AFTER: _Rules = (
    (_netcat_runs_program, "reverse_shell"),
    (_socat_runs_program, "reverse_shell"),
    (_copies_to_device, "write_to_device"),
)
"""Rules tried when no per-program check applies."""


def _first_rule(rules: _Rules, program: str, args: list[str]) -> str | None:
    for applies, pattern in rules:
        if applies(program, args):
            return pattern
    return None


def check_program(program: str, args: list[str]) -> str | None:
    """Judge a program and its arguments by the rules that need no recursion."""
    if found := is_program(program, PRIVILEGE):
        return PRIVILEGE[found]
    if blocked := _first_rule(_RULES_BEFORE, program, args):
        return blocked
    if checked := is_program(program, _PROGRAM_CHECKS):
        return _PROGRAM_CHECKS[checked](args)
    return _first_rule(_RULES_AFTER, program, args)
