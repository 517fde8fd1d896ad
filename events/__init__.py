"""Roost's pure domain: event payloads, the envelope, codecs, the hash chain, projections.

General layout:

- ``catalog``: one frozen msgspec Struct per event type (the envelope's ``data``).
- ``envelope``: the committed ``Envelope``, the pre-commit ``NewEvent``, id and time helpers.
- ``codecs``: JSON/msgpack codecs and canonical JSON.
- ``chain``: the per-project SHA-256 hash chain.
- ``projections`` / ``incidents``: pure folds over event sequences.

This package imports only the standard library and msgspec.
"""
