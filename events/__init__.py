"""Roost's pure domain: event payloads, the envelope, codecs, the hash chain, projections.

General layout:

- ``catalog``: one frozen msgspec Struct per event type (the envelope's ``data``).
- ``envelope``: the committed ``Envelope``, the pre-commit ``NewEvent``, id and time helpers.
- ``codecs``: JSON/msgpack codecs and canonical JSON.
- ``chain``: the per-project SHA-256 hash chain.
- ``conversation_fold``: a conversation's status and pending calls, one event at a time
  (the fold the live conversation and the projections share).
- ``seal``: signed checkpoints of a chain's head and the anchor kept outside the journal.
- ``seal_check``: checking a project's checkpoints and its anchor (``roost verify``).
- ``context_window``: which of a conversation's messages the model is sent (the budget).
- ``projections``: timeline, pending tool calls, model context, diagnostics.
- ``project_view``: a project's state for its diagnostics.
- ``incidents`` / ``report``: incident timelines and reports (JSON and Markdown).
- ``incident_html``: the incident report as one self-contained HTML page.
- ``view_types``: the JSON shapes those views return, as ``TypedDict``s (type-only).

This package imports only the standard library and msgspec.
"""

from events.catalog import PAYLOAD_TYPES, SIGNAL_TYPES, TERMINAL_TOOL_TYPES, Event
from events.chain import ChainReport, chain_hash, verify_chain
from events.envelope import (
    GENESIS_HASH,
    Envelope,
    NewEvent,
    format_at,
    new_call_id,
    new_correlation_id,
    new_event,
    new_event_id,
)
from events.incident_html import render_incident_html
from events.incidents import incident_report, incident_timeline
from events.project_view import project_view
from events.projections import get_projection
from events.report import render_incident_markdown
from events.seal_check import SealReport, check_seals

__all__ = [
    "GENESIS_HASH",
    "PAYLOAD_TYPES",
    "SIGNAL_TYPES",
    "TERMINAL_TOOL_TYPES",
    "ChainReport",
    "Envelope",
    "Event",
    "NewEvent",
    "SealReport",
    "chain_hash",
    "check_seals",
    "format_at",
    "get_projection",
    "incident_report",
    "incident_timeline",
    "new_call_id",
    "new_correlation_id",
    "new_event",
    "new_event_id",
    "project_view",
    "render_incident_html",
    "render_incident_markdown",
    "verify_chain",
]
