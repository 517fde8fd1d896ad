"""Output for people: aligned tables, ``key: value`` blocks, event lines, usage errors.

Everything here returns strings (no printing). The progress bar is
:mod:`runtime.cli.progress`.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

from runtime.errors import RoostError

__all__ = [
    "DefaultsHelpFormatter",
    "UsageError",
    "UsageParser",
    "cell",
    "dumps_json",
    "event_line",
    "kv_block",
    "number_type",
    "render",
    "seal_lines",
    "table",
]

_MAX_CELL = 60

_SEAL_PROBLEMS: dict[str, str] = {
    "truncated": (
        "the anchor says the journal reached event {expected_through} (seq {expected_seq}, "
        "checkpoint {checkpoint_index}, sealed {sealed_at}); that checkpoint is gone and the "
        "journal ends at event {found_through} (seq {found_seq}); the last intact seal covers "
        "events 1-{intact_through}"
    ),
    "rewritten": (
        "checkpoint {checkpoint_index} (seq {seq}) sealed event {head_position} at "
        "{sealed_at}, which no longer has the sealed hash: events after {after_position} up "
        "to {head_position} were changed and rehashed after the seal "
        "({later_checkpoints} later checkpoints disagree too)"
    ),
    "changed_after_seal": (
        "event {position} (seq {seq}) was changed after checkpoint {checkpoint_index} sealed "
        "it at {sealed_at} ({reason})"
    ),
    "mac_mismatch": (
        "checkpoint {checkpoint_index} (seq {seq}) does not carry a valid MAC: it was forged "
        "or edited, or made with another key"
    ),
    "checkpoint_missing": (
        "checkpoint {checkpoint_index} (seq {seq}) comes where checkpoint {expected_index} "
        "should: the checkpoints between are gone"
    ),
    "checkpoint_chain_broken": (
        "checkpoint {checkpoint_index} (seq {seq}) does not follow the checkpoint before it "
        "(expected number {expected_index})"
    ),
    "checkpoint_malformed": "the checkpoint at seq {seq} does not decode: {reason}",
    "missing_events": "events {from_position}-{to_position} are gone (before seq {before_seq})",
    "anchor_invalid": "the anchor outside the database cannot be trusted: {reason}",
    "anchor_missing": (
        "the anchor outside the database is gone while the journal holds {checkpoints} checkpoints"
    ),
    "anchor_checkpoint_missing": (
        "checkpoint {checkpoint_index}, which the anchor names (event {expected_position}, "
        "seq {expected_seq}, sealed {sealed_at}), is gone from the journal"
    ),
    "anchor_mismatch": (
        "the journal's checkpoint {checkpoint_index} (event {found_position}) is not the one "
        "the anchor sealed at {sealed_at} (event {expected_position})"
    ),
    "appended_after_shutdown": (
        "{appended_events} events were added after the clean shutdown of {closed_at} sealed "
        "the journal at event {sealed_through} (it now ends at event {found_through})"
    ),
    "anchor_stale": (
        "the anchor names checkpoint {anchor_index} but the journal holds checkpoint "
        "{journal_index}: the anchor is not being written"
    ),
}
"""A readable sentence per seal problem kind (``runtime.journal.seal``)."""


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


_N = TypeVar("_N", int, float)


def number_type(
    kind: Callable[[str], _N], accept: Callable[[_N], bool], expected: str
) -> Callable[[str], _N]:
    """An argparse ``type``: ``kind(text)`` when ``accept`` takes it.

    Otherwise (``text`` is no ``kind`` either) ``expected {expected}, got '{text}'``.
    """

    def parse(text: str) -> _N:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


class UsageError(RoostError):
    """The command line is wrong; the message says what and where to look (exit 2).

    Raised by the parser (:class:`UsageParser`) and by a command for a combination of
    options the parser cannot refuse by itself.
    """

    code = "usage"


class UsageParser(argparse.ArgumentParser):
    """An ArgumentParser that raises :class:`UsageError` instead of printing usage.

    Its help shows defaults (:class:`DefaultsHelpFormatter`). ``roost`` and ``roost soak``
    both parse with it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Raise :class:`UsageError` naming this parser's ``--help``."""
        raise UsageError(f"{message} (see `{self.prog} --help`)")


@functools.cache
def _columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reads it, once per process.

    argparse makes a help formatter for every argument it adds (about 120 for ``roost``),
    each asking the terminal and importing ``shutil``; one answer serves them all.
    """
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class DefaultsHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` that shows each option's default when it has a meaningful one.

    Descriptions and epilogs (the examples) keep their line breaks.
    """

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        width = _columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or default in (None, False, argparse.SUPPRESS)
            or default == {}
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


def dumps_json(value: Any, *, pretty: bool = True) -> str:
    """Encode ``value`` as JSON text (indented unless ``pretty=False``)."""
    from runtime.wire.client_codec import encode_json  # noqa: PLC0415 - not for --version

    return encode_json(value, indent=pretty).decode()


@functools.singledispatch
def _text(value: object) -> str:
    """A value's text in a cell: containers (and anything not registered) as compact JSON."""
    return dumps_json(value, pretty=False)


_text.register(type(None), lambda value: "-")
_text.register(bool, lambda value: "yes" if value else "no")
_text.register(str, lambda value: value)
_text.register(int, str)
_text.register(float, str)


def cell(value: Any, max_width: int | None = _MAX_CELL) -> str:
    """Render one value for a table cell or a ``key: value`` line, on one line.

    ``None`` is ``-``; booleans are ``yes``/``no``; containers are compact JSON; text
    longer than ``max_width`` is cut with ``…``.
    """
    text = _text(value).replace("\r", " ").replace("\n", " ")
    if max_width is not None and len(text) > max_width:
        text = text[: max_width - 1] + "…"
    return text


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]] | None = None,
    *,
    empty: str = "(none)",
) -> str:
    """Render rows as an aligned table; ``columns`` are ``(key, HEADER)`` pairs.

    Without ``columns``, every key seen (in first-seen order) becomes one. The last
    column is not padded. ``empty`` is returned when there are no rows, or no columns.
    """
    if columns is None:
        keys: dict[str, None] = {}
        for row in rows:
            keys.update(dict.fromkeys(row))
        columns = [(k, k.upper()) for k in keys]
    if not rows or not columns:
        return empty
    grid = [[header for _, header in columns]]
    grid += [[cell(row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(columns))]
    lines = []
    for line in grid:
        padded = [text.ljust(width) for text, width in zip(line[:-1], widths, strict=False)]
        lines.append("  ".join([*padded, line[-1]]).rstrip())
    return "\n".join(lines)


def _is_table(value: Any) -> bool:
    return (
        isinstance(value, list) and bool(value) and all(isinstance(item, Mapping) for item in value)
    )


Shape = Callable[[Any], bool]
"""Whether a value has a shape (the first shape of a table that fits picks its rendering)."""


def _block_lines(pad: str, key: str, label: str, value: Any) -> list[str]:
    return [f"{pad}{key}:", kv_block(value, len(pad) + 2)]


def _table_lines(pad: str, key: str, label: str, value: Any) -> list[str]:
    return [f"{pad}{key}:", *(f"{pad}  {line}" for line in table(value).splitlines())]


def _list_line(pad: str, key: str, label: str, value: list[Any]) -> list[str]:
    text = ", ".join(cell(item, None) for item in value) if value else "-"
    return [f"{pad}{label} {text}"]


def _lines_block(pad: str, key: str, label: str, value: str) -> list[str]:
    lines = value.rstrip("\n").split("\n")
    return [f"{pad}{label} |", *(f"{pad}  {line}".rstrip() for line in lines)]


def _text_line(pad: str, key: str, label: str, value: str) -> list[str]:
    return [f"{pad}{label} {cell(value.rstrip(chr(10)), None)}".rstrip()]


def _value_line(pad: str, key: str, label: str, value: Any) -> list[str]:
    return [f"{pad}{label} {cell(value, None)}"]


KvLines = Callable[[str, str, str, Any], list[str]]
"""The lines of one ``key: value``: from the indent, the key, the aligned ``key:`` label and
the value."""

_KV_SHAPES: tuple[tuple[Shape, KvLines], ...] = (
    (lambda value: isinstance(value, Mapping) and bool(value), _block_lines),
    (_is_table, _table_lines),
    (lambda value: isinstance(value, list), _list_line),
    (lambda value: isinstance(value, str) and "\n" in value.rstrip("\n"), _lines_block),
    (lambda value: isinstance(value, str), _text_line),
    (lambda value: True, _value_line),
)
"""How :func:`kv_block` renders each shape of value, first fit first."""


def kv_block(mapping: Mapping[str, Any], indent: int = 0) -> str:
    """Render a mapping as aligned ``key: value`` lines; nested values are indented.

    A nested mapping becomes an indented block; a list of mappings an indented table; a
    list of scalars a comma-separated line (``-`` when empty); text of several lines (a
    command's output) ``key: |`` and its lines, indented, as they are.
    """
    if not mapping:
        return " " * indent + "(empty)"
    pad = " " * indent
    width = max(len(str(key)) for key in mapping) + 1
    lines: list[str] = []
    for key, value in mapping.items():
        kv_lines = next(shown for fits, shown in _KV_SHAPES if fits(value))
        lines.extend(kv_lines(pad, key, f"{key}:".ljust(width), value))
    return "\n".join(lines)


def _list_text(value: list[Any]) -> str:
    return "\n".join(cell(item, None) for item in value) if value else "(none)"


_RENDER_SHAPES: tuple[tuple[Shape, Callable[[Any], str]], ...] = (
    (lambda value: isinstance(value, Mapping), kv_block),
    (_is_table, table),
    (lambda value: isinstance(value, list), _list_text),
    (lambda value: True, lambda value: cell(value, None)),
)
"""How :func:`render` shows each shape of result, first fit first."""


def render(value: Any) -> str:
    """Render any result for people: a block, a table, a list or the text itself."""
    return next(show for fits, show in _RENDER_SHAPES if fits(value))(value)


def event_line(event: Mapping[str, Any]) -> str:
    """One line per event, for ``roost tail``: seq, time, conversation, type, data."""
    conversation = event.get("conversation_id") or "-"
    data = event.get("data") or {}
    summary = cell(data, 100) if data else ""
    return (
        f"{event.get('seq', '?'):>6}  {event.get('at', '')}  {conversation}  "
        f"{event.get('type', '?')}  {summary}"
    ).rstrip()


def seal_lines(result: Mapping[str, Any]) -> list[str]:
    """The seal part of a ``verify`` result: a summary line and one line per problem."""
    seal = result.get("seal")
    if not isinstance(seal, Mapping):
        return []
    verdict = "seals ok" if result.get("anchor_ok") else "seals BROKEN"
    count = seal.get("checkpoints", 0)
    unsealed = seal.get("unsealed_events", 0)
    tail = f"{unsealed} unsealed event{'' if unsealed == 1 else 's'}"
    parts = [f"{count} checkpoint{'' if count == 1 else 's'}"]
    if seal.get("sealed_through"):
        parts.append(
            f"sealed through event {seal['sealed_through']} (seq {cell(seal.get('sealed_seq'))})"
            f" at {cell(seal.get('sealed_at'))}"
        )
        parts.append(f"{tail} after it")
    else:
        parts.append(f"nothing sealed yet; {tail}")
    parts.append(f"anchor {cell(seal.get('anchor'))}")
    lines = [f"{verdict}: {'; '.join(parts)}"]
    problems = result.get("anchor_problems") or []
    if problems:
        lines.append(f"{len(problems)} anchor problem{'' if len(problems) == 1 else 's'}:")
    for problem in problems:
        fields = _Fields({k: cell(v, None) for k, v in dict(problem).items()})
        kind = fields.get("kind", "problem")
        template = _SEAL_PROBLEMS.get(kind)
        if template is None:
            rest = ", ".join(f"{k}={v}" for k, v in fields.items() if k != "kind")
            lines.append(f"  - {kind}: {rest}")
        else:
            lines.append(f"  - {kind}: {template.format_map(fields)}")
    return lines
