"""What an actor process sets up once (actors/process.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import gc, sys
from actors.process import configure_process_logging
before = gc.get_freeze_count()
configure_process_logging("probe")
frozen = gc.get_freeze_count()
configure_process_logging("probe")  # once per process: nothing new is frozen
print(before, frozen, gc.get_freeze_count())
"""


def test_an_actor_process_freezes_the_heap_it_started_with_once(tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT), "ROOST_LOG_FILE": str(tmp_path / "log.jsonl")}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    before, frozen, again = map(int, done.stdout.split())
    assert before == 0
    assert frozen > 1000  # the modules' objects, now out of the collector's passes
    assert again == frozen
