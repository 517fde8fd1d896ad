"""The command sandbox: where every tool process starts and what holds it down.

``launcher`` (the one place every tool process starts), ``layers`` (which kernel layers work
here), ``view`` (what a tool process sees; ``protected`` and ``hidden`` find its read-only
and its hidden places), ``run`` (a command run to completion), ``server_process`` (a
long-lived MCP server), ``limits`` (its rlimits and cgroup limits), ``cgroups`` (the
cgroups of those limits), ``freezer`` (a long-lived process stopped between calls),
``cgroupfs`` (the cgroup files both use), ``seccomp`` and ``kernel_guards`` (its
privilege), ``proctree`` (its process tree), ``peers`` (who may use a Roost socket: never a
process of a sandbox).
"""
