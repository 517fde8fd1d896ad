"""The ``roost`` command line.

General layout: ``app`` (the parser and ``main``), ``commands`` (what each command does),
``format`` (tables, key-value blocks, event lines, progress for people), ``output``
(writing a report to a file atomically).
"""

from runtime.cli.app import main

__all__ = ["main"]
