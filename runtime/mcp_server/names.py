"""MCP-safe tool names for ``roost mcp serve``: ``fs.read`` is listed as ``fs_read``.

Roost names its tools with dots (``fs.read``, ``command.run.build``, ``mcp.docs.search``),
which the MCP specification allows but several clients refuse: Claude Desktop rejects a
whole tool list with one name outside ``^[a-zA-Z0-9_-]{1,64}$``, and clients that pass MCP
tools on to a model as functions fail their model request on dotted names. So the server
lists every tool under a name matching :data:`SAFE_NAME` (letters, digits, ``_`` and
``-``, starting with a letter or ``_``, at most 64 characters: the strictest pattern of the
clients and model APIs in use) and maps it back on a call; a call by the Roost name is
accepted too. :func:`name_map` is the rule, a pure function of the set of names:

1. A name that already matches :data:`SAFE_NAME` is listed as it is.
2. Otherwise each character outside ``[A-Za-z0-9_-]`` (the dots) becomes ``_``:
   ``fs.read`` → ``fs_read``, ``mcp.docs.search`` → ``mcp_docs_search``.
3. When that is still not safe (longer than 64 characters, or not starting with a letter
   or ``_``), or when two names of the set give the same safe name (``mcp.a_b.c`` and
   ``mcp.a.b_c`` both give ``mcp_a_b_c``), the name gets :func:`hashed_name`: the start of
   its rule-2 form, ``_`` and the first 8 hex digits of the SHA-256 of the Roost name
   (``mcp_a_b_c_1f2e3d4c``), at most 64 characters. Every name of a colliding group is
   hashed (none is preferred by the order the daemon lists them in), except one that
   already matched rule 1, which keeps its name.

A safe name has no dot, so it never equals a dotted Roost name: mapping back is never
ambiguous.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

__all__ = ["MAX_LENGTH", "SAFE_NAME", "hashed_name", "name_map", "plain_name"]

SAFE_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")
"""A tool name every MCP client and model API in use accepts."""
MAX_LENGTH: Final = 64
"""The longest safe name."""

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_-]")
_DIGITS: Final = 8


def plain_name(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", name)


def hashed_name(name: str, digits: int = _DIGITS, salt: int = 0) -> str:
    """The start of :func:`plain_name`, ``_`` and ``digits`` hex digits of its SHA-256.

    ``salt`` (0 for the first try) picks another hash when even that name is taken.
    """
    source = name if salt == 0 else f"{name}\x00{salt}"
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:digits]
    stem = plain_name(name)[: MAX_LENGTH - digits - 1]
    if not stem or not SAFE_NAME.match(stem):
        stem = "t_" + stem[: MAX_LENGTH - digits - 3]
    return f"{stem}_{digest}"


def name_map(names: Iterable[str]) -> dict[str, str]:
    """The safe name of each Roost name (``{roost_name: safe_name}``), collision-free."""
    unique = sorted(set(names))
    candidate = {name: name if SAFE_NAME.match(name) else plain_name(name) for name in unique}
    claims: dict[str, list[str]] = {}
    for name in unique:
        claims.setdefault(candidate[name], []).append(name)
    out: dict[str, str] = {}
    for safe, claimants in claims.items():
        if not SAFE_NAME.match(safe):
            continue
        if len(claimants) == 1:
            out[claimants[0]] = safe
        elif safe in claimants:  # rule 1: a name that is safe already keeps it
            out[safe] = safe
    taken = set(out.values())
    for name in unique:
        if name in out:
            continue
        salt = 0
        while (safe := hashed_name(name, salt=salt)) in taken:
            salt += 1
        out[name] = safe
        taken.add(safe)
    return out
