"""Roost's Thespian actors: thin shells routing messages to the runtime's plain code.

General layout: ``supervisor`` (root: starts the Journal and Projects), ``journal`` (the
single writer), ``project`` (owns Policy, ToolRunner, Conversations), ``conversation``
(runs ``runtime.agent.ConversationCore``), ``policy``, ``toolrunner``; ``messages`` are
the frozen msgspec Structs they exchange; ``base`` is what they share (over ``appends``,
``sends`` and ``process``); ``shell`` and ``agent_shell`` carry out the cores' effects;
``workers`` runs slow work on threads.
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
