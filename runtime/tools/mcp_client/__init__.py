"""Roost as a client of external MCP servers: the ``mcp.<server>.<tool>`` tools.

``tools`` (the tools of the ``mcp_servers`` option and their calls), ``connection`` (one
sandboxed or egress-checked connection to such a server), ``pipe`` (the SDK's session over
a server's pipes), ``session`` (a server's calls, frozen between them, restarted when gone
or when its view went stale), ``listing`` (their tool listing at project start, in a child
process) and ``failure`` (why a server did not start, in words an operator can act on).

Serving MCP (``roost mcp serve``) is the other direction: ``runtime.mcp_server``.
"""
