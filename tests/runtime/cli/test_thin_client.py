"""The thin client: what ``roost`` loads for ``--version``, a client command and a TAB.

Deterministic checks, not timings: each test runs ``roost`` as a program under
``python -X importtime`` and reads, from that log, every module the run imported. The
figures (``roost --version`` in ms, the overhead of ``send``) are in ``docs/performance.md``.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.client import Client
from runtime.version import VERSION
from tests.runtime.daemon_helpers import daemon_env, running_daemon

REPO = Path(__file__).resolve().parents[3]

HEAVY = (
    "runtime.daemon",
    "runtime.journal",
    "runtime.logging",
    "runtime.lifecycle",
    "runtime.agent",
    "runtime.tools",
    "runtime.telemetry",
    "actors",
    "thespian",
    "eventsourcing",
    "structlog",
    "psycopg",
    "opentelemetry",
)
"""What no client-side run may load (the ``thin-client`` contract in pyproject.toml)."""

CODEC = ("msgspec", "events", "typing_extensions", "inspect", "dataclasses", "uuid", "platform")
"""What a client command does not load either: msgspec (the client's frames and ``--json``
are on the standard library's ``json``), the events package (its answers' shapes are types
only), and what those would bring (``docs/performance.md``, "The thin client")."""

_IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(?P<name>\S+)\s*$")


def run_loaded(
    *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``roost ARGS`` with ``-X importtime``; return the run and the modules it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runtime.cli", *args],
        env=env or daemon_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    loaded = {m["name"] for line in done.stderr.splitlines() if (m := _IMPORT_LINE.match(line))}
    assert "runtime.cli.app" in loaded, done.stderr[-2000:]
    return done, loaded


def heavy(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded if m.startswith(HEAVY))


def codec(loaded: set[str]) -> list[str]:
    return sorted(m for m in loaded if m in CODEC or m.startswith(tuple(f"{c}." for c in CODEC)))


def stderr_text(done: subprocess.CompletedProcess[str]) -> str:
    return "\n".join(line for line in done.stderr.splitlines() if not _IMPORT_LINE.match(line))


def test_the_version_is_the_one_of_pyproject_and_of_the_installed_package() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert VERSION == project["version"] == importlib.metadata.version("roost")


def test_version_loads_neither_the_daemon_nor_the_client_nor_a_codec() -> None:
    done, loaded = run_loaded("--version")
    assert (done.returncode, done.stdout) == (0, f"roost {VERSION}\n")
    assert heavy(loaded) == []
    # cheaper still than a client command: no client, no codec, no events, no metadata scan
    for module in ("runtime.client", "msgspec", "events", "importlib.metadata", "rich"):
        assert module not in loaded, module


def test_help_loads_no_daemon_module() -> None:
    done, loaded = run_loaded("send", "--help")
    assert done.returncode == 0, stderr_text(done)
    assert heavy(loaded) == []


def test_a_client_command_loads_the_client_but_not_the_daemon(tmp_path: Path) -> None:
    done, loaded = run_loaded("--home", str(tmp_path / "none"), "project", "list")
    assert done.returncode == 3, stderr_text(done)
    assert "daemon_unreachable" in stderr_text(done)
    assert "runtime.client.connection" in loaded
    assert heavy(loaded) == []
    assert codec(loaded) == []


def test_a_daemon_command_still_loads_the_daemon_when_it_runs(tmp_path: Path) -> None:
    done, loaded = run_loaded("--home", str(tmp_path / "none"), "daemon", "status")
    assert done.returncode == 3, stderr_text(done)
    assert "runtime.daemon.control" in loaded


# --- completion ------------------------------------------------------------------------


def complete(line: str, tmp_path: Path, home: str | None) -> tuple[list[str], set[str]]:
    """What a TAB at the end of ``line`` offers, and the modules that run loaded."""
    out = tmp_path / f"complete-{uuid.uuid4().hex[:6]}"
    env = daemon_env(
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_SHELL="bash",
        _ARGCOMPLETE_STDOUT_FILENAME=str(out),
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
        COMP_TYPE="9",
        # the default (2 s) is for people; a busy test machine may take longer to start
        ROOST_COMPLETION_TIMEOUT_S="60",
    )
    if home is not None:
        env["ROOST_HOME"] = home
    done, loaded = run_loaded(env=env)
    assert done.returncode == 0, stderr_text(done)
    text = out.read_text() if out.exists() else ""
    return [w.strip() for w in text.split("\v") if w.strip()], loaded


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = str(tmp_path_factory.mktemp("daemon") / "home")
    with running_daemon(path):
        with Client.connect(path) as c:
            for project in ("alpha", "beta"):
                c.start_project(str(tmp_path_factory.mktemp(project)), project_id=project)
            c.start_conversation("alpha", conversation_id="c-one")
            c.start_conversation("alpha", conversation_id="c-two")
        yield path


@pytest.mark.parametrize(
    "command",
    [
        ("send", "alpha", "c-one", "héllo ✓", "--wait"),
        ("--json", "send", "alpha", "c-one", "hello"),
        ("timeline", "alpha", "c-one"),
        ("--json", "timeline", "alpha", "c-one"),
        ("incident", "alpha", "c-one"),
        ("projection", "alpha", "c-one", "timeline"),
        ("conversation", "list", "alpha"),
        ("project", "list"),
        ("cancel", "alpha", "c-two"),
    ],
    ids=" ".join,
)
def test_a_client_command_loads_no_codec_but_json(home: str, command: tuple[str, ...]) -> None:
    done, loaded = run_loaded("--home", home, *command)
    assert done.returncode == 0, stderr_text(done)
    assert "runtime.wire.client_codec" in loaded
    assert heavy(loaded) == []
    assert codec(loaded) == []


def test_send_wait_prints_the_turn_the_daemon_answered(home: str) -> None:
    done, _ = run_loaded("--home", home, "--json", "send", "alpha", "c-one", "hi ✓", "--wait")
    assert done.returncode == 0, stderr_text(done)
    with Client.connect(home) as c:
        entries = c.incident_timeline("alpha", "c-one", 500)["entries"]
    ack = json.loads(done.stdout)
    sent = next(e for e in entries if e["correlation_id"] == ack["correlation_id"])
    assert (sent["type"], sent["data"]["content"]) == ("user.message", "hi ✓")


def test_a_tab_offers_the_project_ids_the_daemon_runs(tmp_path: Path, home: str) -> None:
    words, loaded = complete("roost send ", tmp_path, home)
    assert sorted(words) == ["alpha", "beta"]
    assert heavy(loaded) == []
    words, _ = complete("roost timeline al", tmp_path, home)
    assert words == ["alpha"]


def test_a_tab_offers_the_conversation_ids_of_the_project_typed(tmp_path: Path, home: str) -> None:
    words, loaded = complete("roost send alpha ", tmp_path, home)
    assert sorted(words) == ["c-one", "c-two"]
    assert heavy(loaded) == []
    words, _ = complete(f"roost --home {home} cancel alpha c-t", tmp_path, None)
    assert words == ["c-two"]
    words, _ = complete("roost send beta ", tmp_path, home)
    assert words == []


def test_a_tab_with_no_daemon_offers_nothing_and_says_nothing(tmp_path: Path) -> None:
    words, loaded = complete("roost send ", tmp_path, str(tmp_path / "no-daemon"))
    assert words == []
    assert heavy(loaded) == []
    commands, _ = complete("roost pro", tmp_path, str(tmp_path / "no-daemon"))
    assert commands == ["project", "projection"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0.5", 0.5), ("30", 30.0), ("0", 2.0), ("-1", 2.0), ("nan", 2.0), ("inf", 2.0), ("x", 2.0)],
)
def test_the_completion_timeout_is_a_positive_number_or_the_default(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: float
) -> None:
    from runtime.cli.completion import ASK_TIMEOUT_S, ask_timeout_s

    assert ASK_TIMEOUT_S == 2.0
    monkeypatch.setenv("ROOST_COMPLETION_TIMEOUT_S", value)
    assert ask_timeout_s() == expected
