"""Roost's version, readable without ``importlib.metadata`` (``roost --version`` stays cheap).

It is the ``version`` of ``pyproject.toml``; ``tests/runtime/cli/test_thin_client.py`` checks
that both say the same, and that the installed package does too.
"""

VERSION = "0.1.0"
"""The version ``roost --version`` prints."""
