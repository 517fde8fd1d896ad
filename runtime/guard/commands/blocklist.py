"""The non-bypassable command blocklist: which destructive commands ``command.run`` refuses.

A command string is lexed like ``/bin/sh`` would (``runtime.guard.commands.shellwords``) into simple
commands; each one is unwrapped (``env X=1``, ``command``, ``exec``, ``nohup``, ``timeout``,
``xargs``, ``busybox``, ``find -exec``, ``sh -c '…'``, ``eval``, …) down to the program
that really runs, and that program's name and arguments are judged (a name that is a
glob, ``/usr/bin/s?do``, is refused: what it runs depends on the files it matches).
Nested strings (``bash -c``, ``$(…)``, ``<(…)``, here-strings fed to a shell, ``echo … |
sh``) are checked recursively. The result is a stable pattern name
from :data:`PATTERNS`, or ``None``.

The blocklist is a policy layer: it stops the well-known destructive commands however
they are spelled. It cannot see what a script file or an interpreter's code does; the
kernel layers (``runtime.guard.sandbox.layers``) confine those. ``docs/security-commands.md`` lists
the limits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runtime.guard.commands.blocklist_rules import (
    DECODERS,
    DOWNLOADERS,
    PATTERNS,
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
from runtime.guard.commands.substitutions import evaluate

__all__ = ["PATTERNS", "check_blocklist"]

MAX_DEPTH = 8
"""Nesting (``sh -c`` inside ``$(…)`` inside …) deeper than this is refused as ``too_complex``."""

_KEYWORDS = frozenset({"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until"})
_KEYWORDS |= frozenset({"time", "coproc", "fi", "done", "esac"})
_GLOB = re.compile(r"[*?]|\[[^]]+]")
"""A glob (``*``, ``?``, ``[…]``; a lone ``[`` is the test program): a program name with
one runs whatever files it matches, so no list can judge it."""
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)
_FORK_BOMB = re.compile(
    r"(?P<f>[A-Za-z_:.][\w:.-]*)\(\)\{[^}]*(?P=f)\|(?P=f)"
    r"|function(?P<g>[\w:.-]+)(?:\(\))?\{[^}]*(?P=g)\|(?P=g)"
)
_BRACE = re.compile(r"^(.*?)\{([^{}]*,[^{}]*)\}(.*)$", re.S)

_Peel = Callable[["_Wrapper", list[str], int, list[str]], "list[str] | str"]
"""Peel one wrapper off: ``(wrapper, its args, depth, stdin words)`` -> the argv it runs
next, or a blocklist pattern."""


def _peel_operands(wrapper: _Wrapper, args: list[str], depth: int, stdin: list[str]) -> list[str]:
    return wrapper.operands(args)


@dataclass(frozen=True)
class _Wrapper:
    """A program that runs another one (``nohup cmd``), and how to find that one."""

    valued: frozenset[str] = frozenset()
    """Options that take a value (``timeout -s KILL``)."""
    skip: int = 0
    """Leading operands that are not the command (``timeout 10 cmd``)."""
    peel: _Peel = _peel_operands
    """How to find the command; by default the operands after options and ``skip``."""

    def operands(self, args: list[str]) -> list[str]:
        """The command the wrapper runs: ``args`` without its options and skipped operands."""
        return _options_then_operands(args, self.valued)[self.skip :]


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
    segments = parse_segments(command, variables, evaluate)
    for _ in range(4):  # re-lex while assignments reveal new variable values
        found = _assignments(segments)
        if found == variables:
            break
        variables = found
        segments = parse_segments(command, variables, evaluate)
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
                if blocked := _feeds_code([earlier]):
                    return blocked
        if final and isinstance(final, list) and runs_code(final):
            for word in segment.words:
                for sub in word.subs:
                    if blocked := _feeds_code([_argv_of(s) for s in parse_segments(sub)]):
                        return blocked
    return None


_SOURCES = ((DOWNLOADERS, "pipe_to_shell"), (DECODERS, "decode_to_shell"))
"""Programs whose output must not become code, and the pattern for each kind."""


def _feeds_code(sources: list[list[str]]) -> str | None:
    """The pattern when one of ``sources`` (argvs whose output becomes code) fetches or decodes."""
    for programs, pattern in _SOURCES:
        if any(argv and is_program(argv[0], programs) for argv in sources):
            return pattern
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
        if _GLOB.search(name(argv[0])):
            return check_program(argv[0], argv[1:]) or "program_pattern"
        found = is_program(argv[0], _WRAPPERS)
        if not found:
            return argv
        peeled = _WRAPPERS[found].peel(_WRAPPERS[found], argv[1:], depth, stdin_words)
        if isinstance(peeled, str):
            return peeled
        argv = peeled
    if not argv:  # the last wrapper ran nothing (``command -v``, ``script``)
        return []
    return "too_complex"


def _peel_command(wrapper: _Wrapper, args: list[str], depth: int, stdin: list[str]) -> list[str]:
    """``command -v NAME`` only looks a name up."""
    if any(a in ("-v", "-V") for a in args[:2]):
        return []
    return wrapper.operands(args)


def _peel_env(wrapper: _Wrapper, args: list[str], depth: int, stdin: list[str]) -> list[str] | str:
    """``env -S 'cmd args'`` splits a string into a command; ``NAME=value`` words are no command."""
    for n, arg in enumerate(args):
        if arg in ("-S", "--split-string") or arg.startswith("--split-string="):
            text = " ".join(args[n + 1 : n + 2]) if "=" not in arg else arg.split("=", 1)[1]
            nested = _check_string(text, depth + 1)
            if nested:
                return nested
    operands = wrapper.operands(args)
    while operands and _ASSIGNMENT.fullmatch(operands[0]):
        operands = operands[1:]
    return operands


def _peel_xargs(wrapper: _Wrapper, args: list[str], depth: int, stdin: list[str]) -> list[str]:
    """``xargs`` appends the words it reads (from an ``echo`` upstream) to its command."""
    return wrapper.operands(args) + " ".join(stdin).split()


def _peel_watch(
    wrapper: _Wrapper, args: list[str], depth: int, stdin: list[str]
) -> list[str] | str:
    """``watch cmd args`` runs its operands as one shell string."""
    return _check_string(" ".join(_options_then_operands(args, wrapper.valued)), depth + 1) or []


def _runs_nothing(wrapper: _Wrapper, args: list[str], depth: int, stdin: list[str]) -> list[str]:
    return []


def _command_option_or(otherwise: _Peel) -> _Peel:
    """A peeler: a ``-c``/``--command`` string is checked as a command, else ``otherwise``."""

    def peel(wrapper: _Wrapper, args: list[str], depth: int, stdin: list[str]) -> list[str] | str:
        for n, arg in enumerate(args):
            if arg in ("-c", "--command") and n + 1 < len(args):
                return _check_string(args[n + 1], depth + 1) or []
        return otherwise(wrapper, args, depth, stdin)

    return peel


_WRAPPERS: dict[str, _Wrapper] = {
    "command": _Wrapper(peel=_peel_command),
    "builtin": _Wrapper(),
    "exec": _Wrapper(frozenset({"-a"})),
    "nohup": _Wrapper(),
    "setsid": _Wrapper(),
    "nice": _Wrapper(frozenset({"-n", "--adjustment"})),
    "ionice": _Wrapper(frozenset({"-c", "-n", "--class", "--classdata"})),
    "timeout": _Wrapper(frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "stdbuf": _Wrapper(frozenset({"-i", "-o", "-e", "--input", "--output", "--error"})),
    "time": _Wrapper(frozenset({"-f", "-o", "--format", "--output"})),
    "chroot": _Wrapper(frozenset({"--userspec", "--groups"}), 1),
    "unbuffer": _Wrapper(),
    "taskset": _Wrapper(skip=1),
    "chrt": _Wrapper(skip=1),
    "prlimit": _Wrapper(),
    "strace": _Wrapper(
        frozenset({"-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-O", "-S"})
    ),
    "ltrace": _Wrapper(frozenset({"-o", "-e", "-p", "-s", "-u", "-a", "-n"})),
    "flock": _Wrapper(
        frozenset({"-w", "-E", "--timeout", "--conflict-exit-code"}),
        1,
        _command_option_or(_peel_operands),
    ),
    "xargs": _Wrapper(
        frozenset({"-I", "-n", "-P", "-d", "-a", "-L", "-s", "-E", "--max-args"}), peel=_peel_xargs
    ),
    "env": _Wrapper(frozenset({"-u", "--unset", "-C", "--chdir"}), peel=_peel_env),
    "busybox": _Wrapper(),
    "toybox": _Wrapper(),
    "script": _Wrapper(
        frozenset({"-c", "--command", "-E", "-o", "-T", "-I", "-O", "-B"}),
        peel=_command_option_or(_runs_nothing),
    ),
    "watch": _Wrapper(
        frozenset({"-n", "--interval", "-d", "-q"}), peel=_command_option_or(_peel_watch)
    ),
}
"""Wrappers by name: the programs :func:`_unwrap` peels off to find the one that runs."""


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
    return _BY_NAME.get(name(program), _check_program)(program, args, depth)


def _check_program(program: str, args: list[str], depth: int) -> str | None:
    return check_program(program, args)


def _check_eval(program: str, args: list[str], depth: int) -> str | None:
    """``eval word…`` runs its words joined as a nested command."""
    return _check_string(" ".join(args), depth + 1)


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


def _check_find(program: str, args: list[str], depth: int) -> str | None:
    """``find`` deleting from a root or home, or running a command per file (``-exec``)."""
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


_BY_NAME: dict[str, Callable[[str, list[str], int], str | None]] = {
    "eval": _check_eval,
    "find": _check_find,
}
"""Programs (by exact name) whose arguments hold more commands; any other is judged alone."""
