"""The Python client of the daemon (SPEC section 2).

General layout: ``connection`` (``Client``: one connection, one method per operation),
``subscription`` (the ``subscribe`` iterator that survives dropped connections).
"""

from runtime.client.connection import Client

__all__ = ["Client"]
