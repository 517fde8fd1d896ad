"""The backend imports before forking what the actor processes would import after."""

from __future__ import annotations

import subprocess
import sys


def test_the_backend_preloads_what_actors_would_import_after_forking() -> None:
    code = (
        "import sys, runtime.daemon.backend\n"
        "from runtime.daemon import actor_system as a\n"
        "before = [n for n in a.PRELOAD if n in sys.modules]\n"
        "a.preload()\n"
        "print(len(before) < len(a.PRELOAD), all(n in sys.modules for n in a.PRELOAD))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["True", "True"]
