"""Built-in tools: each module has ``SPECS`` (descriptions) and ``TOOLS`` (name -> function).

- ``base``: ``ToolSpec``, ``ToolContext``, ``ToolFn``.
- ``fs``: ``fs.read``, ``fs.write``, ``fs.edit``, ``fs.list``, ``fs.search``.
- ``command``: ``command.run``. ``http``: ``http.fetch``.
- ``asset``: ``asset.list``, ``asset.search``, ``asset.get`` and the generated
  ``command.run.<name>`` / ``workflow.run.<name>`` tools.
"""

from runtime.tools.base import ToolContext, ToolFn, ToolSpec

__all__ = ["ToolContext", "ToolFn", "ToolSpec"]
