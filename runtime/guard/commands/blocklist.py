"""The non-bypassable command blocklist: which destructive commands ``command.run`` refuses.

A command string is lexed like ``/bin/sh`` would (``runtime.guard.commands.shellwords``) into simple
commands; each one is unwrapped (``env X=1``, ``command``, ``exec``, ``nohup``, ``timeout``,
``xargs``, ``busybox``, ``find -exec``, ``sh -c '…'``, ``eval``, …) down to the program
that really runs, and that program's name (basename, glob-aware: ``/usr/bin/s?do``) and
arguments are judged. Nested strings (``bash -c``, ``$(…)``, ``<(…)``, here-strings fed to a
shell, ``echo … | sh``) are checked recursively. The result is a stable pattern name
from :data:`PATTERNS`, or ``None``.

The blocklist is a policy layer: it stops the well-known destructive commands however
they are spelled. It cannot see what a script file or an interpreter's code does; the
kernel layers (``runtime.guard.sandbox.layers``) confine those. ``docs/security-commands.md`` lists
the limits.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from runtime.guard.commands.blocklist_rules import (
    DECODERS,
    DOWNLOADERS,
    SHELLS,
    check_program,
    check_redirects,
    is_program,
    name,
    reads_program_from_stdin,
    runs_code,
    target_kind,
)
from runtime.guard.commands.shellwords import Segment, parse_segments

__all__ = ["PATTERNS", "check_blocklist"]

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
    }
)
"""Every pattern name :func:`check_blocklist` can return."""

MAX_DEPTH = 8
"""Nesting (``sh -c`` inside ``$(…)`` inside …) deeper than this is refused as ``too_complex``."""

_KEYWORDS = frozenset({"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until"})
_KEYWORDS |= frozenset({"time", "coproc", "fi", "done", "esac"})
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_FORK_BOMB = re.compile(
    r"(?P<f>[A-Za-z_:.][\w:.-]*)\(\)\{[^}]*(?P=f)\|(?P=f)"
    r"|function(?P<g>[\w:.-]+)(?:\(\))?\{[^}]*(?P=g)\|(?P=g)"
)
_BRACE = re.compile(r"^(.*?)\{([^{}]*,[^{}]*)\}(.*)$", re.S)

# Wrappers: name -> (options taking a value, number of leading operands to skip).
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "command": (frozenset(), 0),
    "builtin": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "-n", "--class", "--classdata"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "time": (frozenset({"-f", "-o", "--format", "--output"}), 0),
    "chroot": (frozenset({"--userspec", "--groups"}), 1),
    "unbuffer": (frozenset(), 0),
    "taskset": (frozenset(), 1),
    "chrt": (frozenset(), 1),
    "prlimit": (frozenset(), 0),
    "strace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-S"}), 0),
    "ltrace": (frozenset({"-o", "-e", "-p", "-s", "-u", "-a", "-n"}), 0),
    "flock": (frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}), 1),
    "xargs": (frozenset({"-I", "-n", "-P", "-d", "-a", "-L", "-s", "-E", "--max-args"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "busybox": (frozenset(), 0),
    "toybox": (frozenset(), 0),
    "script": (frozenset({"-c", "--command", "-E", "-o", "-T", "-I", "-O", "-B"}), 0),
    "watch": (frozenset({"-n", "--interval", "-d", "-q"}), 0),
}


def check_blocklist(command: str | Sequence[str]) -> str | None:
    """Return the blocklist pattern ``command`` matches, or ``None`` when it may run.

    ``command`` is a shell string (run by ``/bin/sh -c``) or an argv list (run directly).
    """
    if isinstance(command, str):
        return _check_string(command, 0)
    return _check_argv([str(a) for a in command], 0, [])


def _check_string(command: str, depth: int) -> str | None:
    if depth > MAX_DEPTH:
        return "too_complex"
    if _FORK_BOMB.search(re.sub(r"\s+", "", command)):
        return "fork_bomb"
    variables: dict[str, str] = {}
    segments = parse_segments(command, variables, _evaluate)
    for _ in range(4):  # re-lex while assignments reveal new variable values
        found = _assignments(segments)
        if found == variables:
            break
        variables = found
        segments = parse_segments(command, variables, _evaluate)
    for segment in segments:
        for word in segment.words + tuple(w for _, w in segment.redirects):
            for sub in word.subs:
                if blocked := _check_string(sub, depth + 1):
                    return blocked
    pipeline: list[Segment] = []
    for segment in segments:
        pipeline.append(segment)
        if not segment.pipe_to_next:
            if blocked := _check_pipeline(pipeline, depth):
                return blocked
            pipeline = []
    return None


def _assignments(segments: list[Segment]) -> dict[str, str]:
    """Variables assigned by ``NAME=value`` words and ``export``/``declare``/``local``."""
    found: dict[str, str] = {}
    for segment in segments:
        texts = [w.text for w in segment.words]
        if texts and texts[0] in ("export", "declare", "local", "typeset", "readonly"):
            texts = texts[1:]
        for text in texts:
            match = _ASSIGNMENT.fullmatch(text)
            if not match:
                if not text.startswith("-"):
                    break
                continue
            found[match.group(1)] = match.group(2)
    return found


def _evaluate(inner: str) -> str | None:
    """Compute what a trivial substitution prints (``echo``, ``printf``, ``which``)."""
    segments = parse_segments(inner)
    if len(segments) != 1 or segments[0].redirects:
        return None
    argv = [w.text for w in segments[0].words]
    name = posixpath.basename(argv[0]) if argv else ""
    args = argv[1:]
    if name == "echo":
        while args and re.fullmatch(r"-[neE]+", args[0]):
            args = args[1:]
        return " ".join(args)
    if name == "printf" and args:
        text = args[0]
        for arg in args[1:]:
            text = text.replace("%s", arg, 1)
        return text.replace("\\n", "\n")
    if name in ("which", "type", "command", "whereis") and args:
        return args[-1]
    return None


def _expand_braces(texts: list[str]) -> list[str]:
    out: list[str] = []
    for text in texts:
        match = _BRACE.match(text)
        if match:
            head, body, tail = match.groups()
            out.extend(f"{head}{alt}{tail}" for alt in body.split(",")[:32])
        else:
            out.append(text)
    return out


def _argv_of(segment: Segment) -> list[str]:
    texts = _expand_braces([w.text for w in segment.words])
    while texts and (texts[0] in _KEYWORDS or _ASSIGNMENT.fullmatch(texts[0])):
        texts = texts[1:]
    return texts


def _check_pipeline(pipeline: list[Segment], depth: int) -> str | None:
    resolved: list[list[str]] = []
    for n, segment in enumerate(pipeline):
        if blocked := check_redirects(segment):
            return blocked
        upstream = resolved[n - 1] if n else []
        stdin_words = upstream[1:] if upstream and name(upstream[0]) in ("echo", "printf") else []
        argv = _argv_of(segment)
        if blocked := _check_argv(argv, depth, stdin_words):
            return blocked
        final = _unwrap(argv, depth, stdin_words)
        resolved.append(final if isinstance(final, list) else [])
        here = [w.text for op, w in segment.redirects if op == "<<<"]
        if final and isinstance(final, list) and reads_program_from_stdin(final):
            for text in here + ([" ".join(stdin_words)] if stdin_words else []):
                if blocked := _check_string(text, depth + 1):
                    return blocked
            for earlier in resolved[:-1]:
                if earlier and is_program(earlier[0], DOWNLOADERS):
                    return "pipe_to_shell"
                if earlier and is_program(earlier[0], DECODERS):
                    return "decode_to_shell"
        if final and isinstance(final, list) and runs_code(final):
            for word in segment.words:
                for sub in word.subs:
                    heads = [_argv_of(s)[:1] for s in parse_segments(sub)]
                    if any(h and is_program(h[0], DOWNLOADERS) for h in heads):
                        return "pipe_to_shell"
                    if any(h and is_program(h[0], DECODERS) for h in heads):
                        return "decode_to_shell"
    return None


def _options_then_operands(args: list[str], valued: frozenset[str]) -> list[str]:
    """Drop leading options (and their values) from ``args``; return the operands."""
    n = 0
    while n < len(args):
        arg = args[n]
        if arg == "--":
            return args[n + 1 :]
        if not arg.startswith("-") or arg == "-":
            break
        n += 2 if arg in valued else 1
    return args[n:]


def _unwrap(argv: list[str], depth: int, stdin_words: list[str]) -> list[str] | str:
    """Peel wrappers off ``argv``: the argv that really runs, or a pattern if blocked."""
    for _ in range(16):
        if not argv:
            return []
        name = is_program(argv[0], _WRAPPERS) or ""
        args = argv[1:]
        if not name:
            return argv
        valued, skip = _WRAPPERS[name]
        if name == "command" and any(a in ("-v", "-V") for a in args[:2]):
            return []
        if name == "env":
            for n, arg in enumerate(args):
                if arg in ("-S", "--split-string") or arg.startswith("--split-string="):
                    text = args[n + 1] if arg in ("-S", "--split-string") else arg.split("=", 1)[1]
                    nested = _check_string(text, depth + 1)
                    if nested:
                        return nested
            operands = _options_then_operands(args, valued)
            while operands and _ASSIGNMENT.fullmatch(operands[0]):
                operands = operands[1:]
            argv = operands
            continue
        if name in ("script", "flock", "watch"):
            for n, arg in enumerate(args):
                if arg in ("-c", "--command") and n + 1 < len(args):
                    return _check_string(args[n + 1], depth + 1) or []
            if name == "watch":
                operands = _options_then_operands(args, valued)
                return _check_string(" ".join(operands), depth + 1) or []
            if name == "script":
                return []
        operands = _options_then_operands(args, valued)
        argv = operands[skip:]
        if name == "xargs":
            argv = argv + " ".join(stdin_words).split()
    return "too_complex"


def _check_argv(argv: list[str], depth: int, stdin_words: list[str]) -> str | None:
    """Judge one simple command (already split into words)."""
    if depth > MAX_DEPTH:
        return "too_complex"
    final = _unwrap(argv, depth, stdin_words)
    if isinstance(final, str):
        return final
    if not final:
        return None
    program, args = final[0], final[1:]
    if is_program(program, SHELLS):
        return _check_shell(args, depth)
    if name(program) == "eval":
        return _check_string(" ".join(args), depth + 1)
    if name(program) == "find":
        return _check_find(args, depth)
    return check_program(program, args)


def _check_shell(args: list[str], depth: int) -> str | None:
    """``sh -c 'string'`` → the string is checked as a nested command."""
    n = 0
    while n < len(args):
        arg = args[n]
        if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            n += 2
            continue
        if re.fullmatch(r"[-+][a-zA-Z]*c[a-zA-Z]*", arg):
            rest = [a for a in args[n + 1 :] if not a.startswith("-")] or [""]
            return _check_string(rest[0], depth + 1)
        if not arg.startswith(("-", "+")) or arg in ("-", "--"):
            break
        n += 1
    return None


def _check_find(args: list[str], depth: int) -> str | None:
    starts = [a for a in args[: next((i for i, a in enumerate(args) if a[:1] in "-(!"), len(args))]]
    kinds = {target_kind(s) for s in starts} - {None}
    verdict = "rm_rf_root" if "root" in kinds else "rm_rf_home" if kinds else None
    if verdict and "-delete" in args:
        return verdict
    for n, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            inner = list(args[n + 1 :])
            end = next((i for i, a in enumerate(inner) if a in (";", "+")), len(inner))
            if verdict and inner and is_program(inner[0], frozenset({"rm", "shred", "unlink"})):
                return verdict
            if blocked := _check_argv(inner[:end], depth + 1, []):
                return blocked
    return None
