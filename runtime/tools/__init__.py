"""Built-in tools: each module has ``SPECS`` (descriptions) and ``TOOLS`` (name -> function).

- ``base``: ``ToolSpec`` (a tool's description and the facts the policy and the runner
  read: path and data arguments, inline, kind), ``ToolContext``, ``ToolFn``.
- ``registry``: the tools of a project; a module's ``SPECS`` and ``TOOLS`` must pair up.
- ``fs``: the file tools (``fs.*``).
- ``command``: ``command.run``. ``http``: ``http.fetch``.
- ``asset``: ``asset.list``, ``asset.search``, ``asset.get`` and the generated
  ``command.run.<name>`` / ``workflow.run.<name>`` tools.
- ``mcp``: the ``mcp.<server>.<tool>`` tools of the ``mcp_servers`` option;
  ``mcp_connection``: one sandboxed or egress-checked connection to such a server;
  ``mcp_pipe``: the SDK's session over a server's pipes; ``mcp_session``: a server's calls
  (frozen between them, restarted when gone or when its view went stale);
  ``mcp_listing``: their tool listing at project start.
"""

from runtime.tools.base import ToolContext, ToolFn, ToolSpec

__all__ = ["ToolContext", "ToolFn", "ToolSpec"]
