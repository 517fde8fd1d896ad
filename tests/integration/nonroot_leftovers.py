"""Leave the shapes of ``test_leftover_shapes.py`` with a daemon that is not root; print JSON.

``python nonroot_leftovers.py BASE`` is started by ``test_leftover_shapes.py`` under
``setpriv --reuid=65534 ...``: this process, the daemon it starts and its commands run as
that user (no freezer, no cgroups: an unprivileged daemon). BASE is a directory that user
owns. Prints ``{"quarantined": {path: reason}, "linked_pager_ran": bool, "leak": text}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from runtime.client import Client
from runtime.daemon.control import start_daemon, stop_daemon

C = "c"

ATTACK = (
    "mkdir -p sub/store/heads && ln -s store sub/objects && ln -s store sub/refs"
    " && echo 'ref: refs/heads/main' > sub/HEAD && printf '[core]\\n\\tpager = {p}\\n' > sub/config"
    " && touch a b && ln -s a .env && ln b .env.local"
    " && mkdir -p \"$(printf 'nb\\377')/.git\" && echo done"
)


def _tool(c: Client, args: dict[str, Any], corr: str) -> dict[str, Any]:
    meta = {"conversation_id": C, "correlation_id": corr}
    result: dict[str, Any] = c.run_tool("p", {"name": "command.run", "args": args, "meta": meta})
    return result


def main() -> None:
    base = Path(sys.argv[1])
    home = str(base / "home")
    repo = base / "repo"
    (repo / "notes").mkdir(parents=True)
    env = {"HOME": str(base), "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.environ["PATH"]}
    subprocess.run(["git", "-C", str(repo), "init", "-q"], env=env, check=True)
    marker, program = base / "pager-ran", base / "pager.sh"
    program.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    program.chmod(0o755)
    start_daemon(home, timeout_s=60)
    out: dict[str, Any] = {}
    try:
        with Client.connect(home, timeout_s=120) as c:
            c.start_project(str(repo), project_id="p")
            c.start_conversation("p", conversation_id=C)
            args = {"command": ATTACK.format(p=program), "timeout_ms": 30000}
            out["attack"] = _tool(c, args, "attack")
            timeline = c.incident_timeline("p", C, limit=500, correlation_id="attack")
            out["quarantined"] = {
                e["data"]["path"]: e["data"]["reason"]
                for e in timeline["entries"]
                if e["type"] == "security.leftover_quarantined"
            }
            with (repo / ".env").open("a") as f:  # the user, later
                f.write("API_KEY=nonroot-link-secret-0451\n")
            read = {"command": "cat a b | rev", "timeout_ms": 30000}
            out["leak"] = _tool(c, read, "read")["result"]["stdout"]
    finally:
        stop_daemon(home, timeout_s=30)
    master, slave = os.openpty()
    subprocess.run(  # cat unless the repository's core.pager says otherwise
        ["git", "branch"],
        cwd=repo / "sub",
        env={**env, "PAGER": "cat"},
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        timeout=60,
        check=False,
    )
    os.close(slave)
    os.close(master)
    out["linked_pager_ran"] = marker.exists()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
