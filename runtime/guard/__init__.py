"""Guards at the boundary: everything Roost checks before a tool touches the world.

General layout:

- Paths: ``paths`` (the ``Workspace``: confinement, sensitive and protected places),
  ``pathrules`` (pure name rules), ``pathwalk`` / ``openat2`` (resolution beneath a root).
- Network: ``network`` (the egress judgement), ``network_targets`` / ``network_commands``
  (finding targets in arguments and command text).
- Commands: ``command_controls`` (blocklist and environment), ``blocklist`` /
  ``blocklist_rules`` / ``shellwords`` (reading shell text), ``sandbox`` (which kernel layers
  work here), ``launcher`` (the one place every tool process starts: view, cgroups, limits,
  kernel guards, post-run check), ``sandbox_run`` (a command run to completion),
  ``server_process`` (a long-lived MCP server), ``sandbox_view`` (what a tool process
  sees), ``cgroups`` (its limits and freezer), ``proctree`` (its process tree).
- Secrets: ``redaction`` / ``redaction_patterns`` (shapes), ``secret_masking`` /
  ``secret_sources`` (the exact values Roost knows).
- Shapes: ``schema`` (JSON Schema for arguments and options), ``safe_json`` (bounded nesting,
  no repeated keys), ``untrusted_regex`` (RE2).
- Files a tool process can write, read from the daemon's side: ``safe_read`` (no link
  followed, no FIFO or device, bounded), ``git_probe`` (the daemon's one hermetic git).
- Roost's own state: ``roost_home`` (where it is, hidden from tools), ``statedir`` (its
  modes), ``peers`` (who may use a Roost socket).

Imports ``events``, ``runtime.wire`` and the shared ``runtime.errors`` / ``runtime.logging``.
"""
