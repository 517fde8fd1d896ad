"""The ``roost`` command line.

General layout: ``app`` (the parser and ``main``), ``commands`` (what each command does),
``format`` (tables, key-value blocks, event lines for people), ``progress`` (the progress
bar of long commands), ``output`` (writing a report to a file atomically).
"""

from runtime.cli.app import main

__all__ = ["main"]
