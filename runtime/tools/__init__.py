"""Built-in tools: each module has ``SPECS`` (descriptions) and ``TOOLS`` (name -> function).

- ``base``: ``ToolSpec``, ``ToolContext``, ``ToolFn``.
- ``fs``: ``fs.read``, ``fs.write``, ``fs.edit``, ``fs.list``, ``fs.search``.
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
