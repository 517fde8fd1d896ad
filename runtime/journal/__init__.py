"""The journal: the single event store and the link conversations append through.

General layout: ``store`` (the eventsourcing application: append, read, hash chain),
``audit`` (a project's stream checked page by page: its chain and seals, for ``verify``),
``append_redaction`` (what an append hides before it links a batch),
``recorder`` (what a backend provides: the recorder interface, ``JournalBackend``),
``sqlite`` / ``postgres`` (the backends; ``sqlite_layout``: the SQLite tables' two layouts,
``sqlite_migrations``: bringing an older file up to date),
``mapper`` (envelopes in and out of eventsourcing) over ``stored`` (an envelope's stored
bytes, format 2 and format 1),
``scope`` (the indexed selection of one conversation's events) and ``queries`` (the
timeline and incident report of one conversation, read through it),
``seal_mode`` (whether a journal seals: ``Sealed``, ``Unsealed``),
``writer`` (the single writer: the store behind one lock, group commit, reads, seals), ``link``
(the Unix-socket link: a hello with the daemon's token, then batched appends; its server),
``link_client`` (its client) and ``commit_window`` (when the link's server waits for more
appends before it commits).

Imports ``runtime.guard`` (redaction, peers) and ``runtime.wire``.
"""
