"""A POSIX-shell lexer for the command blocklist: words, operators, redirections, nesting.

It is not a shell. It reads a command string the way ``/bin/sh`` would split it into
simple commands, closely enough that the blocklist (``runtime.guard.commands.controls``) judges what
will really run, and errs on the side of seeing *more* commands, never fewer:

- quotes (``'…'``, ``"…"``, ``$'…'`` with its escapes) and backslash escapes are removed;
- ``$IFS`` / ``${IFS}`` split words, positional parameters (``$1``, ``$@``) expand empty;
- variables assigned earlier in the same string (``a=su; b=do; $a$b``) are expanded, with
  the shell's word splitting when unquoted;
- command substitutions (``$(…)``, backticks) and process substitutions (``<(…)``) are
  kept as nested command strings, and their output is substituted when an ``evaluate``
  hook can compute it (``$(echo sudo)``);
- ``;``, ``&``, ``&&``, ``||``, ``|``, ``|&``, newlines, parentheses and ``;;`` separate
  simple commands (:class:`Segment`), ``|`` marks a pipeline;
- here-document bodies are read as commands (an over-approximation; see
  ``docs/security-commands.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from runtime.guard.commands.shellquotes import ansi_c, matching_brace, matching_paren

__all__ = ["Segment", "Word", "parse_segments"]

_MAX_OPERAND_DEPTH = 8
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL_PARAMS = "@*#?$!-"
_OPERATOR_CHARS = "|&;<>()"
_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "<<", "<<-", "<<<", "<&", ">&", "&>", "&>>"})

Evaluate = Callable[[str], "str | None"]
"""Hook computing a command substitution's output, or ``None`` when it cannot be known."""


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal and the expansions the lexer can perform."""

    text: str
    """The word's text; unknown expansions stay literal (``$X``, ``$(cmd)``)."""
    subs: tuple[str, ...] = ()
    """Nested command strings found in the word (command/process substitutions)."""


@dataclass(frozen=True)
class Segment:
    """One simple command: its words, its redirections, whether it pipes into the next."""

    words: tuple[Word, ...]
    """The words, command name first (assignments and keywords included)."""
    redirects: tuple[tuple[str, Word], ...] = ()
    """``(operator, target)`` pairs, e.g. ``(">", Word("/dev/sda"))``."""
    pipe_to_next: bool = False
    """True when ``|`` or ``|&`` connects this command's output to the next one."""


def parse_segments(
    command: str,
    variables: Mapping[str, str] | None = None,
    evaluate: Evaluate | None = None,
) -> list[Segment]:
    """Split ``command`` into simple commands; never raises on malformed input."""
    tokens = _Lexer(command, variables or {}, evaluate).run()
    segments: list[Segment] = []
    words: list[Word] = []
    redirects: list[tuple[str, Word]] = []
    pending: str | None = None

    def close(pipe: bool) -> None:
        if words or redirects:
            segments.append(Segment(tuple(words), tuple(redirects), pipe))
        words.clear()
        redirects.clear()

    for kind, value in tokens:
        if isinstance(value, Word):
            if pending is not None:
                redirects.append((pending, value))
                pending = None
            else:
                words.append(value)
        elif kind == "op" and value in _REDIRECTS:
            pending = value
        else:
            pending = None
            close(value in ("|", "|&"))
    close(False)
    return segments


class _Lexer:
    """Character-level state machine producing ``("word", Word)`` / ``("op", str)`` tokens."""

    def __init__(
        self, text: str, variables: Mapping[str, str], evaluate: Evaluate | None, depth: int = 0
    ):
        self.s = text
        self.depth = depth
        self.i = 0
        self.vars = variables
        self.evaluate = evaluate
        self.tokens: list[tuple[str, Word | str]] = []
        self.cur: list[str] = []
        self.subs: list[str] = []
        self.active = False

    # --- token assembly -----------------------------------------------------------------

    def flush(self) -> None:
        if self.active:
            self.tokens.append(("word", Word("".join(self.cur), tuple(self.subs))))
        self.cur, self.subs, self.active = [], [], False

    def add(self, text: str) -> None:
        self.cur.append(text)
        self.active = True

    def inject(self, value: str, quoted: bool) -> None:
        """Insert an expansion's value, word-splitting it when unquoted."""
        if quoted:
            self.add(value)
            return
        if not value:
            return
        parts = value.split()
        if value[0].isspace():
            self.flush()
        for n, part in enumerate(parts):
            if n:
                self.flush()
            self.add(part)
        if value[-1].isspace():
            self.flush()

    def op(self, value: str) -> None:
        self.flush()
        self.tokens.append(("op", value))

    # --- main loop ----------------------------------------------------------------------

    def run(self) -> list[tuple[str, Word | str]]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r":
                self.flush()
                self.i += 1
            elif c == "\n":
                self.op(";")
                self.i += 1
            elif c == "#" and not self.active:
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif c == "\\":
                nxt = s[self.i + 1 : self.i + 2]
                if nxt != "\n":
                    self.add(nxt)
                self.i += 2
            elif c == "'":
                end = s.find("'", self.i + 1)
                end = len(s) if end < 0 else end
                self.add(s[self.i + 1 : end])
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self.double_quoted()
            elif c == "`":
                self.backtick(quoted=False)
            elif c == "$":
                self.dollar(quoted=False)
            elif c in _OPERATOR_CHARS:
                self.operator()
            else:
                self.add(c)
                self.i += 1
        self.flush()
        return self.tokens

    def double_quoted(self) -> None:
        s = self.s
        self.active = True
        while self.i < len(s) and s[self.i] != '"':
            c = s[self.i]
            if c == "\\" and s[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                if s[self.i + 1] != "\n":
                    self.add(s[self.i + 1])
                self.i += 2
            elif c == "$":
                self.dollar(quoted=True)
            elif c == "`":
                self.backtick(quoted=True)
            else:
                self.add(c)
                self.i += 1
        self.i += 1

    def operator(self) -> None:
        s, i = self.s, self.i
        c = s[i]
        if c in "<>" and s[i + 1 : i + 2] == "(":
            end = matching_paren(s, i + 1)
            inner = s[i + 2 : end - 1]
            self.subs.append(inner)
            self.add(f"{c}({inner})")
            self.i = end
            return
        if c in "<>" and self.active and not self.subs and "".join(self.cur).isdigit():
            self.cur, self.active = [], False  # ``2>file``: the digits name a descriptor
        for candidate in ("<<<", "<<-", "&>>", ";;&", ";;", ";&", "&&", "||", "|&", "&>"):
            if s.startswith(candidate, i):
                self.op(candidate)
                self.i += len(candidate)
                return
        for candidate in ("<<", "<>", "<&", ">>", ">|", ">&"):
            if s.startswith(candidate, i):
                self.op(candidate)
                self.i += len(candidate)
                return
        self.op(c)
        self.i += 1

    def backtick(self, quoted: bool) -> None:
        s = self.s
        j = self.i + 1
        inner: list[str] = []
        while j < len(s) and s[j] != "`":
            if s[j] == "\\" and j + 1 < len(s):
                inner.append(s[j + 1] if s[j + 1] in "`\\$" else s[j : j + 2])
                j += 2
            else:
                inner.append(s[j])
                j += 1
        self.i = j + 1
        self.substitution("".join(inner), quoted, f"`{''.join(inner)}`")

    def substitution(self, inner: str, quoted: bool, literal: str) -> None:
        self.subs.append(inner)
        value = self.evaluate(inner) if self.evaluate else None
        if value is None:
            self.add(literal)
        else:
            self.active = self.active or quoted
            self.inject(value.rstrip("\n"), quoted)

    def dollar(self, quoted: bool) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1 : i + 2]
        if nxt == "'" and not quoted:
            text, self.i = ansi_c(s, i + 2)
            self.add(text)
        elif nxt == '"' and not quoted:
            self.i = i + 2
            self.double_quoted()
        elif nxt == "(":
            end = matching_paren(s, i + 1)
            inner = s[i + 2 : end - 1]
            self.i = end
            self.substitution(inner, quoted, f"$({inner})")
        elif nxt == "{":
            end = matching_brace(s, i + 1)
            expr = s[i + 2 : end - 1]
            self.i = end
            value = self.parameter(expr)
            if value is None:
                self.add("${" + expr + "}")
            else:
                self.active = self.active or quoted
                self.inject(value, quoted)
        else:
            match = _NAME.match(s, i + 1)
            if match:
                name, self.i = match.group(), match.end()
            elif nxt and (nxt.isdigit() or nxt in _SPECIAL_PARAMS):
                name, self.i = nxt, i + 2
            else:
                self.add("$")
                self.i = i + 1
                return
            value = self.lookup(name)
            if value is None:
                self.add("$" + name)
            else:
                self.active = self.active or quoted
                self.inject(value, quoted)

    def lookup(self, name: str) -> str | None:
        """Return a parameter's value, or ``None`` when it cannot be known statically."""
        if name == "IFS":
            return " "
        if name in self.vars:
            return self.vars[name]
        if name == "0":
            return "sh"
        if name.isdigit() or name in "@*":
            return ""
        if name in _SPECIAL_PARAMS:
            return "0"
        return None

    def parameter(self, expr: str) -> str | None:
        """Evaluate ``${expr}``: plain lookups and the default/alternate value forms."""
        match = _NAME.match(expr) or re.match(r"[0-9]+|[@*#?$!-]", expr)
        if not match or (expr.startswith(("#", "!")) and len(expr) > 1):
            return None
        name, rest = match.group(), expr[match.end() :]
        value = self.lookup(name)
        if not rest or rest.startswith(":?") or rest.startswith("?"):
            return value
        for prefix in (":-", "-", ":=", "="):
            if rest.startswith(prefix):
                return value if value else self.flatten(rest[len(prefix) :])
        for prefix in (":+", "+"):
            if rest.startswith(prefix):
                return self.flatten(rest[len(prefix) :]) if value else ""
        return None

    def flatten(self, text: str) -> str:
        """Join the words of ``text`` (a ``${x:-word}`` operand); depth-bounded."""
        if self.depth >= _MAX_OPERAND_DEPTH:
            return text
        lexer = _Lexer(text, self.vars, None, self.depth + 1)
        return " ".join(value.text for _, value in lexer.run() if isinstance(value, Word))
