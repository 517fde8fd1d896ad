"""The daemon freezes the heap its start-up made (``runtime/daemon/main.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_CHILD = """
import gc, os, signal, sys, threading, time
from runtime.daemon.config import config_for_home
from runtime.daemon.main import run_daemon
from tests.runtime.fake_backend import create

config = config_for_home(sys.argv[1])
before = gc.get_freeze_count()

def watch():
    while not os.path.exists(config.socket_path):
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGTERM)  # handled once the daemon waits for its stop

threading.Thread(target=watch, daemon=True).start()
code = run_daemon(config, create)
print(code, before, gc.get_freeze_count())
"""


def test_the_daemon_freezes_what_its_start_made_once_it_serves(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "home")],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    code, before, frozen = map(int, done.stdout.split())
    assert (code, before) == (0, 0)
    assert frozen > 1000  # the modules and the backend, out of the collector's passes
