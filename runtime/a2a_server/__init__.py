"""Roost as an A2A server: ``roost a2a serve`` (SPEC section 12), a client of the daemon.

General layout: ``mapping`` (the plain core: A2A context and task ids ↔ conversations and
correlation ids, the agent card, a task folded from its journal), ``agent`` (the SDK's
``AgentExecutor``: each task is one turn of a conversation, followed through the daemon's
event stream), ``server`` (the SDK's request handler, task store and routes behind the
peer check of ``roost mcp serve --http`` and the ``protocol_allowlist`` gate) and ``serve``
(the command's steps: check, bind, announce, serve). Nothing here runs the model or a tool:
every message is a ``user.message`` the daemon's conversation runs.
"""

from runtime.a2a_server.agent import RoostAgent
from runtime.a2a_server.mapping import agent_card, conversation_of, new_task_id, parse_task_id
from runtime.a2a_server.serve import A2AServe
from runtime.a2a_server.server import ProtocolGate, RoostRequestHandler, a2a_app

__all__ = [
    "A2AServe",
    "ProtocolGate",
    "RoostAgent",
    "RoostRequestHandler",
    "a2a_app",
    "agent_card",
    "conversation_of",
    "new_task_id",
    "parse_task_id",
]
