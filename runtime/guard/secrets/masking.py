r"""Masking known secret values, and their common encodings, in text a tool returned.

Shape rules (:mod:`runtime.guard.secrets.patterns`) find what looks like a secret; this
module finds what *is* one: the exact values Roost knows (a sensitive file's values, the
environment it withheld from tools; :mod:`runtime.guard.secrets.sources` gathers them), as
CI systems mask their secret variables. Each value is searched for as itself and as

- reversed (``rev``), JSON-escaped, URL-encoded (``%2F`` and ``%2f``, ``+`` for spaces),
- hex, lower and upper case, of the value and of its reverse (``xxd -p``, ``od -An -tx1``),
- base64, standard and URL-safe, of the value and of its reverse, at the three alignments
  the value can have inside a longer base64 stream (``git show HEAD:.env | base64``): the
  characters wholly decided by the value's own bytes, not the ones that mix in a neighbour;
- base32 of the value and of its reverse, at its five alignments (``base32``);
- the value's bytes written one by one as a byte dump or a source literal writes them:
  octal (``od -b``), decimal (``od -tu1``, a Python ``list``), ``\x73``, ``\u0073``
  (JSON or JavaScript escaping every character) and ``0x73,`` (``xxd -i``), lower case.

Everything is searched in the text with ASCII whitespace removed, so line-wrapped base64 or
hex and byte dumps with spaces between bytes match too; a match is mapped back to the text
and replaced, whitespace inside it included, by ``[REDACTED:secret_value]``.
The search is one RE2 program (an alternation of escaped literals, leftmost-longest, in
time linear in the text) over the UTF-8 bytes; overlapping matches are all masked.
A value (and each encoded form) shorter than :data:`MIN_SECRET_LENGTH` is not searched
for: it would mask ordinary words.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import quote, quote_plus

import re2

from runtime.guard.secrets.rule import SecretKind, marker
from runtime.guard.shapes.safe_json import json_type_name

__all__ = [
    "MAX_SECRET_VALUES",
    "MIN_SECRET_LENGTH",
    "SECRET_VALUE_MARKER",
    "SecretMasker",
    "encoded_forms",
]

MIN_SECRET_LENGTH = 8
"""Shortest value (and encoded form), in characters, that is masked (GitLab's minimum)."""

MAX_SECRET_VALUES = 2048
"""Most values one masker searches for; more are ignored (longest kept first)."""

MAX_VALUE_LENGTH = 8192
"""Longest value searched for, in characters; longer values are ignored."""

SECRET_VALUE_MARKER = marker(SecretKind.SECRET_VALUE.value)
"""What a masked value becomes."""

_MARKER_BYTES = SECRET_VALUE_MARKER.encode()
_WHITESPACE = b" \t\r\n\v\f"
_MAX_MEM = 64 << 20
_URL_SAFE = ("", "/", "/:@!$&'()*+,;=", "!'()*")
"""Characters left as they are by: strict quoting, Python's ``quote``, RFC 3986 paths,
JavaScript's ``encodeURIComponent``."""
_LOWER_ESCAPE = re.compile(r"%[0-9A-F]{2}")
_CHUNK_BYTES = 24 * 1024
"""Pattern bytes per RE2 program: larger alternations outgrow the DFA's memory, and RE2
then falls back to a search a hundred times slower."""
_MAX_SEARCHES = 4096
"""Searches for overlapping matches per text before the rest is searched without overlap."""


def _base64_fragments(data: bytes) -> list[bytes]:
    """The base64 characters ``data`` alone decides, at each of the 3 alignments."""
    out: list[bytes] = []
    for shift, skip in ((0, 0), (1, 2), (2, 3)):
        padded = b"\0" * shift + data
        whole = padded[: len(padded) // 3 * 3]
        fragment = base64.b64encode(whole)[skip:]
        out.append(fragment)
        out.append(fragment.replace(b"+", b"-").replace(b"/", b"_"))
    return out


def _base32_fragments(data: bytes) -> list[bytes]:
    """The base32 characters ``data`` alone decides, at each of the 5 alignments."""
    out: list[bytes] = []
    for shift in range(5):
        padded = b"\0" * shift + data
        whole = padded[: len(padded) // 5 * 5]
        out.append(base64.b32encode(whole)[-(-shift * 8 // 5) :])
    return out


def _byte_escapes(data: bytes) -> set[bytes]:
    r"""``data`` written byte by byte: octal, decimal, ``\x``, ``\u`` and ``0x`` forms.

    Lower case only, as the usual tools write them: each form is three to six times the
    value's length, and the search's cost grows with the literals' total size.
    """
    decimal = [str(b) for b in data]
    forms = {
        "".join(f"{b:03o}" for b in data),
        "".join(decimal),
        ",".join(decimal),
        "".join(f"\\x{b:02x}" for b in data),
        ",".join(f"0x{b:02x}" for b in data),
    }
    if data.isascii():
        forms.add("".join(f"\\u{b:04x}" for b in data))
    return {form.encode() for form in forms}


def encoded_forms(value: str) -> set[bytes]:
    """Every form of ``value`` the masker searches for, as UTF-8 bytes without whitespace."""
    raw = value.encode("utf-8", "surrogatepass")
    reverse = value[::-1].encode("utf-8", "surrogatepass")
    forms: set[bytes] = {raw, reverse}
    forms.add(json.dumps(value)[1:-1].encode("utf-8", "surrogatepass"))
    for text in (value, value[::-1]):
        for safe in _URL_SAFE:
            for quoted in (quote(text, safe=safe), quote_plus(text, safe=safe)):
                forms.add(quoted.encode())
                forms.add(_LOWER_ESCAPE.sub(lambda m: m.group(0).lower(), quoted).encode())
    for data in (raw, reverse):
        hexed = binascii.hexlify(data)
        forms.update((hexed, hexed.upper()))
        forms.update(_base64_fragments(data))
        forms.update(_base32_fragments(data))
    forms |= _byte_escapes(raw)
    squeezed = {form.translate(None, _WHITESPACE) for form in forms}
    return {form for form in squeezed if len(form) >= MIN_SECRET_LENGTH}


class SecretMasker:
    """Masks a fixed set of secret values in strings and JSON-like data (immutable, thread-safe).

    Build it once per set of values (compiling costs about 10 µs per value); an empty set
    masks nothing and costs nothing.
    """

    def __init__(self, values: Iterable[str]) -> None:
        kept = sorted(
            {
                v
                for v in values
                if MIN_SECRET_LENGTH <= len(v) <= MAX_VALUE_LENGTH
                and len(v.translate({ord(c): None for c in " \t\r\n\v\f"})) >= MIN_SECRET_LENGTH
            },
            key=lambda v: (-len(v), v),
        )[:MAX_SECRET_VALUES]
        self.values: frozenset[str] = frozenset(kept)
        """The values searched for."""
        forms: set[bytes] = set()
        for value in kept:
            forms |= encoded_forms(value)
        self.forms_count = len(forms)
        """How many literals the search holds."""
        self._regexes: list[Any] = []
        options = re2.Options()
        options.longest_match = True
        options.max_mem = _MAX_MEM
        chunk: list[bytes] = []
        size = 0
        for form in sorted(forms, key=lambda f: (-len(f), f)):
            chunk.append(re2.escape(form))
            size += len(chunk[-1]) + 1
            if size >= _CHUNK_BYTES:
                self._regexes.append(re2.compile(b"|".join(chunk), options))
                chunk, size = [], 0
        if chunk:
            self._regexes.append(re2.compile(b"|".join(chunk), options))

    def __bool__(self) -> bool:
        return bool(self._regexes)

    def mask_text(self, text: str) -> tuple[str, int]:
        """Return ``text`` with every occurrence masked, and how many were masked."""
        if not self._regexes or len(text) < MIN_SECRET_LENGTH:
            return text, 0
        data = text.encode("utf-8", "surrogatepass")
        squeezed = data.translate(None, _WHITESPACE)
        spans = self._spans(squeezed)
        if not spans:
            return text, 0
        spans = _unsqueeze(data, spans)  # the same spans when no whitespace was removed
        out: list[bytes] = []
        done = 0
        for start, end in spans:
            out.append(data[done:start])
            out.append(_MARKER_BYTES)
            done = end
        out.append(data[done:])
        return b"".join(out).decode("utf-8", "surrogatepass"), len(spans)

    def _spans(self, data: bytes) -> list[tuple[int, int]]:
        """Merged ``[start, end)`` spans of every match, overlapping ones included."""
        found: list[tuple[int, int]] = []
        for regex in self._regexes:
            found.extend(_matches(regex, data))
        found.sort()  # one program's matches come sorted; several programs' interleave
        merged: list[tuple[int, int]] = []
        for start, end in found:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def mask(self, value: Any) -> tuple[Any, int]:
        """Return JSON-like ``value`` with every string (and dict key) masked, and the count.

        Containers are copied only where something inside changed; untouched input comes
        back as the very same object.
        """
        if not self._regexes:
            return value, 0
        return self._walk(value, 0)

    def _walk(self, value: Any, depth: int) -> tuple[Any, int]:
        if isinstance(value, str):
            return self.mask_text(value)
        if depth > 200:
            return value, 0
        return _CONTAINER_WALKS.get(json_type_name(value), _unmasked)(self, value, depth)

    def _walk_object(self, value: dict[Any, Any], depth: int) -> tuple[Any, int]:
        pairs: list[tuple[Any, Any]] = []
        total = 0
        for key, item in value.items():
            new_key, k = self.mask_text(key) if isinstance(key, str) else (key, 0)
            new, n = self._walk(item, depth + 1)
            pairs.append((new_key, new))
            total += k + n
        if not total:
            return value, 0
        return dict(pairs), total

    def _walk_array(self, value: Sequence[Any], depth: int) -> tuple[Any, int]:
        elements = [self._walk(item, depth + 1) for item in value]
        total = sum(n for _, n in elements)
        if not total:
            return value, 0
        return [new for new, _ in elements], total


def _unmasked(masker: SecretMasker, value: Any, depth: int) -> tuple[Any, int]:
    """A number, boolean, null or other object: nothing to mask."""
    return value, 0


_CONTAINER_WALKS: dict[str, Callable[[SecretMasker, Any, int], tuple[Any, int]]] = {
    "object": SecretMasker._walk_object,
    "array": SecretMasker._walk_array,
}
"""How a container of each JSON type is masked (a copy only where something changed)."""


def _matches(regex: Any, data: bytes) -> Iterator[tuple[int, int]]:
    """Every match of ``regex`` in ``data``, including those that start inside another."""
    pos = 0
    searches = 0
    while True:
        found = regex.search(data, pos)
        if found is None:
            return
        start, end = found.span()
        yield start, end
        searches += 1
        # the next match may start inside this one and reach past it
        pos = start + 1 if searches < _MAX_SEARCHES else max(end, start + 1)


def _advance(data: bytes, at: int, count: int) -> int:
    """The offset in ``data`` just past ``count`` non-whitespace bytes from ``at``."""
    while count > 0 and at < len(data):
        chunk = data[at : at + count]
        at += len(chunk)
        count -= len(chunk.translate(None, _WHITESPACE))
    return at


def _unsqueeze(data: bytes, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Map spans of ``data`` with whitespace removed back to spans of ``data``.

    One pass over ``data`` at C speed: slices are counted with ``bytes.translate``.
    """
    out: list[tuple[int, int]] = []
    at = squeezed_at = 0
    for start, end in spans:
        at = _advance(data, at, start - squeezed_at)
        while data[at] in _WHITESPACE:  # the match starts at a byte that is not
            at += 1
        first = at
        at = _advance(data, at, end - start)
        squeezed_at = end
        out.append((first, at))
    return out
