"""The ``roost`` command line.

General layout: ``app`` (``main``), ``parsers`` (the parser, one module per command group),
``commands`` (the conversation commands and what every client command shares), ``projects``
(``roost project ...``), ``history`` (``projection``, ``timeline``, ``incident``, ``tail``,
``verify``), ``format`` (tables,
key-value blocks, event lines for people), ``progress`` (the progress bar of long commands),
``output`` (writing a report to a file atomically), ``completion`` (``roost completion`` and
the ids a TAB offers), ``mcp`` / ``a2a`` (the servers). The client side imports no daemon
module (the ``thin-client`` contract in ``pyproject.toml``); ``daemonctl`` (``daemon
start|stop|status``), ``local`` (``logs``) and ``otel`` (``export otel``) need the daemon's
modules or the journal and are imported by name, only when one of their commands runs.
"""

from runtime.cli.app import main

__all__ = ["main"]
