"""Red team of issue 17: credentials git keeps in ``.git/config``, read past the masker.

A checkout made with a token keeps it in ``.git/config``: in the remote's URL
(``https://deploy:TOKEN@host/repo.git``) or, as CI checkouts do, in an
``http.<url>.extraheader`` of ``AUTHORIZATION: basic base64(x-access-token:TOKEN)``. A
command reads ``.git/config`` (git must), so ``base64 .git/config`` or ``git remote -v |
rev`` printed the token in a form no shape rule knows. Roost knows these values exactly:
they must be masked as the values of ``.env`` are, by every route.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.guard.secrets.masking import SECRET_VALUE_MARKER
from tests.integration.adversarial_helpers import Call, needs_bwrap, run_daemon
from tests.integration.conftest import make_root
from tests.integration.test_secret_values import forms, squeezed
from tests.integration.test_trust_boundary import git

pytestmark = [
    needs_bwrap,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed here"),
]

C = "c"
_ALNUM = string.ascii_letters + string.digits
URL_TOKEN = "Ut" + "".join(secrets.choice(_ALNUM) for _ in range(22))
HEADER_TOKEN = "ghs_" + "".join(secrets.choice(_ALNUM) for _ in range(36))
HEADER = base64.b64encode(f"x-access-token:{HEADER_TOKEN}".encode()).decode()

COMMANDS = {
    "config in base64": "base64 .git/config",
    "remote reversed": "git remote -v | rev",
    "header in hex": "git config --get-regexp extraheader | xxd -p",
}
WORKFLOW = """---
description: Show the remote, reversed
steps: [{"tool": "command.run", "args": {"command": "git remote -v | rev"}}]
---
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    base = tmp_path_factory.mktemp("gitcreds")
    root = Path(make_root(base / "repo"))
    url = f"https://deploy:{URL_TOKEN}@git.example.com/team/repo.git"
    for args in (
        ["init", "-q"],
        ["remote", "add", "origin", url],
        ["config", "http.https://git.example.com/.extraheader", f"AUTHORIZATION: basic {HEADER}"],
    ):
        assert git(root, *args).returncode == 0
    (root / ".roost" / "workflows").mkdir()
    (root / ".roost" / "workflows" / "remote.md").write_text(WORKFLOW)
    with run_daemon(base / "home") as daemon, daemon.client(timeout_s=60) as c:
        c.start_project(str(root), project_id="p")
        c.start_conversation("p", conversation_id=C)
        yield c


def _assert_masked(result: dict[str, Any]) -> None:
    shown = json.dumps(result)
    for value in (URL_TOKEN, HEADER_TOKEN, HEADER):
        for form in forms(value):
            assert form not in squeezed(shown), (form, shown)
    assert SECRET_VALUE_MARKER in shown, shown


@pytest.mark.parametrize("how", sorted(COMMANDS))
def test_a_token_in_git_config_comes_back_masked(client: Client, how: str) -> None:
    call = Call("p", C, "command.run", {"command": COMMANDS[how], "timeout_ms": 30000})
    result = call.run(client)
    assert result["status"] == "ok" and result["result"]["exit_code"] == 0, result
    _assert_masked(result)


def test_a_token_in_git_config_is_masked_in_a_workflow_step(client: Client) -> None:
    result = Call("p", C, "workflow.run.remote", {}).run(client)
    assert result["status"] == "ok", result
    _assert_masked(result)
