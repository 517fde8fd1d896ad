"""The ``roost`` command line.

General layout: ``app`` (the parser and ``main``), ``commands`` (what each command does),
``format`` (tables, key-value blocks, event lines for people), ``progress`` (the progress
bar of long commands).
"""

from runtime.cli.app import main

__all__ = ["main"]
