"""What a sensitive file holds: the secret values read from its text.

:class:`~runtime.guard.secrets.sources.SecretSources` masks them: ``KEY=VALUE`` /
``export KEY=VALUE`` / ``key: value`` lines (quotes and inline comments dropped), a JSON
document's strings, a PEM block's body lines, and lines that are a bare token. A value of
letters only or digits only counts only under a sensitive key (``NODE_ENV=production`` is
no secret).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from runtime.guard.secrets.key_names import is_sensitive_key
from runtime.guard.secrets.masking import MIN_SECRET_LENGTH
from runtime.guard.secrets.rule import ordinary_word

__all__ = ["file_values"]

_LINE = re.compile(r"""^(?:export\s+)?["']?([A-Za-z_][A-Za-z0-9_.\-]*)["']?\s*[=:]\s*(.*?)[,;]?$""")
_PEM_MARK = re.compile(r"\A-----(BEGIN|END) [A-Z0-9 ]+-----\Z")
"""``findall`` gives ``["BEGIN"]`` or ``["END"]`` on a PEM block's first or last line."""


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] in "\"'`":
        end = value.find(value[0], 1)
        return value[1:end] if end > 0 else value[1:]
    return re.split(r"\s+#", value, maxsplit=1)[0].strip()


def _json_strings(value: Any, depth: int = 0) -> Iterator[tuple[str, str]]:
    """``(key, string)`` for every string in a JSON document (the key: the nearest one)."""
    if depth > 64:
        return
    for key, item in _MEMBERS.get(type(value), _no_members)(value):
        if isinstance(item, str):
            yield key, item
        else:
            yield from _json_strings(item, depth + 1)


def _no_members(value: Any) -> Iterator[tuple[str, Any]]:
    return iter(())


_MEMBERS: dict[type, Callable[[Any], Iterator[tuple[str, Any]]]] = {
    dict: lambda value: ((str(key), item) for key, item in value.items()),
    list: lambda value: (("", item) for item in value),
}
"""A parsed JSON container's members, each with its key (``""`` in an array)."""


class _FileReader:
    """The ``(key, value)`` pairs of a sensitive file's lines, read one line at a time.

    Outside a PEM block a line is ``KEY=VALUE`` or a bare token; inside one it is a body
    line (headers such as ``Proc-Type:`` aside). ``on_line`` is the reading of the state
    the reader is in; a ``BEGIN`` or ``END`` line switches it.
    """

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []
        self.body: list[str] = []
        self.on_line: Callable[[str], None] = self.text_line

    def read(self, text: str) -> None:
        marks = {"BEGIN": self.begin, "END": self.end}
        for raw in text.splitlines():
            line = raw.strip()
            marks.get("".join(_PEM_MARK.findall(line)), self.on_line)(line)

    def begin(self, line: str) -> None:
        self.on_line, self.body = self.pem_line, []

    def end(self, line: str) -> None:
        self.on_line = self.text_line
        self.pairs.extend(("pem", part) for part in (*self.body, "".join(self.body)))

    def pem_line(self, line: str) -> None:
        if ":" not in line:  # not a header such as Proc-Type:
            self.body.append(line)

    def text_line(self, line: str) -> None:
        if not line or line[0] in "#;":
            return
        found = _LINE.match(line)
        if found is not None:
            self.pairs.append((found.group(1), _unquote(found.group(2).strip())))
        elif not any(c.isspace() for c in line):
            self.pairs.append(("token", line))


def file_values(text: str) -> set[str]:
    """The secret values a sensitive file's ``text`` holds (see the module docstring)."""
    reader = _FileReader()
    with contextlib.suppress(ValueError):  # not JSON; a JSON scalar holds no pairs
        reader.pairs.extend(_json_strings(json.loads(text.strip())))
    reader.read(text)
    return {
        value
        for key, value in reader.pairs
        if len(value) >= MIN_SECRET_LENGTH
        and (not ordinary_word(value) or key in ("pem", "token") or is_sensitive_key(key))
    }
