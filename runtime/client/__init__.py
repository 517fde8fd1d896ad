"""The Python client of the daemon (SPEC section 2).

General layout: ``connection`` (``Client``: one connection, one method per operation),
``subscription`` (the ``subscribe`` iterator that survives dropped connections), ``pool``
(``ClientPool``: a connection per request in flight, for the protocol servers), ``replies``
(the ``TypedDict`` shapes of the answers only the client reads: ``status``, ``verify``...).
"""

from runtime.client.connection import Client
from runtime.client.pool import ClientPool

__all__ = ["Client", "ClientPool"]
