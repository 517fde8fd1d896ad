"""Roost's runtime: everything that is not a pure event fold and not an actor.

General layout, from the ground up (``make check`` enforces it with import-linter):

- ``errors`` (the ``RoostError`` tree), ``logging`` and ``logfiles`` (the shared, rotated
  log file): shared by every layer.
- ``wire``: the ops table, frames and the socket transport.
- ``guard``: paths, network, command controls and the sandbox, redaction, peers, shapes
  (client-chosen ``ids`` too).
- ``journal``: the event store, its seals and the link conversations append through.
- ``tools``: the built-in tools, the registry, assets.
- ``policy``: runtime options and per-call decisions.
- ``execution``: one tool call from admission to its result.
- ``llm``: model adapters. ``agent``: the conversation's step function.
- ``lifecycle``: supervision and alert routing.
- (``actors``, a top-level package: the Thespian shells over these cores.)
- ``telemetry``: OpenTelemetry traces and metrics from committed events.
- ``daemon``, ``client``, ``cli``: serving, calling and the command line; ``mcp_server``
  (``roost mcp serve``) is a client of the daemon too, under ``cli``.

Lower layers never import higher ones; ``events`` (the pure domain) sits below them all.
"""

from runtime.errors import (
    REQUEST_ERROR_CODES,
    TOOL_ERROR_CODES,
    RequestError,
    RoostError,
    ToolError,
)

__all__ = ["REQUEST_ERROR_CODES", "TOOL_ERROR_CODES", "RequestError", "RoostError", "ToolError"]
