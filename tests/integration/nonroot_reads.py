"""Run the daemon-reads attacks with a daemon that is not root; print what happened as JSON.

``python nonroot_reads.py BASE`` is started by ``test_daemon_reads.py`` under
``setpriv --reuid=65534 ...``: this process, the daemon it starts and the commands run as
that user. BASE is a directory that user owns. The output is one JSON object:
``{"peak_growth": bytes, "fs_read": {...}, "planted": {...}, "hook": text}``.
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


def spoil(repo: Path) -> None:
    """Garbage in ``.git/HEAD`` and a bare-repository shape whose config includes a device."""
    (repo / ".git" / "HEAD").write_text("garbage\n")
    (repo / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "objects").mkdir(exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "config").write_text("[include]\n\tpath = /dev/zero\n")


def _tool(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = c.run_tool(
        "p", {"name": name, "args": args, "meta": {"conversation_id": C}}
    )
    return result


def _peaks(pids: list[int]) -> dict[int, int]:
    out = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        out[pid] = int(line.split()[1]) * 1024
        except OSError:
            continue
    return out


def _daemon_pids(home: str) -> list[int]:
    import psutil

    pids = []
    for proc in psutil.process_iter(["pid", "uids", "environ"]):
        try:
            if proc.info["uids"].real == os.getuid() and proc.pid != os.getpid():
                pids.append(proc.pid)
        except (psutil.Error, AttributeError):
            continue
    return pids


def main() -> None:
    base = Path(sys.argv[1])
    home = str(base / "home")
    repo = base / "repo"
    repo.mkdir()
    env = {"HOME": str(base), "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.environ["PATH"]}
    for args in (["init", "-q"], ["config", "core.hooksPath", ".husky"]):
        subprocess.run(["git", "-C", str(repo), *args], env=env, check=True)
    (repo / ".husky").mkdir()
    (repo / ".husky" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (repo / "notes.txt").write_text("alpha\n")
    start_daemon(home, timeout_s=60)
    out: dict[str, Any] = {}
    try:
        with Client.connect(home, timeout_s=120) as c:
            c.start_project(str(repo), project_id="p")
            c.start_conversation("p", conversation_id=C)
            # a command can no longer write .git (read-only in every view): the repository is
            # spoiled from outside, as a broken checkout would be, to test the daemon's git
            big = "truncate -s 400M big.bin && echo done"
            out["spoil"] = _tool(c, "command.run", {"command": big, "timeout_ms": 30000})
            spoil(repo)
            _tool(c, "fs.read", {"path": "notes.txt"})
            pids = _daemon_pids(home)
            before = _peaks(pids)
            out["fs_read"] = _tool(c, "fs.read", {"path": "big.bin"})
            after = _peaks(pids)
            out["peak_growth"] = max(after[p] - before.get(p, 0) for p in after)
            plant = "printf '#!/bin/sh\\nid\\n' > .husky/pre-commit; echo rc=$?"
            out["planted"] = _tool(c, "command.run", {"command": plant, "timeout_ms": 30000})
            root = "echo x > /planted; echo root=$?"  # the view's root (test_redteam_view.py)
            out["view_root"] = _tool(c, "command.run", {"command": root, "timeout_ms": 30000})
    finally:
        stop_daemon(home, timeout_s=30)
    out["hook"] = (repo / ".husky" / "pre-commit").read_text()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
