"""Roost's Thespian actors: thin shells routing messages to the runtime's plain code.

General layout: ``supervisor`` (root: starts the Journal and Projects), ``journal`` (the
single writer), ``project`` (owns Policy, ToolRunner, Conversations), ``conversation``
(runs ``runtime.agent.ConversationCore``), ``policy``, ``toolrunner``; ``messages`` are
the frozen msgspec Structs they exchange; ``base`` is what they share (it holds an
``appends`` and a ``sends`` helper as objects; ``process`` is per-process set-up);
``shell`` and ``agent_shell`` carry out the cores' effects; ``dispatch`` makes each
shell's message type -> method table; ``workers`` is a helper that runs slow work on threads.
"""

from actors.conversation import ConversationActor
from actors.journal import JournalActor
from actors.policy import PolicyActor
from actors.project import ProjectActor
from actors.supervisor import SupervisorActor
from actors.toolrunner import ToolRunnerActor

__all__ = [
    "ConversationActor",
    "JournalActor",
    "PolicyActor",
    "ProjectActor",
    "SupervisorActor",
    "ToolRunnerActor",
]
