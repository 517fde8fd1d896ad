"""Whether redaction would change a value, told from its JSON text at once.

Every rule needs one of the gate's trigger words in a string, and every sensitive key
needs one of the sensitive words once separators are dropped: when a document's JSON text
holds neither, walking it string by string would change nothing. One search over the text
costs a fraction of that walk, and the journal, each host's stage and every log line pay
it, so the walk runs only where a trigger is. Used by :mod:`runtime.guard.secrets.redaction`.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from runtime.guard.secrets.key_names import _SENSITIVE_WORDS, _SEPARATOR_CHARS, _SEPARATORS
from runtime.guard.secrets.patterns import has_ascii_trigger, has_trigger

__all__ = ["MAX_DEPTH", "json_looks_clean", "looks_clean"]

MAX_DEPTH = 200
"""Containers nested deeper than this are replaced whole by ``[REDACTED:depth_limit]``."""

_JSON = msgspec.json.Encoder()
_FAST_LIMIT = 65536
_TAB_ESCAPE = b"\\t"
_ASCII_WORD = re.compile("|".join(_SENSITIVE_WORDS).encode("ascii")).search
_ASCII_SEPARATORS = _SEPARATOR_CHARS.encode("ascii")


def looks_clean(value: Any) -> bool:
    """Tell, from the JSON text of ``value`` as a whole, that no rule can match in it.

    One encode and a few substring searches (:func:`json_looks_clean`) cost a fraction of
    walking each string (the journal calls this for every event it appends). Anything odd
    (unencodable, very large) takes the full walk.
    """
    if isinstance(value, str):
        return False  # redact_string's own gate is cheaper than an encode
    try:
        text = _JSON.encode(value)
    except (TypeError, ValueError, msgspec.EncodeError):
        return False
    return json_looks_clean(text)


def json_looks_clean(text: bytes) -> bool:
    """Tell, from msgspec's JSON text of a value, that no rule can match in the value.

    Every rule needs one of the gate's trigger words in a string, and every sensitive key
    needs one of the sensitive words once separators are dropped; when the document holds
    neither, the walk would change nothing. JSON writes a tab as a backslash and ``t``,
    which hides the triggers that start with one (a password flag after a tab), so a
    document with that escape is never called clean; no other trigger holds a character
    JSON escapes.
    Large documents, and ones possibly deeper than the walk's limit, are not called clean.
    """
    if len(text) > _FAST_LIMIT or text.count(b"[") + text.count(b"{") >= MAX_DEPTH:
        return False
    if _TAB_ESCAPE in text:
        return False
    if text.isascii():  # most events: the same tests on bytes, without a decode
        lowered_bytes = text.lower()
        if has_ascii_trigger(lowered_bytes):
            return False
        squeezed_bytes = lowered_bytes.translate(None, _ASCII_SEPARATORS)
        return _ASCII_WORD(squeezed_bytes) is None
    lowered = text.decode("utf-8").lower()
    if has_trigger(lowered):
        return False
    squeezed = lowered.translate(_SEPARATORS)
    return all(word not in squeezed for word in _SENSITIVE_WORDS)
