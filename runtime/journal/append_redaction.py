"""What the journal hides before it links a batch: secrets in data, ids and streamed text.

:class:`AppendRedaction` is the first step of an append (:class:`runtime.journal.store.Journal`):
each model round's ``assistant.delta`` events are redacted as one text (a secret split over
two deltas is only a secret in their concatenation), then every event's ``data``,
``correlation_id`` and ``causation_id`` (:mod:`runtime.guard.secrets.redaction`). A test may give
its own redactor, which then replaces the whole step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from events.codecs import canonical_json
from events.envelope import NewEvent

__all__ = ["AppendRedaction", "Redactor"]

Redactor = Callable[[Any], Any]
"""Redacts an event's ``data``."""
EncodedRedactor = Callable[[Any, bytes], Any]
"""Redacts an event's ``data`` given its JSON text (``redact_encoded``)."""
LabelRedactor = Callable[[str | None], str | None]
StreamRedactor = Callable[[Sequence[str]], list[str]]


def _default_redactors() -> tuple[Redactor, EncodedRedactor, LabelRedactor, StreamRedactor]:
    from runtime.guard.secrets.redaction import (  # noqa: PLC0415 - keeps events/ import-light
        redact,
        redact_encoded,
        redact_label,
        redact_stream,
    )

    return redact, redact_encoded, redact_label, redact_stream


def _same_label(label: str | None) -> str | None:
    return label


def _same_stream(chunks: Sequence[str]) -> list[str]:
    return list(chunks)


def _stream_key(event: NewEvent) -> tuple[str, str | None, str | None] | None:
    """The model round an ``assistant.delta`` belongs to (None for other events)."""
    if event.type != "assistant.delta" or not isinstance(event.data.get("content"), str):
        return None
    return (event.project_id, event.conversation_id, event.causation_id)


def _redact_streams(events: list[NewEvent], redact_stream: StreamRedactor) -> list[NewEvent]:
    """Redact each streamed text of ``events`` as a whole, not chunk by chunk.

    A model round's ``assistant.delta`` events (same conversation and cause) are one text:
    a secret split over two deltas is only a secret in their concatenation. The same holds
    for the ``delta_chunks`` a ``user.message`` hands the deterministic model. Each delta
    keeps its event; see :func:`runtime.guard.secrets.redaction.redact_stream` for where the text
    goes.
    """
    rounds: dict[tuple[str, str | None, str | None], list[int]] = {}
    out = events
    for index, event in enumerate(events):
        key = _stream_key(event)
        if key is not None:
            rounds.setdefault(key, []).append(index)
            continue
        llm = event.data.get("llm") if event.type == "user.message" else None
        if not isinstance(llm, dict):
            continue
        chunks = llm.get("delta_chunks")
        if isinstance(chunks, list) and len(chunks) > 1 and all(isinstance(c, str) for c in chunks):
            pieces = redact_stream(chunks)
            if pieces != chunks:
                out = list(events) if out is events else out
                data = {**event.data, "llm": {**llm, "delta_chunks": pieces}}
                out[index] = msgspec.structs.replace(event, data=data)
    for indexes in rounds.values():
        if len(indexes) < 2:
            continue  # one delta alone is redacted with the rest of its data
        chunks = [out[i].data["content"] for i in indexes]
        pieces = redact_stream(chunks)
        for i, chunk, piece in zip(indexes, chunks, pieces, strict=True):
            if piece != chunk:
                out = list(events) if out is events else out
                out[i] = msgspec.structs.replace(out[i], data={**out[i].data, "content": piece})
    return out


class AppendRedaction:
    """The redaction step of an append; ``redactor`` (a test's) replaces all of it."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self._encoded: EncodedRedactor | None
        self.trusts_senders = redactor is None
        """Whether a batch its sender redacted with the default rules (``Batch.redacted``)
        is hashed as it is: not with a test's redactor, which the sender did not run."""
        if redactor is None:
            self._data, self._encoded, self._label, self._stream = _default_redactors()
        else:
            self._data, self._label, self._stream = redactor, _same_label, _same_stream
            self._encoded = None

    def streams(self, events: list[NewEvent]) -> list[NewEvent]:
        """``events`` with each streamed text redacted as a whole (see :func:`_redact_streams`)."""
        return _redact_streams(events, self._stream)

    def event(
        self, event: NewEvent, *, data: bool = True, data_json: bytes | None = None
    ) -> NewEvent:
        """``event`` with its ``data`` (unless ``data`` is false) and its ids redacted.

        ``data_json``: the JSON text of ``event.data`` when the caller has it (any key
        order); the check for secrets then scans it instead of encoding the data again.
        """
        if not data:
            redacted = event.data
        elif data_json is not None and self._encoded is not None:
            redacted = self._encoded(event.data, data_json)
        else:
            redacted = self._data(event.data)
        correlation = self._label(event.correlation_id)
        causation = self._label(event.causation_id)
        same_ids = correlation is event.correlation_id and causation is event.causation_id
        if redacted is event.data and same_ids:
            return event  # nothing redacted (the common case): no copy on every append
        return msgspec.structs.replace(
            event, data=redacted, correlation_id=correlation or "", causation_id=causation
        )

    def hashable(self, event: NewEvent, *, data: bool = True) -> tuple[NewEvent, bytes | None]:
        """:meth:`event`, and the canonical JSON of the data it keeps (for its hash).

        The JSON is encoded once: the check for secrets scans it, and when nothing was
        redacted it is what the hash covers. None when the data cannot be encoded (the
        hash then says why) or when something was redacted.
        """
        try:
            data_json: bytes | None = canonical_json(event.data)
        except (TypeError, ValueError, msgspec.EncodeError):
            data_json = None
        redacted = self.event(event, data=data, data_json=data_json)
        return redacted, (data_json if redacted.data is event.data else None)
