"""Secret values, not only secret shapes: a committed ``.env`` read back through git.

``fs.read .env`` and ``cat .env`` are refused, but git's object store holds the file: a
command can print it (``git show HEAD:.env``) reversed, in base64, in hex or URL-quoted.
Through a real daemon each of these (by ``command.run``, an asset command, a workflow step,
an MCP stdio server's tool, and ``http.fetch`` of a service that echoes them) must come
back with the values masked, and none of the
values may reach the SQLite journal's bytes, ``roost timeline`` or ``roost incident``.
A value the daemon's environment holds and withholds from commands is masked the same way
when a command finds it elsewhere; a short or ordinary value is left alone.

The secrets are drawn fresh for the module, so finding one anywhere means it leaked.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
import shutil
import string
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec
import pytest

from runtime.client import Client
from runtime.guard.secrets.masking import SECRET_VALUE_MARKER
from runtime.journal.store import Journal
from tests.integration.adversarial_helpers import Call, needs_bwrap, run_daemon
from tests.integration.conftest import REPO_ROOT, Daemon, daemon_env, make_root
from tests.integration.test_trust_boundary import git

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed here"),
]

C = "c"
FIXTURE = Path(__file__).with_name("mcp_fixture_server.py")
_ALNUM = string.ascii_letters + string.digits


def _fresh(size: int) -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(size - 2)) + "7Q"


ACCESS = "Ac" + _fresh(22)
"""Under a name no shape rule knows: only the value tells it is a secret."""
PASSWORD = "Pw" + _fresh(18)
WITHHELD = "dpl_" + _fresh(30)
"""In the daemon's environment only (ROOST_TEST_DEPLOY_KEY), never given to a command."""
ORDINARY = "roostapp"
"""A value of letters only, in the same ``.env``: not masked."""
DOTENV = (
    f"SERVICE_ACCESS={ACCESS}\nDB_PASSWORD='{PASSWORD}'\nAPP_NAME={ORDINARY}\nPORT=8080\nPIN=4711\n"
)
SECRETS = [ACCESS, PASSWORD, WITHHELD]

WORKFLOW = """---
description: Read the committed .env back in base64
steps: [{"tool": "command.run", "args": {"command": "git show HEAD:.env | base64"}}]
---
One step.
"""
ASSET = '---\ndescription: Show the committed .env\nargv: ["git", "show", "HEAD:.env"]\n---\n'


def forms(value: str) -> list[str]:
    """The value and the encodings the commands below print it in (whitespace removed)."""
    data = value.encode()
    return [
        value,
        value[::-1],
        binascii.hexlify(data).decode(),
        quote(value, safe=""),
        *(base64.b64encode(b"\0" * k + data).decode()[4:-4] for k in range(3)),
    ]


def squeezed(text: str) -> str:
    return "".join(text.split())


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("secretvalues")


class _Hex(BaseHTTPRequestHandler):
    """Answers every GET with the ``.env`` in hex, as a leaky web service would."""

    def do_GET(self) -> None:
        body = binascii.hexlify(DOTENV.encode()) + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    """A loopback HTTP server that serves the secrets; its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hex)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/config"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def daemon(base: Path, web: str) -> Iterator[Daemon]:
    root = Path(make_root(base / "repo"))
    (root / ".env").write_text(DOTENV)
    for args in (["init", "-q"], ["add", ".env", "README.md"], ["commit", "-qm", "config"]):
        assert git(root, *args).returncode == 0
    (root / "deploy-notes.txt").write_text(f"the deploy key is {WITHHELD}\n")
    (root / ".roost" / "workflows").mkdir()
    (root / ".roost" / "workflows" / "leak.md").write_text(WORKFLOW)
    (root / ".roost" / "commands").mkdir()
    (root / ".roost" / "commands" / "showenv.md").write_text(ASSET)
    shutil.copy(FIXTURE, root / "server.py")
    (root / "env.b64").write_text(base64.b64encode(DOTENV.encode()).decode() + "\n")
    mcp = {"name": "fx", "command": [sys.executable, str(root / "server.py"), str(root)]}
    with (
        run_daemon(base / "home", ROOST_TEST_DEPLOY_KEY=WITHHELD) as running,
        running.client(timeout_s=60) as c,
    ):
        options = {"mcp_servers": [mcp], "network_allowlist": ["127.0.0.1"]}
        c.start_project(str(root), project_id="p", options=options)
        c.start_conversation("p", conversation_id=C)
        yield running


@pytest.fixture
def client(daemon: Daemon) -> Iterator[Client]:
    with daemon.client(timeout_s=60) as c:
        yield c


def run(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = Call("p", C, name, args).run(client)
    assert result["status"] == "ok", result
    return result


def assert_masked(result: dict[str, Any], *values: str) -> str:
    """No form of ``values`` in ``result``; a mask marker and a ``secret_value`` finding."""
    shown = json.dumps(result)
    for value in values:
        for form in forms(value):
            assert form not in squeezed(shown), (form, shown)
    assert SECRET_VALUE_MARKER in shown, shown
    assert "secret_value" in result["sensitivity_finding_kinds"], result
    return shown


COMMANDS = {
    "plain": "git show HEAD:.env",
    "reversed": "git show HEAD:.env | rev",
    "base64": "git show HEAD:.env | base64",
    "hex": "git show HEAD:.env | xxd -p",
    "od": "git show HEAD:.env | od -An -tx1",
    "url": "git show HEAD:.env | python3 -c "
    "'import sys, urllib.parse; print(urllib.parse.quote(sys.stdin.read()))'",
    # found by the red team of issue 17: each printed the values past the masker
    "base32": "git show HEAD:.env | base32",
    "octal": "git show HEAD:.env | od -An -b",
    "decimal": "git show HEAD:.env | python3 -c 'import sys; print(list(sys.stdin.buffer.read()))'",
    "escapes": "git show HEAD:.env | python3 -c "
    '\'import sys; print("".join("\\\\x%02x" % b for b in sys.stdin.buffer.read()))\'',
    "c_array": "git show HEAD:.env | xxd -i",
}


@pytest.mark.parametrize("how", sorted(COMMANDS))
def test_a_committed_env_read_through_git_comes_back_masked(client: Client, how: str) -> None:
    result = run(client, "command.run", {"command": COMMANDS[how], "timeout_ms": 30000})
    assert result["result"]["exit_code"] == 0, result
    assert_masked(result, ACCESS, PASSWORD)


def test_short_and_ordinary_values_are_not_masked(client: Client) -> None:
    result = run(client, "command.run", {"command": "git show HEAD:.env", "timeout_ms": 30000})
    stdout = result["result"]["stdout"]
    assert f"APP_NAME={ORDINARY}\nPORT=8080\nPIN=4711\n" in stdout, stdout
    plain = run(client, "command.run", {"command": "cat README.md", "timeout_ms": 30000})
    assert plain["result"]["stdout"] == "# Seed project\n\nHello from the seed file.\n"
    assert "sensitivity_finding_kinds" not in plain, plain


def test_a_withheld_environment_value_found_elsewhere_is_masked(client: Client) -> None:
    env = run(client, "command.run", {"command": "env", "timeout_ms": 30000})
    assert "ROOST_TEST_DEPLOY_KEY" not in env["result"]["stdout"]  # withheld from commands
    for command in ("cat deploy-notes.txt", "base64 deploy-notes.txt", "rev deploy-notes.txt"):
        result = run(client, "command.run", {"command": command, "timeout_ms": 30000})
        assert_masked(result, WITHHELD)


def test_an_asset_command_a_workflow_step_and_an_mcp_tool_are_masked(
    client: Client, base: Path
) -> None:
    asset = run(client, "command.run.showenv", {})
    assert_masked(asset, ACCESS, PASSWORD)
    flow = run(client, "workflow.run.leak", {})
    assert_masked(flow, ACCESS, PASSWORD)
    mcp = run(client, "mcp.fx.read_file", {"path": str(base / "repo" / "env.b64")})
    assert mcp["result"]["text"].startswith("READ:"), mcp
    assert_masked(mcp, ACCESS, PASSWORD)
    notes = run(client, "mcp.fx.read_file", {"path": str(base / "repo" / "deploy-notes.txt")})
    assert_masked(notes, WITHHELD)


def test_a_value_added_to_the_env_file_while_the_daemon_runs_is_masked_at_once(
    client: Client, base: Path
) -> None:
    added = "Nw" + _fresh(20)
    root = base / "repo"
    (root / ".env").write_text(DOTENV + f"LATER_ADDED={added}\n")
    (root / "found.txt").write_text(f"found: {added[::-1]}\n")
    try:
        result = run(client, "command.run", {"command": "cat found.txt", "timeout_ms": 30000})
    finally:
        (root / ".env").write_text(DOTENV)
        (root / "found.txt").unlink()
    assert result["result"]["stdout"] == f"found: {SECRET_VALUE_MARKER}\n", result


def test_an_http_fetch_body_is_masked(client: Client, web: str) -> None:
    fetched = run(client, "http.fetch", {"url": web})
    assert_masked(fetched, ACCESS, PASSWORD)


def roost(daemon: Daemon, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "--home", daemon.home, *args],
        env={**os.environ, **daemon_env()},
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_no_secret_value_reaches_the_journal_or_the_reports(daemon: Daemon, client: Client) -> None:
    for command in COMMANDS.values():
        run(client, "command.run", {"command": command, "timeout_ms": 30000})
    run(client, "command.run", {"command": "base64 deploy-notes.txt", "timeout_ms": 30000})
    # The file's bytes, and every event as the journal decodes it (a large envelope is
    # stored deflated: a secret in it would not show in the raw bytes).
    stored = b"".join(p.read_bytes() for p in sorted(Path(daemon.home).glob("journal.sqlite*")))
    with Journal.open(daemon.home, "sqlite") as journal:
        stored += msgspec.json.encode(journal.read_project("p"))
    assert SECRET_VALUE_MARKER.encode() in stored
    reports = [
        roost(daemon, "timeline", "p", C, "--limit", "500"),
        roost(daemon, "--json", "timeline", "p", C, "--limit", "500"),
        roost(daemon, "incident", "p", C, "--format", "md"),
    ]
    for value in SECRETS:
        for form in forms(value):
            assert form.encode() not in stored, form
            for report in reports:
                assert form not in squeezed(report), form
