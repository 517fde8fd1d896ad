"""The ids and keys a client may choose, and the shape each must have before it is stored.

Envelope fields are not payload: a ``correlation_id`` is stored with every event it causes,
printed by ``roost timeline``, ``roost tail`` and ``roost incident``, bound to every log
line, and used to filter; a project or conversation id names streams and rows; an
idempotency key is stored with its batch. Redacting one would break what it identifies,
so a client-chosen id is checked where it enters (the gateway, through
:func:`check_client_ids`, at the paths its op's row in ``runtime.wire.ops.OP_TABLE``
declares) and refused when it has another shape or looks like a secret:

=======================  =====================================  ==========================
field                    shape                                  refused with
=======================  =====================================  ==========================
``project_id``           ``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``    ``invalid_project_id``
``conversation_id``      ``[A-Za-z0-9][A-Za-z0-9._-]{0,63}``    ``invalid_conversation_id``
``correlation_id``       ``[A-Za-z0-9._:-]{1,128}``             ``invalid_correlation_id``
``idempotency_key``      ``[A-Za-z0-9._:-]{1,128}``             ``invalid_idempotency_key``
=======================  =====================================  ==========================

"Looks like a secret" means :func:`runtime.guard.secrets.redaction.redact_label` would change it
(``corr-ghp_…``, ``corr-sk-proj-…``, ``AKIA…``, ``x-api-key:…``). Every refusal is
``bad_request`` with ``{reason, field}``; the message never repeats the value. Ids that
are only looked up (an existing project's id, a timeline's correlation filter) are not
checked here: they are not stored, and ``project_not_found`` or an empty answer says
enough.
"""

from __future__ import annotations

import re
from typing import Any

from runtime.errors import BadRequestError
from runtime.guard.secrets.redaction import redact_label
from runtime.wire.ops import OP_TABLE, Args, IdKind, id_at

__all__ = [
    "CORRELATION_ID",
    "IDEMPOTENCY_KEY",
    "NAME_ID",
    "check_client_ids",
    "check_id",
]

NAME_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A project or conversation id."""
CORRELATION_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
"""A correlation id (Roost mints ``corr-`` + 20 hex)."""
IDEMPOTENCY_KEY = CORRELATION_ID
"""An idempotency key (the client sends a UUID)."""

_SHAPES = {
    NAME_ID: "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
    CORRELATION_ID: "1-128 letters, digits, '.', '_', ':' or '-'",
}


def check_id(value: Any, *, name: str, shape: re.Pattern[str], reason: str, field: str) -> None:
    """Raise ``bad_request {reason, field}`` unless ``value`` fits ``shape`` and is no secret."""
    if isinstance(value, str) and shape.fullmatch(value):
        if redact_label(value) == value:
            return
        problem = "looks like a secret (it would be stored and shown in the clear)"
    else:
        problem = f"must be {_SHAPES[shape]}"
    raise BadRequestError(f"{name} {problem}; choose another", reason=reason, field=field)


_KINDS: dict[IdKind, tuple[str, re.Pattern[str], str]] = {
    "project_id": ("project id", NAME_ID, "invalid_project_id"),
    "conversation_id": ("conversation id", NAME_ID, "invalid_conversation_id"),
    "correlation_id": ("correlation_id", CORRELATION_ID, "invalid_correlation_id"),
    "idempotency_key": ("idempotency_key", IDEMPOTENCY_KEY, "invalid_idempotency_key"),
}
"""Per kind of id: what to call it, its shape, the refusal's reason."""


def check_client_ids(op: str, args: Args) -> None:
    """Check every id ``op``'s validated ``args`` would store (its row's ``ids`` say where).

    An absent id (null or ``""``) is minted by the daemon and needs no check.
    """
    for kind, path in OP_TABLE[op].ids:
        value = id_at(args, path)
        if value is not None and value != "":
            name, shape, reason = _KINDS[kind]
            check_id(value, name=name, shape=shape, reason=reason, field=".".join(path))
