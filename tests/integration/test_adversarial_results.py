"""Adversarial results through the real daemon: caps, sensitive artifacts, redaction, alerts.

The fake secrets are drawn fresh for the module, so finding one in the SQLite files or
the daemon log can only mean it leaked from this run.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.integration.adversarial_helpers import (
    Call,
    Expect,
    Sentinel,
    World,
    daemon_world,
    decision_listed,
    entries_of,
    first,
    needs_netns,
    recorded,
    start_projects,
    wait_until,
)
from tests.integration.alert_router import ALERT_FILE_ENV

C = "c"
RECORD = "tests.integration.alert_router:record"
EXPLODE = "tests.integration.alert_router:explode"
MISSING = "tests.integration.no_such_router:route"

_ALNUM = string.ascii_letters + string.digits
GITHUB_TOKEN = "ghp_" + "".join(secrets.choice(_ALNUM) for _ in range(36))
AWS_KEY_ID = "AKIA" + "".join(
    secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16)
)
LEAK = f"first {GITHUB_TOKEN} then {AWS_KEY_ID}\n"
BIG = "".join(f"{i:03d} " + "a" * 95 + "\n" for i in range(60))
MID = "".join(f"{i:03d} " + "b" * 95 + "\n" for i in range(20))
TROJAN = "access = 'user' \u202e } \u2066 if admin \u2069 {\n"

PROJECTS: dict[str, dict[str, Any]] = {
    "res": {"tool_max_output_bytes": 4096},
    "art": {"tool_max_artifact_bytes": 1024},
    "scan": {
        "alert_router": RECORD,
        "alert_signal_events": [
            "security.sensitive_artifact_detected",
            "security.sandbox_violation",
        ],
    },
    "boom": {"alert_router": EXPLODE},
    "missing": {"alert_router": MISSING},
}
"""The module's projects and their options."""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's directory."""
    return tmp_path_factory.mktemp("adv-results")


@pytest.fixture(scope="module")
def world(base: Path) -> Iterator[World]:
    """One daemon with the projects above and a conversation ``c`` in each."""

    def prepare(root: Path) -> None:
        for name, text in (("big.txt", BIG), ("mid.txt", MID), ("leak.txt", LEAK)):
            (root / name).write_text(text)
        (root / "trojan.txt").write_text(TROJAN)

    with daemon_world(
        base,
        Sentinel(base / "sentinel"),
        lambda client, _: start_projects(client, base, PROJECTS, (C,), prepare),
        **{ALERT_FILE_ENV: str(base / "alerts.jsonl")},
    ) as world:
        yield world


def encoded(value: Any) -> int:
    """Bytes of ``value`` as JSON, as the caps measure it."""
    return len(msgspec.json.encode(value))


def read_result(path: str, text: str) -> dict[str, Any]:
    """What ``fs.read`` returns for a whole small file."""
    return {"path": path, "content": text, "total_lines": text.count("\n"), "truncated": False}


def capped(world: World, call: Call, code: str, fields: dict[str, Any]) -> None:
    """``call`` ran, and its result was refused by a cap (the decision was ``allow``)."""
    result = call.run(world.client)
    assert result["status"] == "error", result
    reason = result["reason"]
    assert {"code": reason["code"], **{k: reason.get(k) for k in fields}} == {
        "code": code,
        **fields,
    }
    entries = recorded(world.client, call)
    assert [e["type"] for e in entries] == [
        "tool.requested",
        "policy.allowed",
        "tool.started",
        "tool.failed",
    ]
    failed = first(entries, "tool.failed")
    assert failed["reason"]["code"] == code
    assert "aaaaaaaaaa" not in str(failed) and "bbbbbbbbbb" not in str(failed)
    decision_listed(world.client, call, "allow", "allowed")
    world.untouched()


def test_a_result_over_the_output_cap_fails_with_its_size(world: World) -> None:
    actual = encoded(read_result("big.txt", BIG))
    assert actual > 4096
    call = Call("res", C, "fs.read", {"path": "big.txt"})
    capped(world, call, "output_too_large", {"actual": actual, "max": 4096})


def test_an_artifact_over_its_cap_fails_with_where_it_is(world: World) -> None:
    call = Call("art", C, "fs.read", {"path": "mid.txt"})
    fields = {"index": "$.content", "actual": encoded(MID), "max": 1024}
    capped(world, call, "artifact_too_large", fields)


def test_a_small_result_passes_both_caps(world: World) -> None:
    result = Call("art", C, "fs.read", {"path": "notes.txt"}).run(world.client)
    assert (result["status"], result["result"]["content"]) == ("ok", "alpha\nbeta\ngamma\n")


def test_a_sensitive_artifact_is_flagged_counted_redacted_and_alerted(
    world: World, base: Path
) -> None:
    call = Call("scan", C, "fs.read", {"path": "leak.txt"})
    result = call.run(world.client)
    assert result["status"] == "ok", result
    assert result["risk_flags"] == ["sensitive_artifact_detected"]
    assert result["sensitivity_findings_count"] == 2
    assert result["sensitivity_finding_kinds"] == ["aws_access_key_id", "github_token"]
    assert result["result"]["content"] == (
        "first [REDACTED:github_token] then [REDACTED:aws_access_key_id]\n"
    )
    entries = recorded(world.client, call)
    detected = first(entries, "security.sensitive_artifact_detected")
    assert (detected["finding_count"], detected["finding_kinds"]) == (
        2,
        ["aws_access_key_id", "github_token"],
    )
    assert first(entries, "tool.completed")["risk_flags"] == ["sensitive_artifact_detected"]
    decision_listed(world.client, call, "allow", "allowed")

    def alerted() -> list[dict[str, Any]]:
        found = entries_of(world.client, "scan", C, call.correlation)
        return [e["data"] for e in found if e["type"] == "alert.dispatched"]

    assert wait_until(alerted, what="alert.dispatched") == [
        {"event": "security.sensitive_artifact_detected", "router": RECORD}
    ]
    assert GITHUB_TOKEN not in (base / "alerts.jsonl").read_text()


def test_invisible_and_bidi_characters_are_flagged(world: World) -> None:
    result = Call("scan", C, "fs.read", {"path": "trojan.txt"}).run(world.client)
    assert result["status"] == "ok", result
    assert result["risk_flags"] == ["bidi_control", "invisible_unicode"]
    assert "sensitivity_findings_count" not in result  # only present when something was found


def test_a_project_level_signal_is_alerted_too(world: World, base: Path) -> None:
    def dispatched() -> int:
        counts = world.client.diagnostics("scan")["signal_counts"]
        return int(counts.get("alert.dispatched", 0))

    before = dispatched()
    result = world.client.run_tool("scan", {"name": "fs.read", "args": {"path": "../x"}})
    assert result["reason"]["code"] == "outside_root"
    wait_until(lambda: dispatched() == before + 1, what="a project-level alert.dispatched")
    lines = (base / "alerts.jsonl").read_text().splitlines()
    last = msgspec.json.decode(lines[-1])
    assert (last["event"], last["metadata"]["conversation_id"]) == (
        "security.sandbox_violation",
        None,
    )


@pytest.mark.parametrize(
    ("project", "router", "reason"),
    [
        ("boom", EXPLODE, "RuntimeError: router exploded on security.sandbox_violation"),
        ("missing", MISSING, "load: ModuleNotFoundError: No module named"),
    ],
    ids=["router_raises", "router_cannot_be_imported"],
)
def test_a_failing_router_is_recorded_and_the_runtime_keeps_running(
    world: World, project: str, router: str, reason: str
) -> None:
    expect = Expect(
        "outside_root",
        {"reason": "dotdot"},
        "security.sandbox_violation",
        {"reason": "dotdot", "tool": "fs.read"},
    )
    call = Call(project, C, "fs.read", {"path": "../sentinel/secret.txt"})
    world.refused(call, expect)

    def failed() -> list[dict[str, Any]]:
        found = entries_of(world.client, project, C, call.correlation)
        return [e["data"] for e in found if e["type"] == "alert.failed"]

    [data] = wait_until(failed, what="alert.failed")
    assert (data["event"], data["router"]) == ("security.sandbox_violation", router)
    assert data["reason"].startswith(reason), data["reason"]
    after = Call(project, C, "fs.read", {"path": "notes.txt"}).run(world.client)
    assert after["status"] == "ok"
    assert world.client.diagnostics(project)["health"]["status"] == "ok"
    assert world.client.send_message(project, C, "still there?", wait=True)["outcome"] == (
        "llm.completed"
    )


@needs_netns
def test_secrets_are_redacted_from_events_and_never_reach_the_journal_or_the_log(
    world: World, base: Path
) -> None:
    client = world.client
    ack = client.send_message("scan", C, f"my token is {GITHUB_TOKEN}", wait=True)
    assert ack["outcome"] == "llm.completed"
    echoed = Call("scan", C, "command.run", {"command": f"echo {GITHUB_TOKEN}"})
    result = echoed.run(client)
    assert result["result"]["stdout"] == "[REDACTED:github_token]\n"
    requested = first(recorded(client, echoed), "tool.requested")
    assert requested["args"]["command"] == "echo [REDACTED:github_token]"
    env = Call("scan", C, "command.run", {"command": "true", "env": {"GH_TOKEN": GITHUB_TOKEN}})
    assert env.run(client)["reason"]["code"] == "env_vars_not_allowed"
    assert first(recorded(client, env), "tool.requested")["args"]["env"] == {
        "GH_TOKEN": "[REDACTED]"
    }
    timeline = client.incident_timeline("scan", C, limit=500)
    assert GITHUB_TOKEN not in str(timeline) and AWS_KEY_ID not in str(timeline)
    assert client.verify("scan")["ok"] is True

    home = base / "home"
    journal = b"".join(p.read_bytes() for p in sorted(home.glob("journal.sqlite*")))
    assert b"[REDACTED:github_token]" in journal  # the grep does see event text
    assert GITHUB_TOKEN.encode() not in journal
    assert AWS_KEY_ID.encode() not in journal
    log = (home / "logs" / "daemon.log").read_bytes()
    assert log  # the daemon did log
    assert GITHUB_TOKEN.encode() not in log and AWS_KEY_ID.encode() not in log
    assert GITHUB_TOKEN in (base / "scan" / "leak.txt").read_text()  # the secret is real
