"""Built-in tools: each module has ``SPECS`` (descriptions) and ``TOOLS`` (name -> function).

- ``base``: ``ToolSpec`` (a tool's description and the facts the policy and the runner
  read: path and data arguments, inline, kind), ``ToolContext``, ``ToolFn``.
- ``registry``: the tools of a project; a module's ``SPECS`` and ``TOOLS`` must pair up.
- ``fs``: the file tools (``fs.*``).
- ``command``: ``command.run``. ``http``: ``http.fetch``.
- ``asset``: ``asset.list``, ``asset.search``, ``asset.get`` and the generated
  ``command.run.<name>`` / ``workflow.run.<name>`` tools.
- ``mcp_client``: the ``mcp.<server>.<tool>`` tools of the ``mcp_servers`` option, Roost
  as a client of external MCP servers (serving MCP is ``runtime.mcp_server``).
- ``a2a_client``: the ``a2a.<agent>.send`` tools of the ``a2a_agents`` option, Roost as a
  client of remote A2A agents (serving A2A is ``runtime.a2a_server``).
- ``sdk_loop``: the event-loop thread and child listing both clients' SDKs use.
"""

from runtime.tools.base import ToolContext, ToolFn, ToolSpec

__all__ = ["ToolContext", "ToolFn", "ToolSpec"]
