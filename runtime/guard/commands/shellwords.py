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
_OPERATOR = re.compile(r"<<<|<<-|&>>|;;&|;;|;&|&&|\|\||\|&|&>|<<|<>|<&|>>|>\||>&|[|&;<>()]")
"""An operator at a position holding one of ``|&;<>()``: the longest spelling wins."""
_REDIRECTS = frozenset({"<", ">", ">>", ">|", "<>", "<<", "<<-", "<<<", "<&", ">&", "&>", "&>>"})

_FIXED_PARAMS = {"0": "sh", "@": "", "*": "", "#": "0", "?": "0", "$": "0", "!": "0", "-": "0"}
"""Special parameters with a static stand-in value (``$0`` is the shell, the rest empty or 0)."""
_DQ_ESCAPES = {'"': '"', "\\": "\\", "$": "$", "`": "`", "\n": ""}
"""What a backslash followed by each key means inside double quotes (a newline joins lines)."""

Evaluate = Callable[[str], "str | None"]
"""Hook computing a command substitution's output, or ``None`` when it cannot be known."""


def _cannot_evaluate(inner: str) -> None:
    """The :data:`Evaluate` hook that knows no command's output."""


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
    evaluate: Evaluate = _cannot_evaluate,
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
    """Character-level state machine producing ``("word", Word)`` / ``("op", str)`` tokens.

    What a character starts is looked up in a table (:data:`_ACTIONS` outside quotes,
    :data:`_DQ_ACTIONS` inside double quotes, :data:`_DOLLAR_FORMS` after a ``$``).
    """

    def __init__(self, text: str, variables: Mapping[str, str], evaluate: Evaluate, depth: int = 0):
        self.s = text
        self.depth = depth
        self.i = 0
        self.vars = variables
        self.known = _FIXED_PARAMS | dict(variables) | {"IFS": " "}  # later ones win
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

    def add_nonempty(self, text: str) -> None:
        """Add ``text`` unless it is empty (so it starts no word)."""
        if text:
            self.add(text)

    def inject(self, value: str, quoted: bool) -> None:
        """Insert an expansion's value, word-splitting it when unquoted."""
        if quoted:
            self.add(value)
            return
        first, *rest = re.split(r"\s+", value)
        self.add_nonempty(first)
        for part in rest:
            self.flush()
            self.add_nonempty(part)

    def expand(self, value: str | None, literal: str, quoted: bool, trailing: str = "") -> None:
        """Insert a known expansion's value (less ``trailing`` characters), else ``literal``."""
        if value is None:
            self.add(literal)
            return
        self.active = self.active or quoted
        self.inject(value.rstrip(trailing), quoted)

    def op(self, value: str) -> None:
        self.flush()
        self.tokens.append(("op", value))

    # --- main loop ----------------------------------------------------------------------

    def run(self) -> list[tuple[str, Word | str]]:
        while self.i < len(self.s):
            _ACTIONS.get(self.s[self.i], _Lexer.plain)(self)
        self.flush()
        return self.tokens

    def plain(self) -> None:
        self.add(self.s[self.i])
        self.i += 1

    def blank(self) -> None:
        self.flush()
        self.i += 1

    def newline(self) -> None:
        self.op(";")
        self.i += 1

    def comment(self) -> None:
        """``#`` starts a comment to the end of the line, except inside a word."""
        if self.active:
            self.plain()
            return
        end = self.s.find("\n", self.i)
        self.i = len(self.s) if end < 0 else end

    def backslash(self) -> None:
        nxt = self.s[self.i + 1 : self.i + 2]
        if nxt != "\n":
            self.add(nxt)
        self.i += 2

    def single_quoted(self) -> None:
        s = self.s
        end = s.find("'", self.i + 1)
        end = len(s) if end < 0 else end
        self.add(s[self.i + 1 : end])
        self.i = end + 1

    def open_double_quote(self) -> None:
        self.i += 1
        self.double_quoted()

    def double_quoted(self) -> None:
        """Read from after an opening ``"`` to after its closing one."""
        s = self.s
        self.active = True
        while self.i < len(s) and s[self.i] != '"':
            _DQ_ACTIONS.get(s[self.i], _Lexer.plain)(self)
        self.i += 1

    def dq_backslash(self) -> None:
        """Inside double quotes a backslash escapes only the characters of :data:`_DQ_ESCAPES`."""
        nxt = self.s[self.i + 1 : self.i + 2]
        if nxt not in _DQ_ESCAPES:
            self.plain()
            return
        self.add(_DQ_ESCAPES[nxt])
        self.i += 2

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
        token = _OPERATOR.match(s, i)
        assert token is not None  # every character that leads here is an operator
        self.op(token.group())
        self.i = token.end()

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
        self.expand(self.evaluate(inner), literal, quoted, trailing="\n")

    # --- $ expansions: each form reads from the ``$`` --------------------------------------

    def dollar(self, forms: Mapping[str, _Form], quoted: bool) -> None:
        forms.get(self.s[self.i + 1 : self.i + 2], _Lexer.dollar_name)(self, quoted)

    def ansi_c_string(self, quoted: bool) -> None:
        text, self.i = ansi_c(self.s, self.i + 2)
        self.add(text)

    def locale_string(self, quoted: bool) -> None:
        self.i += 2
        self.double_quoted()

    def command_substitution(self, quoted: bool) -> None:
        s, i = self.s, self.i
        end = matching_paren(s, i + 1)
        inner = s[i + 2 : end - 1]
        self.i = end
        self.substitution(inner, quoted, f"$({inner})")

    def braced(self, quoted: bool) -> None:
        s, i = self.s, self.i
        end = matching_brace(s, i + 1)
        expr = s[i + 2 : end - 1]
        self.i = end
        self.expand(self.parameter(expr), "${" + expr + "}", quoted)

    def dollar_name(self, quoted: bool) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1 : i + 2]
        match = _NAME.match(s, i + 1)
        if match:
            name, self.i = match.group(), match.end()
        elif nxt and (nxt.isdigit() or nxt in _SPECIAL_PARAMS):
            name, self.i = nxt, i + 2
        else:
            self.plain()
            return
        self.expand(self.lookup(name), "$" + name, quoted)

    def lookup(self, name: str) -> str | None:
        """Return a parameter's value, or ``None`` when it cannot be known statically."""
        if name in self.known:
            return self.known[name]
        if name.isdigit():
            return ""
        return None

    def parameter(self, expr: str) -> str | None:
        """Evaluate ``${expr}``: plain lookups and the default/alternate value forms."""
        match = _NAME.match(expr) or re.match(r"[0-9]+|[@*#?$!-]", expr)
        if not match or (expr.startswith(("#", "!")) and len(expr) > 1):
            return None
        name, rest = match.group(), expr[match.end() :]
        value = self.lookup(name)
        if not rest:
            return value
        for prefix, form in _PARAMETER_FORMS:
            if rest.startswith(prefix):
                return form(self, value, rest[len(prefix) :])
        return None

    def flatten(self, text: str) -> str:
        """Join the words of ``text`` (a ``${x:-word}`` operand); depth-bounded."""
        if self.depth >= _MAX_OPERAND_DEPTH:
            return text
        lexer = _Lexer(text, self.vars, _cannot_evaluate, self.depth + 1)
        return " ".join(value.text for _, value in lexer.run() if isinstance(value, Word))


_Action = Callable[[_Lexer], None]
_Form = Callable[[_Lexer, bool], None]

_ACTIONS: dict[str, _Action] = {
    " ": _Lexer.blank,
    "\t": _Lexer.blank,
    "\r": _Lexer.blank,
    "\n": _Lexer.newline,
    "#": _Lexer.comment,
    "\\": _Lexer.backslash,
    "'": _Lexer.single_quoted,
    '"': _Lexer.open_double_quote,
    "`": lambda lexer: lexer.backtick(quoted=False),
    "$": lambda lexer: lexer.dollar(_DOLLAR_FORMS, quoted=False),
} | dict.fromkeys("|&;<>()", _Lexer.operator)
"""What each character starts outside quotes; any other character is part of a word."""

_DQ_ACTIONS: dict[str, _Action] = {
    "\\": _Lexer.dq_backslash,
    "`": lambda lexer: lexer.backtick(quoted=True),
    "$": lambda lexer: lexer.dollar(_DQ_DOLLAR_FORMS, quoted=True),
}
"""What each character starts inside double quotes; any other is literal."""

_DQ_DOLLAR_FORMS: dict[str, _Form] = {
    "(": _Lexer.command_substitution,
    "{": _Lexer.braced,
}
"""The ``$`` forms inside double quotes, by the character after the ``$``; else a name."""
_DOLLAR_FORMS: dict[str, _Form] = _DQ_DOLLAR_FORMS | {
    "'": _Lexer.ansi_c_string,
    '"': _Lexer.locale_string,
}
"""The ``$`` forms outside quotes: ``$'…'`` and ``$"…"`` besides those of double quotes."""


def _as_is(lexer: _Lexer, value: str | None, operand: str) -> str | None:
    return value


def _default(lexer: _Lexer, value: str | None, operand: str) -> str | None:
    return value if value else lexer.flatten(operand)


def _alternate(lexer: _Lexer, value: str | None, operand: str) -> str | None:
    return lexer.flatten(operand) if value else ""


_PARAMETER_FORMS: tuple[tuple[str, Callable[[_Lexer, str | None, str], str | None]], ...] = (
    (":?", _as_is),
    ("?", _as_is),
    (":-", _default),
    ("-", _default),
    (":=", _default),
    ("=", _default),
    (":+", _alternate),
    ("+", _alternate),
)
"""``${name<op>operand}`` forms by operator: the value, a default when unset or empty, or
an alternate when set."""
