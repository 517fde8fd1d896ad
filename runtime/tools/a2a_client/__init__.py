"""Roost as a client of remote A2A agents: the ``a2a.<agent>.send`` tools.

``tools`` (the tools of the ``a2a_agents`` option and their calls), ``task`` (the SDK
client: send, follow, cancel a task) and ``listing`` (the agents' cards at project start,
in a child process).

Serving A2A (``roost a2a serve``) is the other direction: ``runtime.a2a_server``.
"""
