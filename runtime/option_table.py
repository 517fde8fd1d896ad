"""The runtime options' defaults and types: one table, read by every layer (SPEC section 5).

:class:`RuntimeOptions` has one field per option with its default, in normalized form
(lists are tuples). It is the only place a default is written: :mod:`runtime.policy.options`
validates and normalizes what a project is started with and fills the gaps from
:data:`DEFAULTS` (this table as plain data); the layers below the policy (guard, tools,
execution) read typed fields (``RuntimeOptions.of(options).tool_max_output_bytes``, or a
tool's ``ctx.settings``) instead of restating a default at each call site. Like
:mod:`runtime.errors`, it imports no layer of ``runtime``, so each of them may import it;
the one default the domain's projections need too (``context_window_chars``, which a
replay reads from ``project.started``) is the domain's, :mod:`events.context_window`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from events.context_window import CONTEXT_WINDOW_CHARS

__all__ = ["DEFAULTS", "RuntimeOptions", "defaults"]


class RuntimeOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The options, typed and read-only, each with its default (``docs/configuration.md``).

    Build it with :meth:`of` from normalized options; ``RuntimeOptions()`` is every default.
    """

    tool_timeout_ms: int = 30000
    tool_timeout_alert_threshold: int = 3
    tool_max_output_bytes: int = 262144
    tool_max_artifact_bytes: int = 131072
    tool_max_concurrency: int = 8
    tool_max_concurrency_per_conversation: int = 4
    tool_max_processes: int = 512
    tool_max_memory_bytes: int | None = 2 * 1024**3
    tool_cpu_cores: float | None = 2.0
    tool_tmpfs_bytes: int = 64 * 1024**2
    llm_adapter: str = "deterministic"
    llm_model: str | None = None
    llm_base_url: str | None = None
    llm_api_key_env: str | None = None
    llm_system_prompt: str | None = None
    llm_temperature: float | None = None
    llm_max_tokens: int | None = None
    llm_timeout_ms: int = 120000
    max_rounds: int = 25
    token_budget: int = 200000
    duration_budget_ms: int = 600000
    context_window_chars: int = CONTEXT_WINDOW_CHARS
    allow_tools: tuple[str, ...] | None = None
    deny_tools: tuple[str, ...] = ()
    approval_mode: str = "never"
    network_egress_policy: str = "deny"
    network_allowlist: tuple[str, ...] = ()
    network_allowed_schemes: tuple[str, ...] = ("http", "https")
    sensitive_path_denylist: tuple[str, ...] = (
        ".env",
        ".env.*",
        "*.pem",
        "*.key",
        "id_rsa",
        "id_ed25519",
    )
    sensitive_path_allowlist: tuple[str, ...] = ()
    outside_root_allowlist: tuple[dict[str, str], ...] = ()
    tool_env_allowlist: tuple[str, ...] = ()
    command_read_paths: tuple[str, ...] = ()
    command_socket_allowlist: tuple[str, ...] = ()
    protocol_allowlist: tuple[str, ...] = ("mcp", "a2a")
    strict_asset_loading: bool = False
    orchestration: bool = True
    max_restarts: int = 3
    restart_period_ms: int = 5000
    idle_passivation_ms: int = 300000
    snapshot_every_events: int = 500
    alert_signal_events: tuple[str, ...] = (
        "security.repeated_timeout_failures",
        "security.sandbox_violation",
    )
    alert_router: str | None = None
    mcp_servers: tuple[dict[str, Any], ...] = ()
    a2a_agents: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> RuntimeOptions:
        """The typed view of normalized ``options``; an option they lack takes its default.

        Does not validate values (that is ``runtime.policy.options.validate_options``' job);
        raises ``msgspec.ValidationError`` for a value of the wrong type.
        """
        return msgspec.convert(options, cls)


def defaults() -> dict[str, Any]:
    """Every option with its default as plain data (lists, not tuples), keys sorted; a new copy."""
    plain: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(RuntimeOptions()))
    return dict(sorted(plain.items()))


DEFAULTS: dict[str, Any] = defaults()
"""Every option with its default, already in normalized form (keys sorted).

A copy: changing it does not change what validate_options fills in.
"""
