"""Roost's runtime: everything that is not a pure event fold and not an actor.

General layout:

- Journal: ``journal`` (the eventsourcing application), ``journal_sqlite`` /
  ``journal_postgres`` (recorders), ``mapper`` (msgspec mapper).
- Agent loop: ``agent`` (the pure step function), ``agent_effects``, ``agent_state``,
  ``llm`` (model adapters), ``supervision`` (restart policy).
- Safety: ``options``, ``schema``, ``policy``, ``registry``, ``toolrunner``, ``results``,
  ``paths`` / ``pathrules`` / ``pathwalk`` / ``openat2`` (workspace confinement),
  ``network`` / ``network_targets`` / ``network_commands`` (egress), ``commands`` /
  ``blocklist`` / ``sandbox`` / ``proctree`` (commands), ``redaction`` /
  ``redaction_patterns`` (secrets), ``ids`` (client-chosen ids), ``assets``,
  ``tools`` (built-in tools), ``alerts`` (alert routing).
- Serving: ``daemon``, ``gateway``, ``protocol``, ``transport``, ``streaming``, ``ops``,
  ``backend_api``, ``backend`` (the actor system behind the daemon), ``client``,
  ``stream``, ``cli``, ``logging``.
- ``errors``: the ``RoostError`` tree.

This package imports ``events`` but never ``actors`` at import time (the backend imports
the actors it starts).
"""

from runtime.errors import (
    REQUEST_ERROR_CODES,
    TOOL_ERROR_CODES,
    RequestError,
    RoostError,
    ToolError,
)

__all__ = ["REQUEST_ERROR_CODES", "TOOL_ERROR_CODES", "RequestError", "RoostError", "ToolError"]
