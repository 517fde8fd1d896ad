"""Wire: what crosses a Roost socket, shared by the client, the daemon and the journal link.

General layout: ``ops`` (the op table: route, time limit, waiting rule and ids of every
operation, its arguments checked once; the one place request ids are minted), ``op_args``
(each op's argument Struct, and the ``Call`` that carries it down), ``dispatch`` (each
level's op → ``op_<name>`` method, built from the table), ``framing`` (the
4-byte length prefix every socket uses, read and written once), ``protocol`` (msgspec
JSON frames: requests, replies, errors, events), ``client_codec`` (the client's side of
those frames, on the standard library's ``json``) and ``client_ops`` (what a client needs
of the op table: time limits, the event shape, idempotency keys), neither on msgspec,
``transport``
(Unix sockets: bind owner-only, connect, peer credentials), ``msgpack_keys`` (repeated map
keys in a msgpack frame, found without decoding it), ``counters`` (process-boundary
messages and journal commits, counted in a block every process of the daemon's tree
shares).

Imports only ``runtime.errors`` and ``runtime.logging``.
"""
