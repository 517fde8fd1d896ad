"""Lifecycle: the Supervisor's and the Project's decisions, what failures lead to, alerts.

General layout: ``supervisor_core`` and ``project_core`` (plain cores: messages in,
``effects`` out, carried out by the shells in ``actors/``; ``new_project`` checks
``start_project``, ``records`` is what the Supervisor keeps of each project and
``refusals`` why it refuses to start or delete one,
``turn_waiters`` and ``project_health`` serve the Project),
``supervision`` (restart intensity within a period, backoff, escalation, the
crash/restart events),
``daemon_watch`` (the actor tree dies with the daemon), ``alerts`` (``alert_router``
dispatch of routed signals), ``readme`` (a project's description: its README's first
paragraph, read confined).

Imports ``runtime.agent`` and the layers below it.
"""
