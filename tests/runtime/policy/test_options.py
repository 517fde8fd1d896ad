"""Runtime options: defaults, validation reasons, normalization, and their sources."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import InvalidRuntimeOptError, ToolError
from runtime.option_table import DEFAULTS, RuntimeOptions
from runtime.policy import options as options_module
from runtime.policy.options import (
    REASONS,
    load_options_file,
    merge_options,
    parse_opt_pairs,
    validate_options,
)

SPEC_DEFAULTS: dict[str, Any] = {
    "tool_timeout_ms": 30000,
    "tool_timeout_alert_threshold": 3,
    "tool_max_output_bytes": 262144,
    "tool_max_artifact_bytes": 131072,
    "tool_max_concurrency": 8,
    "tool_max_concurrency_per_conversation": 4,
    "tool_max_processes": 512,
    "tool_max_memory_bytes": 2 * 1024**3,
    "tool_cpu_cores": 2.0,
    "tool_tmpfs_bytes": 64 * 1024**2,
    "command_read_paths": [],
    "command_socket_allowlist": [],
    "llm_adapter": "deterministic",
    "llm_model": None,
    "llm_base_url": None,
    "llm_api_key_env": None,
    "llm_system_prompt": None,
    "llm_temperature": None,
    "llm_max_tokens": None,
    "llm_timeout_ms": 120000,
    "max_rounds": 25,
    "token_budget": 200000,
    "duration_budget_ms": 600000,
    "allow_tools": None,
    "deny_tools": [],
    "approval_mode": "never",
    "network_egress_policy": "deny",
    "network_allowlist": [],
    "network_allowed_schemes": ["http", "https"],
    "sensitive_path_denylist": [".env", ".env.*", "*.pem", "*.key", "id_rsa", "id_ed25519"],
    "sensitive_path_allowlist": [],
    "outside_root_allowlist": [],
    "tool_env_allowlist": [],
    "protocol_allowlist": ["mcp", "a2a"],
    "strict_asset_loading": False,
    "orchestration": True,
    "max_restarts": 3,
    "restart_period_ms": 5000,
    "idle_passivation_ms": 300000,
    "snapshot_every_events": 500,  # beyond SPEC: the journal's snapshots (issue 18)
    "context_window_chars": 32000,  # beyond SPEC: the model's context window (issue 18)
    "alert_signal_events": ["security.repeated_timeout_failures", "security.sandbox_violation"],
    "alert_router": None,
    "mcp_servers": [],  # SPEC section 12
    "a2a_agents": [],  # SPEC section 12
}
"""The SPEC section 5 table, transcribed by hand."""


def reject(raw: Any) -> InvalidRuntimeOptError:
    with pytest.raises(InvalidRuntimeOptError) as info:
        validate_options(raw)
    return info.value


# --- defaults ----------------------------------------------------------------------------


def test_defaults_hold_every_spec_option_with_its_spec_value() -> None:
    assert DEFAULTS == SPEC_DEFAULTS


def test_defaults_keys_are_sorted() -> None:
    assert list(DEFAULTS) == sorted(SPEC_DEFAULTS)


def test_no_options_give_exactly_the_defaults() -> None:
    assert validate_options(None) == DEFAULTS
    assert validate_options({}) == DEFAULTS


def test_validated_options_have_sorted_keys() -> None:
    assert list(validate_options({"tool_timeout_ms": 5, "alert_router": None})) == sorted(DEFAULTS)


def test_changing_a_returned_list_does_not_change_the_defaults() -> None:
    options = validate_options({})
    options["sensitive_path_denylist"].append("secrets.txt")
    assert "secrets.txt" not in DEFAULTS["sensitive_path_denylist"]
    assert "secrets.txt" not in validate_options({})["sensitive_path_denylist"]


def test_changing_the_defaults_does_not_change_what_validation_fills_in() -> None:
    saved = list(DEFAULTS["deny_tools"])
    DEFAULTS["deny_tools"].append("fs.write")
    try:
        assert validate_options({})["deny_tools"] == []
    finally:
        DEFAULTS["deny_tools"][:] = saved


# --- accepted values ---------------------------------------------------------------------

ACCEPTED: list[tuple[str, Any, Any]] = [
    ("tool_timeout_ms", 1, 1),
    ("tool_timeout_ms", 2**31 - 1, 2**31 - 1),
    ("tool_timeout_alert_threshold", 1, 1),
    ("tool_max_output_bytes", 1024, 1024),
    ("tool_max_artifact_bytes", 10, 10),
    ("tool_max_concurrency", 1, 1),
    ("tool_max_concurrency_per_conversation", 0, 0),
    ("tool_max_concurrency_per_conversation", 2, 2),
    ("tool_max_processes", 64, 64),
    ("tool_max_memory_bytes", 256 * 1024**2, 256 * 1024**2),
    ("tool_max_memory_bytes", None, None),
    ("tool_cpu_cores", 1, 1.0),
    ("tool_cpu_cores", 0.5, 0.5),
    ("tool_cpu_cores", None, None),
    ("tool_tmpfs_bytes", 1024**2, 1024**2),
    ("command_read_paths", ["/opt/tool/", "/srv/data"], ["/opt/tool", "/srv/data"]),
    ("command_socket_allowlist", ["/run/x.sock"], ["/run/x.sock"]),
    ("llm_adapter", "openai", "openai"),
    ("llm_adapter", " OpenAI ", "openai"),
    ("llm_adapter", "deterministic", "deterministic"),
    ("llm_model", "gpt-4o-mini", "gpt-4o-mini"),
    ("llm_model", None, None),
    ("llm_base_url", "http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
    ("llm_base_url", "HTTPS://api.example.com/v1", "https://api.example.com/v1"),
    ("llm_api_key_env", "OPENAI_API_KEY", "OPENAI_API_KEY"),
    ("llm_system_prompt", "Be brief.", "Be brief."),
    ("llm_temperature", 0, 0.0),
    ("llm_temperature", 0.7, 0.7),
    ("llm_temperature", None, None),
    ("llm_max_tokens", 512, 512),
    ("llm_max_tokens", None, None),
    ("llm_timeout_ms", 1000, 1000),
    ("max_rounds", 1, 1),
    ("token_budget", 10**9, 10**9),
    ("duration_budget_ms", 1, 1),
    ("allow_tools", ["fs.read", "asset.list", "fs.read"], ["asset.list", "fs.read"]),
    ("allow_tools", [], []),
    ("allow_tools", None, None),
    ("deny_tools", [" command.run ", "http.fetch"], ["command.run", "http.fetch"]),
    ("approval_mode", "sensitive", "sensitive"),
    ("approval_mode", "ALWAYS", "always"),
    ("network_egress_policy", "allow", "allow"),
    ("network_egress_policy", "DENY", "deny"),
    ("network_egress_policy", " Allow ", "allow"),
    ("network_allowlist", ["b.example.com", "A.example.com"], ["a.example.com", "b.example.com"]),
    ("network_allowed_schemes", ["HTTPS", "http", "https"], ["http", "https"]),
    ("network_allowed_schemes", ["wss", "git+ssh"], ["git+ssh", "wss"]),
    ("network_allowed_schemes", [], []),
    ("sensitive_path_denylist", ["*.pem", "secrets/*", "*.pem"], ["*.pem", "secrets/*"]),
    ("sensitive_path_allowlist", ["fixtures/test.pem"], ["fixtures/test.pem"]),
    ("tool_env_allowlist", ["PATH_EXTRA", "CI", "CI"], ["CI", "PATH_EXTRA"]),
    ("tool_env_allowlist", ["NPM_CONFIG_*", "CI"], ["CI", "NPM_CONFIG_*"]),
    ("protocol_allowlist", ["MCP"], ["mcp"]),
    ("protocol_allowlist", ["mcp", "a2a", "mcp"], ["mcp", "a2a"]),
    ("protocol_allowlist", [], []),
    ("strict_asset_loading", True, True),
    ("orchestration", False, False),
    ("max_restarts", 0, 0),
    ("restart_period_ms", 1, 1),
    ("idle_passivation_ms", 60000, 60000),
    ("snapshot_every_events", 0, 0),
    ("context_window_chars", 0, 0),
    ("context_window_chars", 4000, 4000),
    (
        "alert_signal_events",
        ["tool.failed", "security.env_denied"],
        ["security.env_denied", "tool.failed"],
    ),
    ("alert_signal_events", [], []),
    ("alert_router", "myalerts.hooks:route", "myalerts.hooks:route"),
    ("alert_router", " pkg:fn ", "pkg:fn"),
    ("alert_router", None, None),
    ("mcp_servers", [], []),
    ("mcp_servers", [{"name": "fx", "command": ["srv"]}], [{"name": "fx", "command": ["srv"]}]),
    ("a2a_agents", [], []),
    (
        "a2a_agents",
        [{"name": "peer", "url": " http://h/ "}],
        [{"name": "peer", "url": "http://h/"}],
    ),
]


@pytest.mark.parametrize(("key", "raw", "normalized"), ACCEPTED)
def test_an_accepted_value_is_normalized(key: str, raw: Any, normalized: Any) -> None:
    assert validate_options({key: raw})[key] == normalized


def test_every_option_has_an_accepted_value_case() -> None:
    assert {key for key, _, _ in ACCEPTED} | {"outside_root_allowlist"} == set(DEFAULTS)


def test_other_options_keep_their_defaults_when_one_is_given() -> None:
    options = validate_options({"max_rounds": 3})
    assert {k: v for k, v in options.items() if k != "max_rounds"} == {
        k: v for k, v in DEFAULTS.items() if k != "max_rounds"
    }


def test_a_tuple_is_accepted_as_a_list() -> None:
    assert validate_options({"deny_tools": ("fs.write",)})["deny_tools"] == ["fs.write"]


# --- rejected values ---------------------------------------------------------------------

REJECTED: list[tuple[str, Any, str]] = [
    ("tool_max_processes", 0, "expected_positive_integer"),
    ("tool_max_memory_bytes", 1024, "invalid_entry"),
    ("tool_max_memory_bytes", "2G", "expected_positive_integer"),
    ("tool_cpu_cores", 0, "invalid_entry"),
    ("tool_cpu_cores", 2000, "invalid_entry"),
    ("tool_cpu_cores", float("nan"), "invalid_entry"),
    ("tool_cpu_cores", True, "expected_number_or_null"),
    ("tool_cpu_cores", "1", "expected_number_or_null"),
    ("tool_tmpfs_bytes", None, "expected_positive_integer"),
    ("tool_tmpfs_bytes", 4096, "invalid_entry"),
    ("command_read_paths", "/opt", "expected_list_of_strings"),
    ("command_read_paths", ["relative/dir"], "invalid_entry"),
    ("command_read_paths", ["/"], "invalid_entry"),
    ("command_read_paths", ["/usr/.."], "invalid_entry"),
    ("command_socket_allowlist", ["run/x.sock"], "invalid_entry"),
    ("tool_timeout_ms", 0, "expected_positive_integer"),
    ("tool_timeout_ms", -1, "expected_positive_integer"),
    ("tool_timeout_ms", True, "expected_positive_integer"),
    ("tool_timeout_ms", 1.5, "expected_positive_integer"),
    ("tool_timeout_ms", 1000.0, "expected_positive_integer"),
    ("tool_timeout_ms", "1000", "expected_positive_integer"),
    ("tool_timeout_ms", None, "expected_positive_integer"),
    ("tool_timeout_ms", 2**31, "invalid_entry"),
    ("tool_timeout_alert_threshold", 0, "expected_positive_integer"),
    ("tool_max_output_bytes", False, "expected_positive_integer"),
    ("tool_max_output_bytes", 2**53, "invalid_entry"),
    ("tool_max_artifact_bytes", -5, "expected_positive_integer"),
    ("tool_max_concurrency", 0, "expected_positive_integer"),
    ("tool_max_concurrency_per_conversation", -1, "expected_non_negative_integer"),
    ("tool_max_concurrency_per_conversation", True, "expected_non_negative_integer"),
    ("llm_adapter", "anthropic", "invalid_entry"),
    ("llm_adapter", None, "invalid_entry"),
    ("llm_adapter", 1, "invalid_entry"),
    ("llm_model", 4, "expected_string_or_null"),
    ("llm_base_url", ["http://x"], "expected_string_or_null"),
    ("llm_base_url", "ftp://example.com", "invalid_entry"),
    ("llm_base_url", "example.com/v1", "invalid_entry"),
    ("llm_base_url", "http:///v1", "invalid_entry"),
    ("llm_api_key_env", 1, "expected_string_or_null"),
    ("llm_api_key_env", "sk-abc123", "invalid_entry"),
    ("llm_api_key_env", "", "invalid_entry"),
    ("llm_system_prompt", {"text": "x"}, "expected_string_or_null"),
    ("llm_temperature", "0.5", "expected_number_or_null"),
    ("llm_temperature", True, "expected_number_or_null"),
    ("llm_temperature", float("nan"), "invalid_entry"),
    ("llm_temperature", float("inf"), "invalid_entry"),
    ("llm_temperature", -0.1, "invalid_entry"),
    ("llm_temperature", 10**400, "invalid_entry"),
    ("llm_max_tokens", 0, "expected_positive_integer"),
    ("llm_max_tokens", "100", "expected_positive_integer"),
    ("llm_timeout_ms", 0, "expected_positive_integer"),
    ("max_rounds", 0, "expected_positive_integer"),
    ("token_budget", -1, "expected_positive_integer"),
    ("duration_budget_ms", 0, "expected_positive_integer"),
    ("allow_tools", "fs.read", "expected_list_of_strings"),
    ("allow_tools", ["fs.read", 3], "expected_list_of_strings"),
    ("allow_tools", [""], "invalid_entry"),
    ("deny_tools", None, "expected_list_of_strings"),
    ("deny_tools", {"fs.read": True}, "expected_list_of_strings"),
    ("approval_mode", "sometimes", "invalid_entry"),
    ("approval_mode", True, "invalid_entry"),
    ("network_egress_policy", "allowed", "expected_allow_or_deny"),
    ("network_egress_policy", True, "expected_allow_or_deny"),
    ("network_egress_policy", None, "expected_allow_or_deny"),
    ("network_allowlist", "example.com", "expected_list_of_strings"),
    ("network_allowlist", ["https://example.com"], "invalid_entry"),
    ("network_allowed_schemes", "https", "expected_list_of_strings"),
    ("network_allowed_schemes", ["https://"], "invalid_entry"),
    ("network_allowed_schemes", ["1http"], "invalid_entry"),
    ("sensitive_path_denylist", None, "expected_list_of_strings"),
    ("sensitive_path_denylist", ["  "], "invalid_entry"),
    ("sensitive_path_allowlist", [None], "expected_list_of_strings"),
    ("sensitive_path_allowlist", ["a\x00b"], "invalid_entry"),
    (
        "outside_root_allowlist",
        {"path": "/opt", "reason_code": "x"},
        "expected_list_of_reason_coded_entries",
    ),
    ("tool_env_allowlist", "CI", "expected_list_of_strings"),
    ("tool_env_allowlist", ["MY-VAR"], "invalid_entry"),
    ("tool_env_allowlist", ["*"], "invalid_entry"),
    ("tool_env_allowlist", ["A=B"], "invalid_entry"),
    ("protocol_allowlist", [1], "expected_list_of_strings"),
    ("protocol_allowlist", ["m c p"], "invalid_entry"),
    ("strict_asset_loading", "true", "expected_boolean"),
    ("strict_asset_loading", 1, "expected_boolean"),
    ("orchestration", None, "expected_boolean"),
    ("max_restarts", -1, "expected_non_negative_integer"),
    ("max_restarts", 2.0, "expected_non_negative_integer"),
    ("restart_period_ms", 0, "expected_positive_integer"),
    ("idle_passivation_ms", 0, "expected_positive_integer"),
    ("snapshot_every_events", -1, "expected_non_negative_integer"),
    ("context_window_chars", -1, "expected_non_negative_integer"),
    ("context_window_chars", True, "expected_non_negative_integer"),
    ("context_window_chars", "32000", "expected_non_negative_integer"),
    ("alert_signal_events", "security.sandbox_violation", "expected_list_of_strings"),
    ("alert_signal_events", ["security.no_such_event"], "invalid_entry"),
    ("alert_signal_events", ["alert.failed"], "invalid_entry"),
    ("alert_router", 3, "expected_string_or_null"),
    ("alert_router", "myalerts.route", "invalid_entry"),
    ("alert_router", "my-alerts:route", "invalid_entry"),
    ("alert_router", "pkg:fn:extra", "invalid_entry"),
    ("alert_router", "pkg:", "invalid_entry"),
    ("alert_router", "", "invalid_entry"),
    ("mcp_servers", [{"name": "fx", "command": "srv"}], "invalid_entry"),
    ("a2a_agents", [{"name": "peer"}], "invalid_entry"),
]


@pytest.mark.parametrize(("key", "raw", "reason"), REJECTED)
def test_a_rejected_value_names_its_key_and_reason(key: str, raw: Any, reason: str) -> None:
    error = reject({key: raw})
    assert (error.key, error.reason) == (key, reason)
    assert error.details["key"] == key
    assert error.details["reason"] == reason
    assert error.code == "invalid_runtime_opt"


def test_every_option_has_a_rejected_value_case() -> None:
    assert {key for key, _, _ in REJECTED} == set(DEFAULTS)


def test_every_spec_reason_is_produced_by_some_case() -> None:
    assert {reason for _, _, reason in REJECTED} | {"unknown_option"} == REASONS


def test_the_message_says_what_and_which_value() -> None:
    error = reject({"tool_timeout_ms": 0})
    assert error.message == "tool_timeout_ms must be a positive integer, got 0"


def test_a_boolean_is_shown_as_json_in_the_message() -> None:
    error = reject({"max_rounds": True})
    assert error.message == "max_rounds must be a positive integer, got true"


def test_a_too_large_integer_names_the_maximum() -> None:
    error = reject({"llm_timeout_ms": 2**31})
    assert error.message == f"llm_timeout_ms must be at most {2**31 - 1}, got {2**31}"
    assert error.details["max"] == 2**31 - 1


def test_a_huge_integer_is_refused_without_printing_all_its_digits() -> None:
    error = reject({"token_budget": 10**5000})
    assert error.reason == "invalid_entry"
    assert error.message.endswith("got <int>")


def test_the_api_key_env_error_never_echoes_the_value() -> None:
    error = reject({"llm_api_key_env": "sk-proj-SECRETVALUE"})
    assert "SECRETVALUE" not in error.message
    assert "SECRETVALUE" not in json.dumps(error.to_wire())


def test_the_allow_or_deny_message_lists_both_choices() -> None:
    error = reject({"network_egress_policy": "open"})
    assert error.message == "network_egress_policy must be 'allow' or 'deny', got \"open\""


def test_the_wire_shape_carries_key_and_reason() -> None:
    assert reject({"orchestration": "no"}).to_wire() == {
        "code": "invalid_runtime_opt",
        "message": 'orchestration must be true or false, got "no"',
        "details": {"key": "orchestration", "reason": "expected_boolean"},
    }


def test_an_invalid_list_entry_carries_its_index() -> None:
    error = reject({"tool_env_allowlist": ["CI", "BAD NAME"]})
    assert (error.reason, error.details["index"]) == ("invalid_entry", 1)
    assert error.message.startswith("tool_env_allowlist[1] must be an environment variable name")


# --- unknown options ---------------------------------------------------------------------


def test_an_unknown_option_is_rejected_with_a_suggestion() -> None:
    error = reject({"tool_timeout": 5})
    assert (error.key, error.reason) == ("tool_timeout", "unknown_option")
    assert error.message == "unknown option 'tool_timeout'; did you mean 'tool_timeout_ms'?"


def test_an_unknown_option_without_a_close_match_points_at_the_docs() -> None:
    error = reject({"zzz": 1})
    assert error.message == "unknown option 'zzz'; see docs/configuration.md"


def test_a_non_string_key_is_an_unknown_option() -> None:
    error = reject({1: 2})
    assert (error.key, error.reason) == ("1", "unknown_option")


def test_unknown_options_are_reported_before_bad_values() -> None:
    error = reject({"tool_timeout_ms": 0, "zz_unknown": 1})
    assert (error.key, error.reason) == ("zz_unknown", "unknown_option")


def test_the_first_bad_value_in_key_order_is_reported() -> None:
    error = reject({"tool_timeout_ms": 0, "max_rounds": 0, "approval_mode": "x"})
    assert error.key == "approval_mode"


def test_options_that_are_not_a_mapping_are_rejected() -> None:
    error = reject(["tool_timeout_ms"])
    assert (error.key, error.reason) == ("options", "invalid_entry")
    assert error.message == "options must be an object, got list"


# --- network_allowlist -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "normalized"),
    [
        ("Example.COM", "example.com"),
        ("  example.com  ", "example.com"),
        ("example.com.", "example.com"),
        ("*.example.com", "example.com"),
        (".example.com", "example.com"),
        ("bücher.de", "xn--bcher-kva.de"),
        ("*.BÜCHER.de", "xn--bcher-kva.de"),
        ("xn--bcher-kva.de", "xn--bcher-kva.de"),
        ("localhost", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("::1", "::1"),
        ("[::1]", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("::FFFF:127.0.0.1", "::ffff:127.0.0.1"),
        ("my_host.internal", "my_host.internal"),
    ],
)
def test_a_network_allowlist_entry_is_normalized(entry: str, normalized: str) -> None:
    assert validate_options({"network_allowlist": [entry]})["network_allowlist"] == [normalized]


def test_network_allowlist_spellings_of_one_host_collapse_to_one_entry() -> None:
    raw = ["*.Example.com", "example.com.", ".EXAMPLE.com", "127.1", "127.0.0.1"]
    assert validate_options({"network_allowlist": raw})["network_allowlist"] == [
        "127.0.0.1",
        "example.com",
    ]


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "*",
        "*.",
        ".",
        "https://example.com",
        "example.com/path",
        "example.com:443",
        "user@example.com",
        "exa mple.com",
        "a..com",
        "-bad.example.com",
        "a" * 64 + ".com",
        "999.1.1.1",
        "example.123",
        "[example.com]",
        "fe80::1%eth0",
    ],
)
def test_a_malformed_network_allowlist_entry_is_an_invalid_entry(entry: str) -> None:
    error = reject({"network_allowlist": ["ok.example.com", entry]})
    assert (error.key, error.reason, error.details["index"]) == (
        "network_allowlist",
        "invalid_entry",
        1,
    )


# --- outside_root_allowlist --------------------------------------------------------------


def test_outside_root_entries_are_normalized_and_deduplicated() -> None:
    raw = [
        {"path": "/opt/toolchain/", "reason_code": "shared_toolchain"},
        {"pattern": " /usr/share/dict/* ", "reason_code": "wordlists"},
        {"path": "/opt/./toolchain", "reason_code": "shared_toolchain"},
        {"path": "//srv/data/../cache", "reason_code": "cache"},
    ]
    assert validate_options({"outside_root_allowlist": raw})["outside_root_allowlist"] == [
        {"path": "/opt/toolchain", "reason_code": "shared_toolchain"},
        {"pattern": "/usr/share/dict/*", "reason_code": "wordlists"},
        {"path": "/srv/cache", "reason_code": "cache"},
    ]


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("/opt/x", "expected_list_of_reason_coded_entries"),
        (["/opt/x", "why"], "expected_list_of_reason_coded_entries"),
        (None, "expected_list_of_reason_coded_entries"),
        ({"path": "/opt/x"}, "expected_list_of_reason_coded_entries"),
        ({"pattern": "/opt/*"}, "expected_list_of_reason_coded_entries"),
        ({"reason_code": "why"}, "expected_list_of_reason_coded_entries"),
        ({}, "expected_list_of_reason_coded_entries"),
        ({"path": "/opt/x", "pattern": "/opt/*", "reason_code": "why"}, "invalid_entry"),
        ({"path": "relative/x", "reason_code": "why"}, "invalid_entry"),
        ({"path": "~/x", "reason_code": "why"}, "invalid_entry"),
        ({"path": "", "reason_code": "why"}, "invalid_entry"),
        ({"pattern": "   ", "reason_code": "why"}, "invalid_entry"),
        ({"path": 5, "reason_code": "why"}, "invalid_entry"),
        ({"path": "/opt/\x00x", "reason_code": "why"}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": ""}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": "   "}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": "OPS-2\n"}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": "OPS\x002"}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": "OPS\u202e2"}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": "a" * 65}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": None}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": 2}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": ["OPS-2"]}, "invalid_entry"),
        ({"path": "/opt/x", "reason_code": "why", "note": "extra"}, "invalid_entry"),
    ],
)
def test_a_malformed_outside_root_entry_is_rejected_with_its_index(entry: Any, reason: str) -> None:
    raw = [{"path": "/opt/ok", "reason_code": "fine"}, entry]
    error = reject({"outside_root_allowlist": raw})
    assert (error.key, error.reason, error.details["index"]) == (
        "outside_root_allowlist",
        reason,
        1,
    )
    assert error.message.startswith("outside_root_allowlist[1] ")


@pytest.mark.parametrize(
    "code", ["a" * 64, "OPS-2", "Has Spaces", "1starts_with_digit", "ticket #4711 (infra)", "é"]
)
def test_any_non_empty_printable_reason_code_up_to_64_characters_is_accepted(code: str) -> None:
    entry = {"pattern": "/opt/*", "reason_code": code}
    assert validate_options({"outside_root_allowlist": [entry]})["outside_root_allowlist"] == [
        entry
    ]


def test_a_bad_reason_code_message_says_what_is_expected() -> None:
    error = reject({"outside_root_allowlist": [{"path": "/opt/x", "reason_code": ""}]})
    assert error.message == (
        "outside_root_allowlist[0] reason_code must be a non-empty string of at most 64 "
        "printable characters (e.g. 'shared_toolchain', 'OPS-2'), got \"\""
    )


def test_a_missing_reason_code_message_says_what_is_missing() -> None:
    error = reject({"outside_root_allowlist": [{"path": "/opt/x"}]})
    assert error.message == (
        "outside_root_allowlist[0] is missing 'reason_code': each entry is "
        '{path or pattern, reason_code}, got {"path": "/opt/x"}'
    )


# --- normalization is idempotent ---------------------------------------------------------

_NAMES = st.from_regex(r"\A[a-z][a-z0-9_.]{0,10}\Z")
_HOSTS = st.one_of(
    st.from_regex(r"\A(\*\.|\.)?[a-zA-Z0-9]{1,8}(\.[a-zA-Z]{2,5}){1,2}\.?\Z"),
    st.sampled_from(["127.1", "[::1]", "bücher.de", "0x7f.0.0.1", "10.0.0.1"]),
)
_REASON = st.from_regex(r"\A[a-z][a-z0-9_]{0,20}\Z")
_ENTRIES = st.one_of(
    st.fixed_dictionaries(
        {"path": st.from_regex(r"\A(/[a-z.]{1,6}){1,3}/?\Z"), "reason_code": _REASON}
    ),
    st.fixed_dictionaries({"pattern": st.from_regex(r"\A/[a-z*]{1,8}\Z"), "reason_code": _REASON}),
)
_CASE = st.sampled_from([str.lower, str.upper, str.title])

VALID_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "tool_timeout_ms": st.integers(1, 2**31 - 1),
    "tool_max_concurrency_per_conversation": st.integers(0, 100),
    "max_restarts": st.integers(0, 10),
    "llm_adapter": st.sampled_from(["deterministic", "openai"]).flatmap(
        lambda s: _CASE.map(lambda f: f(s))
    ),
    "llm_model": st.one_of(st.none(), st.text(max_size=20)),
    "llm_base_url": st.one_of(st.none(), st.sampled_from(["HTTP://h:1/v1", "https://x.y"])),
    "llm_temperature": st.one_of(st.none(), st.integers(0, 2), st.floats(0, 2)),
    "llm_max_tokens": st.one_of(st.none(), st.integers(1, 10**6)),
    "allow_tools": st.one_of(st.none(), st.lists(_NAMES, max_size=5)),
    "deny_tools": st.lists(_NAMES, max_size=5),
    "approval_mode": st.sampled_from(["never", "Sensitive", "ALWAYS"]),
    "network_egress_policy": st.sampled_from(["allow", "deny"]).flatmap(
        lambda s: _CASE.map(lambda f: f(s))
    ),
    "network_allowlist": st.lists(_HOSTS, max_size=5),
    "network_allowed_schemes": st.lists(
        st.from_regex(r"\A[a-zA-Z][a-zA-Z0-9+.-]{0,6}\Z"), max_size=4
    ),
    "sensitive_path_denylist": st.lists(
        st.text(st.characters(blacklist_characters="\x00"), min_size=1, max_size=8).filter(
            str.strip
        ),
        max_size=4,
    ),
    "outside_root_allowlist": st.lists(_ENTRIES, max_size=4),
    "tool_env_allowlist": st.lists(st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,8}\Z"), max_size=4),
    "protocol_allowlist": st.lists(st.sampled_from(["mcp", "A2A", "Mcp", "x-proto"]), max_size=4),
    "orchestration": st.booleans(),
    "alert_signal_events": st.lists(st.sampled_from(["tool.failed", "security.env_denied"])),
    "alert_router": st.one_of(st.none(), st.sampled_from(["a.b:c", " pkg:fn "])),
}


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.fixed_dictionaries({}, optional=VALID_VALUES))
def test_validating_normalized_options_again_changes_nothing(raw: dict[str, Any]) -> None:
    once = validate_options(raw)
    assert validate_options(once) == once
    assert list(once) == sorted(DEFAULTS)


# --- --opt pairs -------------------------------------------------------------------------


def test_opt_values_are_read_as_json_when_they_parse() -> None:
    pairs = ["tool_timeout_ms=5000", "orchestration=false", "allow_tools=null", 'deny_tools=["a"]']
    assert parse_opt_pairs(pairs) == {
        "tool_timeout_ms": 5000,
        "orchestration": False,
        "allow_tools": None,
        "deny_tools": ["a"],
    }


def test_opt_values_that_are_not_json_stay_strings() -> None:
    assert parse_opt_pairs(["llm_model=gpt-4o", "approval_mode=never"]) == {
        "llm_model": "gpt-4o",
        "approval_mode": "never",
    }


def test_an_opt_value_may_contain_equals_signs() -> None:
    assert parse_opt_pairs(["llm_system_prompt=a=b"]) == {"llm_system_prompt": "a=b"}


def test_an_empty_opt_value_is_an_empty_string() -> None:
    assert parse_opt_pairs(["llm_model="]) == {"llm_model": ""}


def test_a_later_opt_pair_wins() -> None:
    assert parse_opt_pairs(["max_rounds=1", "max_rounds=2"]) == {"max_rounds": 2}


def test_a_deeply_nested_opt_value_stays_a_string() -> None:
    text = "[" * 10_000
    assert parse_opt_pairs([f"deny_tools={text}"]) == {"deny_tools": text}


@pytest.mark.parametrize("pair", ["tool_timeout_ms", "=5", "  =5"])
def test_an_opt_pair_without_a_key_and_equals_sign_is_rejected(pair: str) -> None:
    with pytest.raises(InvalidRuntimeOptError) as info:
        parse_opt_pairs([pair])
    assert (info.value.key, info.value.reason) == (pair, "invalid_entry")
    assert info.value.message == f"--opt expects KEY=VALUE, got {json.dumps(pair)}"


def test_a_string_opt_value_for_an_integer_option_fails_validation() -> None:
    error = reject(parse_opt_pairs(["tool_timeout_ms=soon"]))
    assert (error.key, error.reason) == ("tool_timeout_ms", "expected_positive_integer")


# --- options files -----------------------------------------------------------------------


def test_a_json_options_file_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "opts.json"
    path.write_text('{"tool_timeout_ms": 1000, "deny_tools": ["command.run"]}')
    assert load_options_file(str(path)) == {"tool_timeout_ms": 1000, "deny_tools": ["command.run"]}


def test_a_toml_options_file_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "opts.TOML"
    path.write_text(
        'network_egress_policy = "allow"\nnetwork_allowlist = ["example.com"]\n'
        '[[outside_root_allowlist]]\npath = "/opt/tools"\nreason_code = "toolchain"\n'
    )
    assert load_options_file(str(path)) == {
        "network_egress_policy": "allow",
        "network_allowlist": ["example.com"],
        "outside_root_allowlist": [{"path": "/opt/tools", "reason_code": "toolchain"}],
    }


def test_a_json_file_with_a_byte_order_mark_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "opts.json"
    path.write_bytes(b'\xef\xbb\xbf{"max_rounds": 2}')
    assert load_options_file(str(path)) == {"max_rounds": 2}


def _file_error(path: Path) -> InvalidRuntimeOptError:
    with pytest.raises(InvalidRuntimeOptError) as info:
        load_options_file(str(path))
    assert (info.value.key, info.value.reason) == ("options_file", "invalid_entry")
    assert info.value.details["path"] == str(path)
    return info.value


def test_a_missing_options_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"
    assert _file_error(path).message == f"options file not found: {str(path)!r}"


def test_an_options_file_with_another_extension_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "opts.yaml"
    path.write_text("max_rounds: 2\n")
    assert (
        _file_error(path).message == f"options file must end in .json or .toml, got {str(path)!r}"
    )


def test_an_options_directory_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "dir.json"
    path.mkdir()
    assert _file_error(path).message.startswith(f"cannot read options file {str(path)!r}")


@pytest.mark.parametrize(
    ("name", "content", "start"),
    [
        ("bad.json", '{"max_rounds": }', "is not valid JSON"),
        ("bad.toml", "max_rounds = = 2", "is not valid TOML"),
        ("dup.json", '{"max_rounds": 1, "max_rounds": 2}', "is not valid JSON: duplicate key"),
        ("deep.json", "[" * 100_000, "is not valid JSON: nesting deeper than 32"),
        ("bytes.json", b'{"llm_model": "\xff"}', "is not valid JSON"),
        ("list.json", '["max_rounds"]', "must hold an object at the top level, got list"),
        ("null.json", "null", "must hold an object at the top level, got NoneType"),
    ],
)
def test_a_malformed_options_file_is_rejected(
    tmp_path: Path, name: str, content: str | bytes, start: str
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    assert _file_error(path).message.startswith(f"options file {str(path)!r} {start}")


def test_an_oversized_options_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"llm_system_prompt": "' + "x" * (1 << 20) + '"}')
    assert _file_error(path).message.endswith("is larger than 1048576 bytes")


def test_a_deeply_nested_toml_file_is_rejected_without_crashing(tmp_path: Path) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 100_000)
    assert "is not valid TOML" in _file_error(path).message


# --- merging -----------------------------------------------------------------------------


def test_opt_pairs_win_over_the_options_file() -> None:
    assert merge_options({"max_rounds": 1, "orchestration": False}, {"max_rounds": 2}) == {
        "max_rounds": 2,
        "orchestration": False,
    }


def test_merging_nothing_gives_nothing() -> None:
    assert merge_options(None, None) == {}


def test_a_file_and_pairs_validate_together(tmp_path: Path) -> None:
    path = tmp_path / "opts.toml"
    path.write_text('approval_mode = "ALWAYS"\nmax_rounds = 9\n')
    merged = merge_options(load_options_file(str(path)), parse_opt_pairs(["max_rounds=4"]))
    options = validate_options(merged)
    assert (options["approval_mode"], options["max_rounds"]) == ("always", 4)


# --- the typed options --------------------------------------------------------------------


def test_the_typed_options_have_exactly_one_field_per_option() -> None:
    assert sorted(RuntimeOptions.__struct_fields__) == sorted(DEFAULTS)


def test_typed_options_of_nothing_are_the_defaults() -> None:
    assert msgspec.json.decode(msgspec.json.encode(RuntimeOptions.of({}))) == DEFAULTS


def test_typed_options_keep_the_normalized_values() -> None:
    typed = RuntimeOptions.of(validate_options({"max_rounds": 2, "deny_tools": ["fs.*"]}))

    assert (typed.max_rounds, typed.deny_tools, typed.allow_tools) == (2, ("fs.*",), None)


def test_typed_options_refuse_a_value_of_the_wrong_type() -> None:
    with pytest.raises(
        msgspec.ValidationError, match=r"^Expected `int`, got `str` - at `\$\.max_rounds`$"
    ):
        RuntimeOptions.of({"max_rounds": "2"})


def test_typed_options_are_read_only() -> None:
    typed = RuntimeOptions.of({})

    with pytest.raises(AttributeError):
        typed.max_rounds = 3  # type: ignore[misc]


# --- one table of defaults ------------------------------------------------------------------


def test_the_policy_validates_exactly_the_options_of_the_table_and_writes_no_default() -> None:
    table = options_module._OPTIONS
    assert sorted(table) == sorted(RuntimeOptions.__struct_fields__)
    # each entry is a validator alone: the default is the table's field default, nowhere else
    assert all(callable(check) and not isinstance(check, tuple) for check in table.values())


def test_every_option_of_the_table_has_its_default_there() -> None:
    assert len(RuntimeOptions.__struct_defaults__) == len(RuntimeOptions.__struct_fields__)
    assert msgspec.json.decode(msgspec.json.encode(RuntimeOptions())) == DEFAULTS


def test_the_layers_below_the_policy_read_their_defaults_from_the_table(tmp_path: Path) -> None:
    from runtime.guard.network.egress import NetworkPolicy
    from runtime.guard.workspace import Workspace
    from runtime.tools.base import ToolContext

    assert ToolContext(root=str(tmp_path), options={}).settings == RuntimeOptions()
    assert (
        NetworkPolicy.from_options({}).allowed_schemes == RuntimeOptions().network_allowed_schemes
    )
    with Workspace(str(tmp_path), {}) as ws:
        for name in RuntimeOptions().sensitive_path_denylist:
            with pytest.raises(ToolError) as denied:
                ws.check_path(name.replace("*", "x"))
            assert denied.value.code == "sensitive_path_denied"
        assert ws.check_path("notes.md").inside_root


def _restated_defaults(tree: ast.AST) -> list[str]:
    """``x.get("<option>", <literal>)`` and ``x.get("<option>") or <literal>`` in ``tree``."""

    def option_get(node: ast.AST) -> str | None:
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in DEFAULTS
        ):
            return str(node.args[0].value)
        return None

    def literal(node: ast.AST) -> bool:  # a value written here, or a constant of this module
        return isinstance(node, ast.Constant | ast.List | ast.Tuple | ast.Dict) or (
            isinstance(node, ast.Name) and node.id.lstrip("_").isupper()
        )

    found = []
    for node in ast.walk(tree):
        name = option_get(node)
        if name is not None and len(node.args) > 1 and literal(node.args[1]):  # type: ignore[attr-defined]
            found.append(name)
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            first = option_get(node.values[0])
            if first is not None and literal(node.values[-1]):
                last = node.values[-1]
                if not (
                    isinstance(last, ast.List | ast.Tuple | ast.Dict) and not ast.literal_eval(last)
                ):
                    found.append(first)
    return found


@pytest.mark.slow
def test_no_module_restates_an_option_default() -> None:
    root = Path(__file__).resolve().parents[3]
    offenders = [
        f"{path.relative_to(root)}: {name}"
        for package in ("runtime", "events", "soak")
        for path in sorted((root / package).rglob("*.py"))
        if path.name not in ("option_table.py",)
        and "lifecycle" not in path.parts  # max_restarts / restart_period_ms: on its own branch
        for name in _restated_defaults(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert offenders == []


def test_a_restated_default_is_found() -> None:
    tree = ast.parse(
        'a = options.get("tool_timeout_ms", 30000)\n'
        'b = options.get("tool_max_processes") or 512\n'
        'c = options.get("deny_tools") or ()\n'  # an empty fallback restates nothing
        'd = options.get("not_an_option", 1)\n'
        'e = options.get("tool_max_output_bytes") or DEFAULT_MAX_OUTPUT\n'
    )
    assert sorted(_restated_defaults(tree)) == [
        "tool_max_output_bytes",
        "tool_max_processes",
        "tool_timeout_ms",
    ]
