"""Guards at the boundary: everything Roost checks before a tool touches the world.

General layout, one sub-package per concern (each ``__init__`` lists its modules):

- ``shapes``: untrusted input's shape (schemas, JSON, RE2, client ids).
- ``home``: Roost's own state (``ROOST_HOME``, its modes, the pid file, socket peers).
- ``paths``: workspace confinement and bounded reads of files a tool can write.
- ``secrets``: redaction and masking of the secrets Roost knows.
- ``network``: the egress judgement and finding targets.
- ``commands``: the blocklist and the environment, decided before a command runs.
- ``sandbox``: the one launcher and the kernel layers every tool process runs under.
- ``review``: what a command leaves behind, reviewed after every run.

Two modules at the root tie the sub-packages together: ``workspace`` (the ``Workspace``:
every path a tool touches resolves inside the project root, away from sensitive and
protected places) and ``ids`` (the ids and keys a client may choose). The sub-packages'
order is an import contract (``guard`` in pyproject.toml).

Imports ``events``, ``runtime.wire`` and the shared ``runtime.errors`` / ``runtime.logging``.
"""
