"""Secret redaction: what the journal, the logs and tool results never store in the clear.

``redact(value)`` returns JSON-like data with every secret replaced: a non-empty string
under a sensitive key (``password``, ``api_key``, ``Authorization``, ``DB_PASS``, ...)
becomes ``"[REDACTED]"``, and inside any string a known token shape (OpenAI, Anthropic,
GitHub, AWS, Slack, Bearer, PEM private keys, JWTs, ``user:pass@`` URLs, passwords given
to command-line clients, named values such as ``TOKEN=...`` anywhere in a line) becomes
``"[REDACTED:<kind>]"``. ``scan(value)`` reports the same findings without changing
anything, so ``sensitivity_finding_kinds`` always names what ``redact`` replaced.
``redact_stream(chunks)`` redacts a streamed text as a whole (a secret split over two
deltas is still a secret); ``redact_label(label)`` redacts an id, more strictly than text.
``redaction_processor`` puts structlog lines through the same rules.

The journal redacts every event, so clean data is cheap: a document's JSON text is tested
as a whole for the rules' trigger words first (on its bytes, in one search, when it is
ASCII; the journal passes the canonical JSON it hashes, ``redact_encoded``, so nothing is
encoded twice), a string is lowered once and tested for a few literals before any regex
runs, containers are copied only when something inside changed, and untouched input
comes back as the very same object (treat the result as read-only). Log lines are tested
the same way, whole, before any value is walked (:mod:`runtime.guard.secrets.clean_check`).
Measured with ``python -m timeit`` on one core of the development machine (CPython 3.11)::

    clean event dict (9 keys, a nested result with ~200 chars of code)      ~9 µs
    the same with an API key in the text and an Authorization header        ~56 µs
    redact_text on 2 KB of Python source (names "key"/"token": every rule)  ~130 µs
    redact_text on 1 MB of log text holding 2,080 secrets                   ~90 ms

(``docs/redaction.md`` shows how to rerun it.) The rules live in
:mod:`runtime.guard.secrets.patterns`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
from structlog.typing import EventDict, WrappedLogger

from runtime.guard.secrets.clean_check import MAX_DEPTH, json_looks_clean, looks_clean
from runtime.guard.secrets.key_names import is_sensitive_key
from runtime.guard.secrets.patterns import redact_string
from runtime.guard.secrets.rule import (
    REDACTED,
    Replaced,
    SecretKind,
    is_redaction_marker,
    marker,
)

__all__ = [
    "MAX_DEPTH",
    "REDACTED",
    "Finding",
    "SecretKind",
    "finding_kinds",
    "is_sensitive_key",
    "json_looks_clean",
    "redact",
    "redact_encoded",
    "redact_label",
    "redact_stream",
    "redact_text",
    "redact_with_findings",
    "redaction_processor",
    "scan",
]


class Finding(msgspec.Struct, frozen=True):
    """One secret found by :func:`scan`."""

    kind: str
    """What was found: a :class:`SecretKind` value such as ``openai_key``."""
    path: str
    """Where: a JSONPath such as ``$.result.items[2].content``."""


_TOO_DEEP = marker(SecretKind.DEPTH_LIMIT.value)
_CONTAINERS = (dict, list, tuple)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _key_segment(key: Any) -> str:
    if isinstance(key, str) and _IDENTIFIER.fullmatch(key):
        return "." + key
    return "[" + msgspec.json.encode(str(key)).decode() + "]"


class _Redactor:
    """The walk's companion when only the redacted value is wanted (no findings kept)."""

    __slots__ = ()

    def text(self, text: str) -> str:
        """``text`` with every known secret shape replaced."""
        return redact_string(text)

    def hidden(self, text: str) -> None:
        """``text`` sits under a sensitive key and is hidden whole."""

    def too_deep(self) -> str:
        """What a container nested deeper than :data:`MAX_DEPTH` becomes."""
        return _TOO_DEEP

    def member(self, item: Any, depth: int, blank: bool, key: Any) -> Any:
        """Redact the member of a dict under ``key``."""
        return _walk(item, depth + 1, self, blank)

    def element(self, item: Any, depth: int, blank: bool, index: int) -> Any:
        """Redact the element of a list at ``index``."""
        return _walk(item, depth + 1, self, blank)


_QUIET = _Redactor()


class _Sink(_Redactor):
    """Redacts and collects findings; ``path`` is the stack of JSONPath segments."""

    __slots__ = ("findings", "path")

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.path: list[str] = []

    def add(self, kind: str) -> None:
        self.findings.append(Finding(kind, "$" + "".join(self.path)))

    def text(self, text: str) -> str:
        return redact_string(text, self)

    def note(self, kind: str, edits: list[tuple[int, int]], width: int) -> None:
        """A rule replaced ``edits`` in the current string: one finding each."""
        for _ in edits:
            self.add(kind)

    def hidden(self, text: str) -> None:
        replaced = Replaced()
        redact_string(text, replaced)
        for kind in replaced.kinds or [SecretKind.SENSITIVE_KEY.value]:
            self.add(kind)

    def too_deep(self) -> str:
        self.add(SecretKind.DEPTH_LIMIT.value)
        return _TOO_DEEP

    def member(self, item: Any, depth: int, blank: bool, key: Any) -> Any:
        self.path.append(_key_segment(key))
        try:
            return _walk(item, depth + 1, self, blank)
        finally:
            self.path.pop()

    def element(self, item: Any, depth: int, blank: bool, index: int) -> Any:
        self.path.append(f"[{index}]")
        try:
            return _walk(item, depth + 1, self, blank)
        finally:
            self.path.pop()


def _text(text: str, sink: _Redactor, blank: bool) -> str:
    if not blank:
        return sink.text(text)
    if not text or is_redaction_marker(text):
        return text
    sink.hidden(text)
    return REDACTED


def _walk(value: Any, depth: int, sink: _Redactor, blank: bool) -> Any:
    """Redact ``value``; ``blank``: it sits under a sensitive key, so hide every string.

    A container comes back as it was when no member changed (a tuple always as a list).
    """
    if isinstance(value, str):
        return _text(value, sink, blank)
    if not isinstance(value, _CONTAINERS):
        return value
    if depth >= MAX_DEPTH:
        return sink.too_deep()
    changed: dict[Any, Any] = {}  # key or index -> its redacted value
    if isinstance(value, dict):
        for key, item in value.items():
            hide = blank or (isinstance(key, str) and is_sensitive_key(key))
            new = sink.member(item, depth, hide, key)
            if new is not item:
                changed[key] = new
        if not changed:
            return value
        return {**value, **changed}
    for index, item in enumerate(value):
        new = sink.element(item, depth, blank, index)
        if new is not item:
            changed[index] = new
    if not changed and type(value) is list:
        return value
    items = list(value)
    for index, new in changed.items():
        items[index] = new
    return items


def redact(value: Any) -> Any:
    """Return ``value`` (JSON-like data) with every secret replaced.

    Strings under sensitive keys (see :func:`is_sensitive_key`), at any depth and inside
    lists, become ``"[REDACTED]"``; numbers, booleans and null under them are kept. Known
    token shapes inside any string become ``"[REDACTED:<kind>]"``. Dict keys are kept,
    tuples become lists, other objects pass through unchanged. Returns the same object
    when nothing changed, so treat the result as read-only. Idempotent.
    """
    if looks_clean(value):
        return value
    return _walk(value, 0, _QUIET, False)


def redact_encoded(value: Any, encoded: bytes) -> Any:
    """:func:`redact` of ``value`` whose JSON text (msgspec's, any key order) is ``encoded``.

    For a caller that encodes ``value`` anyway (the journal hashes an event's canonical
    JSON): the clean check reads those bytes instead of encoding ``value`` once more.
    """
    if isinstance(value, str) or not json_looks_clean(encoded):
        return _walk(value, 0, _QUIET, False)
    return value


def redact_text(text: str) -> str:
    """Return ``text`` with every known token shape replaced by ``[REDACTED:<kind>]``."""
    return redact_string(text)


_PLAIN_LABEL = re.compile(r"(?:corr-)?[0-9A-Fa-f\-]*+")
_LABEL_SEPARATOR = re.compile(r"[-_.:/]")


@functools.lru_cache(maxsize=4096)
def _redact_id(label: str) -> str:
    whole = redact_string(label)
    if whole is not label:
        return whole
    # In text, "x-sk-…" is no key (the shape must start a word); an id is glued from
    # parts, so each part after a separator is judged as if it started the text.
    for separator in _LABEL_SEPARATOR.finditer(label, 0, len(label) - 1):
        tail = label[separator.end() :]
        redacted = redact_string(tail)
        if redacted is not tail:
            return label[: separator.end()] + redacted
    return label


def redact_label(label: str | None) -> str | None:
    """Return an id (a correlation or causation id) with any secret in it replaced.

    Stricter than :func:`redact_text`: ``corr-sk-proj-…`` is redacted although ``sk-``
    does not start a word there. The ids Roost mints (``corr-`` + hex, UUIDs) hold no
    letter any rule needs and come back at once; other labels are judged once and cached.
    """
    if label is None or _PLAIN_LABEL.fullmatch(label):
        return label
    hit = _redact_id(label)
    return label if hit == label else hit


def redact_stream(chunks: Sequence[str]) -> list[str]:
    """Redact the chunks of one stream as the one text they make; one piece per chunk.

    ``"".join(redact_stream(c)) == redact_text("".join(c))``, so a secret split over
    chunks (``"ghp_ab"``, ``"cd…"``) is found as in the whole text. Where the text holds
    no secret the chunks come back unchanged. A chunk boundary that falls inside a
    secret moves back to where the secret starts: the chunks before it carry the text up
    to the secret, the chunk in which the secret ends carries its marker, and chunks
    wholly inside it become empty. Every piece is a slice of the redacted whole, so no
    piece holds any part of a secret the whole text would hide.
    """
    text = "".join(chunks)
    found = Replaced()
    whole = redact_string(text, found)
    if whole is text:
        return list(chunks)
    replaced = found.spans.spans
    pieces: list[str] = []
    done = 0  # where the previous piece ended, in ``whole``
    position = 0  # the boundary after the current chunk, in ``text``
    k = drift = 0
    for chunk in chunks[:-1]:
        position += len(chunk)
        while k < len(replaced) and replaced[k][1] <= position:
            o0, o1, c0, c1 = replaced[k]
            drift += (c1 - c0) - (o1 - o0)
            k += 1
        if k < len(replaced) and replaced[k][0] < position:
            cut = replaced[k][2]  # inside a secret: cut where it starts
        else:
            cut = position + drift
        pieces.append(whole[done:cut])
        done = cut
    pieces.append(whole[done:])
    return pieces


def scan(value: Any) -> list[Finding]:
    """List every secret :func:`redact` would replace in ``value``, in document order."""
    sink = _Sink()
    _walk(value, 0, sink, False)
    return sink.findings


def redact_with_findings(value: Any) -> tuple[Any, list[Finding]]:
    """Return ``(redact(value), scan(value))`` from a single walk over ``value``."""
    sink = _Sink()
    return _walk(value, 0, sink, False), sink.findings


def finding_kinds(findings: Iterable[Finding]) -> list[str]:
    """Return the distinct kinds of ``findings``, sorted (``sensitivity_finding_kinds``)."""
    return sorted({finding.kind for finding in findings})


_JSON_LIKE = frozenset({str, int, float, bool, type(None), dict, list, tuple})


def redaction_processor(
    logger: WrappedLogger, method_name: str, event_dict: EventDict
) -> EventDict:
    """Structlog processor: redact every value of the event dict, as events are redacted.

    Place it after ``format_exc_info`` (so tracebacks are redacted too) and before the
    renderer; ``exc_info`` itself is left for ``format_exc_info``. Values of other types
    are redacted through their ``repr`` when it holds a secret, and kept otherwise. An id
    (a key ending in ``_id``, such as the bound ``correlation_id``) is judged like an
    envelope label (:func:`redact_label`).

    A line whose values are all JSON-like is first judged as a whole from its JSON text
    (:func:`json_looks_clean`): a line with nothing any rule or sensitive name needs, which
    is most lines, is not walked value by value. An id's stricter judgement needs a
    trigger inside the id too, so the whole-line test never passes a line the walk would
    change.
    """
    if _line_looks_clean(event_dict):
        return event_dict
    for key, value in event_dict.items():
        if key == "exc_info":
            continue
        hide = isinstance(key, str) and is_sensitive_key(key)
        if type(value) is str and isinstance(key, str) and key.endswith("_id") and not hide:
            new = redact_label(value)
        elif type(value) in _JSON_LIKE:
            shown = _as_rendered(value, 0)
            new = _walk(shown, 0, _QUIET, hide)
            if new is shown:
                new = value
        else:
            shown = repr(value)
            new = REDACTED if hide else redact_string(shown)
            if new is shown:
                new = value
        event_dict[key] = new  # the same object when nothing changed (no key is added)
    return event_dict


def _as_rendered(value: Any, depth: int) -> Any:
    """``value`` as the log's renderer writes it: sets as lists, other objects as ``repr``.

    :func:`_walk` passes what is not JSON-like through untouched, and the renderer then
    writes a set's items or an object's ``repr``, so a secret nested in either would reach
    the log; the same object when there is nothing to change.
    """
    kind = type(value)
    if kind in (str, int, float, bool, type(None)) or depth > MAX_DEPTH:
        return value
    if kind is dict:
        items = {k: _as_rendered(v, depth + 1) for k, v in value.items()}
        same = all(items[k] is v for k, v in value.items())
        return value if same else items
    if kind in (list, tuple):
        shown = [_as_rendered(v, depth + 1) for v in value]
        return value if all(a is b for a, b in zip(shown, value, strict=True)) else shown
    if kind in (set, frozenset):
        return [_as_rendered(v, depth + 1) for v in value]
    return repr(value)


def _line_looks_clean(event_dict: EventDict) -> bool:
    """Whether a log line's values, all JSON-like, hold nothing redaction would change."""
    if "exc_info" in event_dict:
        return False
    for value in event_dict.values():
        if type(value) not in _JSON_LIKE:
            return False
    return looks_clean(event_dict)
