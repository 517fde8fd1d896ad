"""Wire: what crosses a Roost socket, shared by the client, the daemon and the journal link.

General layout: ``ops`` (every operation's arguments, checked once), ``framing`` (the
4-byte length prefix every socket uses, read and written once), ``protocol`` (msgspec
JSON frames: requests, replies, errors, events), ``transport``
(Unix sockets: bind owner-only, connect, peer credentials), ``msgpack_keys`` (repeated map
keys in a msgpack frame, found without decoding it).

Imports only ``runtime.errors`` and ``runtime.logging``.
"""
