"""Command controls decided before anything runs: the blocklist and the environment.

- :func:`check_blocklist` (from ``runtime.guard.commands.blocklist``) names the destructive pattern
a
  command matches, or returns ``None``.
- :func:`build_env` builds a command's environment: a minimal base plus the requested
  keys that ``tool_env_allowlist`` names. Keys that hijack a loader, a shell or an
  interpreter (:data:`NEVER_PASS_KEYS`, ``LD_*``, ``DYLD_*``, ``BASH_FUNC_*``) never pass,
  even when allowlisted.
- :func:`env_signal` and :func:`blocked_signal` turn a refusal into the security signal
  the ToolRunner records.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

from events.catalog import SecurityCommandBlocked, SecurityEnvDenied
from runtime.errors import ToolError
from runtime.guard.commands.blocklist import PATTERNS, check_blocklist

__all__ = [
    "BASE_PATH",
    "NEVER_PASS_KEYS",
    "NEVER_PASS_PREFIXES",
    "PATTERNS",
    "blocked_signal",
    "build_env",
    "check_blocklist",
    "env_signal",
    "is_never_pass",
]

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` every command starts with."""

NEVER_PASS_PREFIXES: tuple[str, ...] = ("LD_", "DYLD_", "BASH_FUNC_")
"""Key prefixes that never pass: dynamic loader controls and exported shell functions."""

NEVER_PASS_KEYS: frozenset[str] = frozenset(
    {
        # shells: files sourced at start-up, code run per prompt or trace line, word splitting
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PS4",
        "IFS",
        "SHELLOPTS",
        "BASHOPTS",
        "CDPATH",
        "GLOBIGNORE",
        "ZDOTDIR",
        # interpreters: module search paths and start-up code
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONUSERBASE",
        "PERL5LIB",
        "PERLLIB",
        "PERL5OPT",
        "PERL5DB",
        "RUBYOPT",
        "RUBYLIB",
        "NODE_OPTIONS",
        "NODE_PATH",
        "LUA_INIT",
        "LUA_PATH",
        "LUA_CPATH",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        # glibc: code loaded through character-set and locale paths, resolver overrides
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "MALLOC_CONF",
        # programs that git and others run on our behalf
        "GIT_SSH_COMMAND",
        "GIT_SSH",
        "GIT_EXEC_PATH",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "GIT_PAGER",
        "GIT_EDITOR",
        "PAGER",
        "EDITOR",
        "VISUAL",
    }
)
"""Keys that never pass, even when ``tool_env_allowlist`` names them."""

_MAX_VALUE_BYTES = 32768


def is_never_pass(key: str) -> bool:
    """Tell whether ``key`` may never be passed to a command (see :data:`NEVER_PASS_KEYS`)."""
    upper = key.upper()
    return upper in NEVER_PASS_KEYS or upper.startswith(NEVER_PASS_PREFIXES) or "%%" in key


def build_env(
    requested: Any, allowlist: Sequence[str], *, home: str | None = None
) -> dict[str, str]:
    """Return the environment a command runs with.

    The base is ``PATH``, ``HOME`` and ``TMPDIR`` (``home``, by default the system temp
    directory), ``LANG=C.UTF-8`` and ``TERM=dumb``; ``requested`` (``None`` or a dict of
    strings) adds keys matched by an ``allowlist`` entry (an exact name or an
    ``fnmatch`` pattern such as ``NPM_CONFIG_*``). Raises ``ToolError``:
    ``invalid_env_payload {reason}`` for a malformed payload, ``env_vars_not_allowed
    {keys}`` (sorted) for keys not allowlisted or never passed.
    """
    home = home or tempfile.gettempdir()
    env = {"PATH": BASE_PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8", "TERM": "dumb"}
    if requested is None:
        return env
    if not isinstance(requested, dict):
        raise ToolError(
            "invalid_env_payload",
            f"env must be an object of string values, got {type(requested).__name__}",
            reason="expected_object",
        )
    for key, value in requested.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ToolError(
                "invalid_env_payload",
                f"env entries must map strings to strings, got {key!r}: {type(value).__name__}",
                reason="expected_string_values",
            )
        if not key or "=" in key or "\x00" in key:
            raise ToolError(
                "invalid_env_payload",
                f"env key {key!r} is not a valid variable name (empty, '=' or NUL)",
                reason="invalid_key",
            )
        if "\x00" in value:
            raise ToolError(
                "invalid_env_payload",
                f"env value of {key!r} contains a NUL byte; remove it",
                reason="nul_in_value",
            )
        if len(value.encode("utf-8", "surrogatepass")) > _MAX_VALUE_BYTES:
            raise ToolError(
                "invalid_env_payload",
                f"env value of {key!r} is longer than {_MAX_VALUE_BYTES} bytes",
                reason="value_too_long",
            )
    denied = sorted(
        key
        for key in requested
        if is_never_pass(key) or not any(fnmatchcase(key, entry) for entry in allowlist)
    )
    if denied:
        never = [key for key in denied if is_never_pass(key)]
        hint = (
            f"; {', '.join(never)} can never be passed" if never else ""
        ) + "; add the others to tool_env_allowlist to pass them"
        raise ToolError(
            "env_vars_not_allowed",
            f"env keys not allowed: {', '.join(denied)}{hint}",
            keys=denied,
        )
    env.update(requested)
    return env


def env_signal(error: ToolError, tool: str, call_id: str) -> SecurityEnvDenied:
    """Build the ``security.env_denied`` signal for an env refusal raised by :func:`build_env`."""
    if error.code == "env_vars_not_allowed":
        keys = error.details.get("keys", [])
        return SecurityEnvDenied(denied_keys=list(keys), tool=tool, call_id=call_id)
    reason = str(error.details.get("reason", error.code))
    return SecurityEnvDenied(reason=reason, tool=tool, call_id=call_id)


def blocked_signal(pattern: str, call_id: str) -> SecurityCommandBlocked:
    """Build the ``security.command_blocked`` signal for a blocklist match."""
    return SecurityCommandBlocked(pattern=pattern, call_id=call_id)
