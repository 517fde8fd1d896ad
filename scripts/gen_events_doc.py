"""Write docs/events.md from events/catalog.py (``python scripts/gen_events_doc.py``).

A test compares the file with this script's output, so the catalog doc cannot drift.
"""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

from events import catalog
from events.catalog import PAYLOAD_TYPES, SIGNAL_TYPES

HEADER = """# Event catalog

Generated from `events/catalog.py` by `scripts/gen_events_doc.py` (a test keeps the two in
step). Every event has the envelope of SPEC section 4; this page lists each type's `data`.

## Envelope

| field | type | meaning |
|---|---|---|
| `seq` | int | global position, assigned at commit (eventsourcing notification id); strictly increasing |
| `stream_version` | int | position in its stream from 1: the conversation's for conversation events, the project-level stream's otherwise |
| `event_id` | str | UUID4 |
| `type` | str | dotted type (below) |
| `at` | str | UTC ISO 8601 with milliseconds and `Z`, from the runtime's clock |
| `project_id` / `conversation_id` | str / str or null | owner; null conversation for project-level events |
| `correlation_id` | str | `corr-` + 20 hex unless the client gave one (`[A-Za-z0-9._:-]{1,128}`, not secret-shaped); inherited by every caused event; redacted before append |
| `causation_id` | str or null | `event_id` of the cause; null for inbound events; redacted before append |
| `data` | object | the payload below (redacted before append; a model round's `assistant.delta` contents as one text) |
| `hash` / `prev_hash` | str | SHA-256 chain over the project's events (`prev_hash` of the first is 64 zeros) |

The hash covers `prev_hash` and the canonical JSON (sorted keys) of event_id, type, at,
project_id, conversation_id, stream_version, correlation_id, causation_id and data. `seq` is
not hashed: it is assigned after.

The journal itself appends `journal.checkpoint` events (project-level, in no conversation,
timeline or incident report): each seals the chain head with an HMAC made with a key the
database does not hold, and `roost verify` checks them against the anchor kept outside the
database ([security.md](security.md#sealed-history-what-roost-verify-proves)).

## Evolution rules

- A new field always has a default; a field's type never changes; a type is never renamed
  or removed.
- Old bytes decode with new code and new bytes with old code (unknown fields are ignored);
  `tests/events/test_catalog.py` checks it.

## Types
"""


def render() -> str:
    """The whole document."""
    tree = ast.parse(inspect.getsource(catalog))
    docs: dict[str, tuple[str, list[tuple[str, str, str, str]]]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields = []
        for i, stmt in enumerate(node.body):
            if isinstance(stmt, ast.AnnAssign):
                nxt = node.body[i + 1] if i + 1 < len(node.body) else None
                doc = ""
                if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
                    doc = str(nxt.value.value)
                default = ast.unparse(stmt.value) if stmt.value is not None else ""
                fields.append(
                    (ast.unparse(stmt.target), ast.unparse(stmt.annotation), default, doc)
                )
        docs[node.name] = (ast.get_docstring(node) or "", fields)
    out = [HEADER]
    for name, cls in PAYLOAD_TYPES.items():
        summary, fields = docs[cls.__name__]
        kind = "signal" if name in SIGNAL_TYPES else "event"
        out.append(f"### `{name}` ({kind})\n\n{summary}\n")
        if fields:
            out.append("| field | type | default | meaning |\n|---|---|---|---|")
            for field, annotation, default, doc in fields:
                shown = f"`{default}`" if default else "required"
                out.append(f"| `{field}` | `{annotation}` | {shown} | {doc} |")
            out.append("")
        else:
            out.append("No fields.\n")
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    """Write the file."""
    path = Path(__file__).resolve().parents[1] / "docs" / "events.md"
    path.write_text(render())
    sys.stdout.write(f"wrote {path.name}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
