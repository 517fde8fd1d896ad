"""The policy decision: every outcome with the exact events, in order, and their codes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import catalog as ev
from runtime.option_table import RuntimeOptions
from runtime.policy.decisions import PolicyContext, Verdict, decide, needs_approval
from runtime.policy.options import validate_options
from runtime.tools.base import CallSpec, ToolSpec
from runtime.tools.registry import ToolRegistry


def write_asset(root: Path, kind: str, key: str, text: str) -> None:
    folder = root / ".roost" / kind
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{key}.md").write_text(text)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("hello\n")
    (project / ".env").write_text("TOKEN=x\n")
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("[core]\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shared.txt").write_text("shared\n")
    (outside / "id_rsa").write_text("key\n")
    write_asset(
        project,
        "commands",
        "greet",
        '---\ninput_schema: {"type": "object", "properties": {"name": {"type": "string"}}}\n'
        'argv: ["echo", "{{name}}"]\n---\n',
    )
    write_asset(project, "commands", "escalate", '---\nargv: ["sudo", "id"]\n---\n')
    return project


def context(root: Path, **options: Any) -> PolicyContext:
    normalized = validate_options(options)
    registry = ToolRegistry.for_project(str(root), normalized)
    return PolicyContext(project_id="p1", root=str(root), options=normalized, registry=registry)


def call(name: str, **args: Any) -> CallSpec:
    return CallSpec(call_id="call-1", name=name, args=args, conversation_id="c1")


def decide_in(root: Path, name: str, args: dict[str, Any], **options: Any) -> Verdict:
    return decide(CallSpec(call_id="call-1", name=name, args=args), context(root, **options))


def types(verdict: Verdict) -> list[type[ev.Event]]:
    return [type(e) for e in verdict.events]


def failure(verdict: Verdict) -> dict[str, Any]:
    last = verdict.events[-1]
    assert isinstance(last, ev.ToolFailed)
    assert last.call_id == "call-1"
    return last.reason


def denied(verdict: Verdict) -> ev.PolicyDenied:
    found = [e for e in verdict.events if isinstance(e, ev.PolicyDenied)]
    assert len(found) == 1
    return found[0]


# --- allow and ask -------------------------------------------------------------------------


def test_a_read_inside_the_root_is_allowed_with_one_policy_allowed_event(root: Path) -> None:
    verdict = decide(call("fs.read", path="a.txt"), context(root))

    assert verdict.outcome == "allow"
    assert verdict.events == [
        ev.PolicyAllowed(tool="fs.read", reason="allowed", source="policy", call_id="call-1")
    ]


def test_deciding_a_write_changes_nothing_on_disk(root: Path) -> None:
    verdict = decide_in(root, "fs.write", {"path": "new.txt", "content": "x"})

    assert verdict.outcome == "allow"
    assert not (root / "new.txt").exists()


def test_approval_mode_always_asks_for_every_call_with_only_the_approval_request(
    root: Path,
) -> None:
    verdict = decide_in(root, "fs.read", {"path": "a.txt"}, approval_mode="always")

    assert verdict.outcome == "ask"
    assert verdict.events == [ev.ToolApprovalRequested(call_id="call-1")]


@pytest.mark.parametrize(
    ("name", "args", "outcome"),
    [
        ("fs.read", {"path": "a.txt"}, "allow"),
        ("asset.list", {"type": "skills"}, "allow"),
        ("fs.write", {"path": "b.txt", "content": "x"}, "ask"),
        ("command.run", {"command": "echo hi"}, "ask"),
        ("http.fetch", {"url": "https://example.com/"}, "ask"),
        ("command.run.greet", {"name": "bob"}, "ask"),
    ],
)
def test_approval_mode_sensitive_asks_only_for_writes_commands_and_network(
    root: Path, name: str, args: dict[str, Any], outcome: str
) -> None:
    verdict = decide_in(
        root, name, args, approval_mode="sensitive", network_allowlist=["example.com"]
    )

    assert verdict.outcome == outcome


def test_a_refusal_wins_over_asking_for_approval(root: Path) -> None:
    verdict = decide_in(root, "fs.read", {"path": "../outside/shared.txt"}, approval_mode="always")

    assert verdict.outcome == "deny"
    assert failure(verdict)["code"] == "outside_root"


def test_needs_approval_reads_the_spec_flags() -> None:
    spec = ToolSpec(name="x", description="", input_schema={}, network_capable=True)

    assert needs_approval(spec, RuntimeOptions.of({"approval_mode": "sensitive"})) is True
    assert needs_approval(spec, RuntimeOptions.of({"approval_mode": "never"})) is False
    assert (
        needs_approval(ToolSpec(name="y", description="", input_schema={}), RuntimeOptions.of({}))
        is False
    )


# --- invalid -------------------------------------------------------------------------------


def test_an_unknown_tool_is_invalid_with_a_single_tool_failed(root: Path) -> None:
    verdict = decide_in(root, "fs.delete", {"path": "a.txt"})

    assert verdict.outcome == "invalid"
    assert types(verdict) == [ev.ToolFailed]
    assert failure(verdict)["code"] == "unknown_tool"
    assert failure(verdict)["tool"] == "fs.delete"


def test_unknown_tool_is_checked_before_the_deny_list(root: Path) -> None:
    verdict = decide_in(root, "fs.delete", {}, deny_tools=["fs.delete"])

    assert failure(verdict)["code"] == "unknown_tool"


def test_missing_arguments_are_invalid_tool_args(root: Path) -> None:
    verdict = decide_in(root, "fs.read", {})

    assert verdict.outcome == "invalid"
    assert types(verdict) == [ev.ToolFailed]
    reason = failure(verdict)
    assert (reason["code"], reason["kind"], reason["keys"]) == (
        "invalid_tool_args",
        "missing_required_args",
        ["path"],
    )


def test_unexpected_arguments_are_invalid_tool_args(root: Path) -> None:
    reason = failure(decide_in(root, "fs.read", {"path": "a.txt", "mode": "rb"}))

    assert (reason["kind"], reason["keys"]) == ("unexpected_args", ["mode"])


def test_a_wrongly_typed_argument_is_invalid_tool_args(root: Path) -> None:
    reason = failure(decide_in(root, "fs.read", {"path": "a.txt", "limit": "ten"}))

    assert (reason["kind"], reason["key"], reason["expected"]) == (
        "invalid_type",
        "limit",
        "integer",
    )


def test_the_schema_is_checked_before_the_policy_rules(root: Path) -> None:
    verdict = decide_in(root, "fs.read", {"path": "../x", "extra": 1})

    assert verdict.outcome == "invalid"
    assert failure(verdict)["kind"] == "unexpected_args"


def test_a_path_with_a_nul_byte_is_invalid_not_denied(root: Path) -> None:
    verdict = decide_in(root, "fs.read", {"path": "a\x00.txt"})

    assert verdict.outcome == "invalid"
    assert types(verdict) == [ev.ToolFailed]
    assert (failure(verdict)["code"], failure(verdict)["reason"]) == (
        "invalid_tool_args",
        "nul_byte",
    )


def test_env_keys_not_allowlisted_are_refused_with_an_env_signal_first(root: Path) -> None:
    verdict = decide_in(root, "command.run", {"command": "env", "env": {"FOO": "1", "BAR": "2"}})

    assert verdict.outcome == "invalid"
    assert types(verdict) == [ev.SecurityEnvDenied, ev.ToolFailed]
    signal = verdict.events[0]
    assert isinstance(signal, ev.SecurityEnvDenied)
    assert signal.denied_keys == ["BAR", "FOO"]
    assert (signal.tool, signal.call_id) == ("command.run", "call-1")
    assert failure(verdict)["code"] == "env_vars_not_allowed"
    assert failure(verdict)["keys"] == ["BAR", "FOO"]


def test_loader_hijack_keys_are_refused_even_when_allowlisted(root: Path) -> None:
    verdict = decide_in(
        root,
        "command.run",
        {"command": "env", "env": {"LD_PRELOAD": "/x.so"}},
        tool_env_allowlist=["LD_PRELOAD"],
    )

    assert failure(verdict) | {"message": ""} == {
        "code": "env_vars_not_allowed",
        "message": "",
        "keys": ["LD_PRELOAD"],
    }


def test_a_wrongly_typed_env_value_is_caught_by_the_schema(root: Path) -> None:
    verdict = decide_in(root, "command.run", {"command": "env", "env": {"FOO": 1}})

    assert types(verdict) == [ev.ToolFailed]
    assert (failure(verdict)["code"], failure(verdict)["key"]) == ("invalid_tool_args", "env.FOO")


def test_a_malformed_env_payload_is_invalid_env_payload(root: Path) -> None:
    verdict = decide_in(root, "command.run", {"command": "env", "env": {"A=B": "1"}})

    assert types(verdict) == [ev.SecurityEnvDenied, ev.ToolFailed]
    signal = verdict.events[0]
    assert isinstance(signal, ev.SecurityEnvDenied)
    assert signal.reason == "invalid_key"
    assert failure(verdict)["code"] == "invalid_env_payload"


def test_allowlisted_env_keys_pass(root: Path) -> None:
    verdict = decide_in(
        root, "command.run", {"command": "env", "env": {"FOO": "1"}}, tool_env_allowlist=["FOO"]
    )

    assert verdict.outcome == "allow"


# --- deny: lists ---------------------------------------------------------------------------


def test_a_tool_in_deny_tools_is_denied_without_a_security_signal(root: Path) -> None:
    verdict = decide_in(root, "fs.read", {"path": "a.txt"}, deny_tools=["fs.read"])

    assert verdict.outcome == "deny"
    assert types(verdict) == [ev.PolicyDenied, ev.ToolFailed]
    assert denied(verdict) == ev.PolicyDenied(
        tool="fs.read", reason="denied", source="policy", call_id="call-1"
    )
    assert (failure(verdict)["code"], failure(verdict)["rule"]) == ("denied", "deny_tools")


def test_a_tool_missing_from_allow_tools_is_denied(root: Path) -> None:
    verdict = decide_in(root, "fs.write", {"path": "b", "content": ""}, allow_tools=["fs.read"])

    assert (failure(verdict)["code"], failure(verdict)["rule"]) == ("denied", "allow_tools")


# --- deny: paths ---------------------------------------------------------------------------


def test_a_path_climbing_out_of_the_root_is_a_sandbox_violation(root: Path) -> None:
    verdict = decide_in(root, "fs.read", {"path": "../outside/shared.txt"})

    assert verdict.outcome == "deny"
    assert types(verdict) == [ev.SecuritySandboxViolation, ev.PolicyDenied, ev.ToolFailed]
    signal = verdict.events[0]
    assert isinstance(signal, ev.SecuritySandboxViolation)
    assert (signal.tool, signal.reason, signal.call_id) == ("fs.read", "dotdot", "call-1")
    assert denied(verdict).reason == "outside_root"
    assert denied(verdict).outside_root_exception_reason_codes == []
    assert failure(verdict)["code"] == "outside_root"


def test_an_absolute_path_outside_the_root_is_denied(root: Path) -> None:
    verdict = decide_in(root, "fs.read", {"path": str(root.parent / "outside" / "shared.txt")})

    assert failure(verdict)["reason"] == "absolute_outside"


def test_a_symlink_out_of_the_root_is_denied(root: Path) -> None:
    (root / "link").symlink_to(root.parent / "outside")

    verdict = decide_in(root, "fs.read", {"path": "link/shared.txt"})

    assert (failure(verdict)["code"], failure(verdict)["reason"]) == (
        "outside_root",
        "symlink_escape",
    )


def test_paths_inside_json_strings_and_key_value_text_are_checked(root: Path) -> None:
    inside = decide_in(root, "command.run", {"command": "ls", "cwd": "."})
    direct = decide_in(root, "command.run", {"command": "ls", "cwd": "../outside"})
    from_json = decide_in(root, "command.run", {"command": json.dumps({"cwd": "../outside"})})
    from_text = decide_in(root, "command.run", {"command": "tool path=../../etc/passwd"})

    assert inside.outcome == "allow"
    assert failure(direct)["code"] == "outside_root"
    assert failure(from_json)["code"] == "outside_root"
    assert failure(from_text)["code"] == "outside_root"


def test_file_contents_are_data_and_not_searched_for_paths(root: Path) -> None:
    verdict = decide_in(
        root, "fs.write", {"path": "deploy.sh", "content": "install dest=/usr/local\n"}
    )

    assert verdict.outcome == "allow"


def test_a_sensitive_path_is_denied_with_its_signal(root: Path) -> None:
    verdict = decide_in(root, "fs.read", {"path": ".ENV"})

    assert types(verdict) == [ev.SecuritySensitivePathDenied, ev.PolicyDenied, ev.ToolFailed]
    signal = verdict.events[0]
    assert isinstance(signal, ev.SecuritySensitivePathDenied)
    assert (signal.path, signal.reason) == (".ENV", "sensitive_path")
    assert denied(verdict).reason == "sensitive_path_denied"
    assert (failure(verdict)["code"], failure(verdict)["pattern"]) == (
        "sensitive_path_denied",
        ".env",
    )


def test_git_config_may_be_read_but_never_written(root: Path) -> None:
    read = decide_in(root, "fs.read", {"path": ".git/config"})
    write = decide_in(root, "fs.write", {"path": ".git/config", "content": "x"})

    assert read.outcome == "allow"
    assert write.outcome == "deny"
    assert (failure(write)["code"], failure(write)["reason"]) == (
        "sensitive_path_denied",
        "protected_path",
    )


def test_writes_under_roost_are_refused(root: Path) -> None:
    verdict = decide_in(root, "fs.write", {"path": ".roost/commands/x.md", "content": "x"})

    assert failure(verdict)["pattern"] == ".roost/"


def test_a_fifo_is_denied_as_not_a_regular_file_without_a_signal(root: Path) -> None:
    os.mkfifo(root / "pipe")

    verdict = decide_in(root, "fs.read", {"path": "pipe"})

    assert types(verdict) == [ev.PolicyDenied, ev.ToolFailed]
    assert denied(verdict).reason == "not_a_regular_file"


def test_an_outside_root_exception_allows_with_the_exception_signal_first(root: Path) -> None:
    outside = root.parent / "outside"
    allow = [{"path": str(outside), "reason_code": "shared_data"}]

    verdict = decide_in(
        root, "fs.read", {"path": str(outside / "shared.txt")}, outside_root_allowlist=allow
    )

    assert verdict.outcome == "allow"
    assert types(verdict) == [ev.SecuritySandboxExceptionUsed, ev.PolicyAllowed]
    used = verdict.events[0]
    assert isinstance(used, ev.SecuritySandboxExceptionUsed)
    assert (used.reason_code, used.path, used.tool) == (
        "shared_data",
        str(outside / "shared.txt"),
        "fs.read",
    )
    allowed = verdict.events[1]
    assert isinstance(allowed, ev.PolicyAllowed)
    assert allowed.reason == "outside_root_exception"


def test_an_outside_root_exception_never_bypasses_the_sensitive_denylist(root: Path) -> None:
    outside = root.parent / "outside"
    allow = [{"path": str(outside), "reason_code": "shared_data"}]

    verdict = decide_in(
        root, "fs.read", {"path": str(outside / "id_rsa")}, outside_root_allowlist=allow
    )

    assert verdict.outcome == "deny"
    assert types(verdict) == [ev.SecuritySensitivePathDenied, ev.PolicyDenied, ev.ToolFailed]
    assert denied(verdict).outside_root_exception_reason_codes == ["shared_data"]


# --- deny: commands, network, protocols ----------------------------------------------------


def test_a_blocklisted_command_is_blocked_with_its_pattern(root: Path) -> None:
    verdict = decide_in(root, "command.run", {"command": "rm -rf /"})

    assert types(verdict) == [ev.SecurityCommandBlocked, ev.PolicyDenied, ev.ToolFailed]
    assert verdict.events[0] == ev.SecurityCommandBlocked(pattern="rm_rf_root", call_id="call-1")
    assert denied(verdict).reason == "command_blocked"
    assert (failure(verdict)["code"], failure(verdict)["pattern"]) == (
        "command_blocked",
        "rm_rf_root",
    )


def test_an_argv_command_is_checked_against_the_blocklist_too(root: Path) -> None:
    verdict = decide_in(root, "command.run", {"command": ["sudo", "ls"]})

    assert failure(verdict)["pattern"] == "sudo"


def test_an_asset_command_is_judged_on_its_rendered_argv(root: Path) -> None:
    verdict = decide_in(root, "command.run.escalate", {})

    assert types(verdict) == [ev.SecurityCommandBlocked, ev.PolicyDenied, ev.ToolFailed]
    assert failure(verdict)["pattern"] == "sudo"


def test_an_asset_command_with_a_network_target_in_its_input_is_denied(root: Path) -> None:
    verdict = decide_in(root, "command.run.greet", {"name": "https://evil.example/"})

    assert failure(verdict)["code"] == "network_denied"


def test_a_fetch_to_a_host_not_allowlisted_is_network_denied(root: Path) -> None:
    verdict = decide_in(root, "http.fetch", {"url": "https://example.org/x"})

    assert types(verdict) == [ev.SecurityNetworkDenied, ev.PolicyDenied, ev.ToolFailed]
    assert verdict.events[0] == ev.SecurityNetworkDenied(
        target="https://example.org/x",
        reason="not_allowlisted",
        tool="http.fetch",
        call_id="call-1",
    )
    assert denied(verdict).reason == "network_denied"
    assert failure(verdict)["code"] == "network_denied"


def test_an_allowlisted_host_is_allowed(root: Path) -> None:
    verdict = decide_in(
        root, "http.fetch", {"url": "https://api.example.org/x"}, network_allowlist=["example.org"]
    )

    assert verdict.outcome == "allow"


@pytest.mark.parametrize(
    "url", ["http://127.1/", "http://2130706433/", "http://[::ffff:127.0.0.1]/"]
)
def test_loopback_in_any_spelling_is_network_endpoint_denied_even_with_egress_allowed(
    root: Path, url: str
) -> None:
    verdict = decide_in(root, "http.fetch", {"url": url}, network_egress_policy="allow")

    assert denied(verdict).reason == "network_endpoint_denied"
    assert (failure(verdict)["code"], failure(verdict)["reason"]) == (
        "network_endpoint_denied",
        "loopback",
    )


def test_a_scheme_not_allowed_is_network_protocol_denied(root: Path) -> None:
    verdict = decide_in(
        root, "http.fetch", {"url": "ftp://example.org/x"}, network_egress_policy="allow"
    )

    assert failure(verdict)["code"] == "network_protocol_denied"
    assert types(verdict)[0] is ev.SecurityNetworkDenied


def test_network_targets_in_command_text_are_judged(root: Path) -> None:
    verdict = decide_in(root, "command.run", {"command": "curl -s https://example.org | head"})

    assert failure(verdict)["code"] == "network_denied"


def test_urls_in_file_contents_are_not_network_targets(root: Path) -> None:
    verdict = decide_in(root, "fs.write", {"path": "README", "content": "see https://example.org"})

    assert verdict.outcome == "allow"


def test_an_mcp_target_outside_protocol_allowlist_is_protocol_denied(root: Path) -> None:
    verdict = decide_in(
        root, "command.run", {"command": "client mcp://tools.example/run"}, protocol_allowlist=[]
    )

    assert types(verdict) == [ev.SecurityProtocolDenied, ev.PolicyDenied, ev.ToolFailed]
    assert verdict.events[0] == ev.SecurityProtocolDenied(protocol="mcp", operation="command.run")
    assert denied(verdict).reason == "network_protocol_denied"
    assert (failure(verdict)["code"], failure(verdict)["protocol"]) == (
        "network_protocol_denied",
        "mcp",
    )


def test_an_allowed_protocol_still_needs_its_scheme_in_the_network_policy(root: Path) -> None:
    verdict = decide_in(root, "command.run", {"command": "client mcp://tools.example/run"})

    assert types(verdict) == [ev.SecurityNetworkDenied, ev.PolicyDenied, ev.ToolFailed]
    assert failure(verdict)["code"] == "network_protocol_denied"


def test_a_tool_named_for_a_protocol_is_governed_by_protocol_allowlist(root: Path) -> None:
    spec = ToolSpec(name="a2a.send", description="Send.", input_schema={"type": "object"})
    registry = ToolRegistry({"a2a.send": (spec, lambda ctx, args: {})})
    options = validate_options({"protocol_allowlist": ["mcp"]})
    ctx = PolicyContext(project_id="p1", root=str(root), options=options, registry=registry)

    refused = decide(call("a2a.send"), ctx)
    allowed = decide(
        call("a2a.send"), PolicyContext("p1", str(root), validate_options({}), registry)
    )

    assert refused.events[0] == ev.SecurityProtocolDenied(protocol="a2a", operation="a2a.send")
    assert failure(refused)["code"] == "network_protocol_denied"
    assert allowed.outcome == "allow"


# --- properties ----------------------------------------------------------------------------


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    climbs=st.integers(min_value=1, max_value=6),
    name=st.text(alphabet="abcxyz._-", min_size=1, max_size=12).filter(
        lambda s: s not in (".", "..")
    ),
    key=st.sampled_from(["path", "file", "cwd", "target"]),
)
def test_a_path_that_climbs_above_the_root_is_never_allowed(
    root: Path, climbs: int, name: str, key: str
) -> None:
    ctx = context(root)
    text = "../" * climbs + name

    verdict = decide(call("command.run", command=f"echo {key}={text}"), ctx)

    assert verdict.outcome == "deny"
    assert failure(verdict)["code"] == "outside_root"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(name=st.text(min_size=1, max_size=30))
def test_a_name_the_registry_does_not_hold_is_always_unknown_tool(root: Path, name: str) -> None:
    ctx = context(root)
    if ctx.registry.get(name) is not None:
        return

    verdict = decide(call(name), ctx)

    assert (verdict.outcome, failure(verdict)["code"]) == ("invalid", "unknown_tool")
