"""Names of the protocol that a command line needs before any frame is encoded.

Kept apart from ``op_args`` (msgspec Structs), so that building ``roost``'s parser loads no
codec (``roost --help``, ``--version`` and completion stay cheap).
"""

__all__ = ["PROJECTION_KEYS"]

PROJECTION_KEYS = ("timeline", "pending_tool_calls", "llm_context", "diagnostics")
"""The projections ``get_projection`` serves."""
