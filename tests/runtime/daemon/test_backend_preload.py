"""The backend imports before forking what the actor processes would import after."""

from __future__ import annotations

import subprocess
import sys


def test_the_backend_preloads_what_actors_would_import_after_forking() -> None:
    code = (
        "import sys, runtime.daemon.backend as b\n"
        "before = [n for n in b._PRELOAD if n in sys.modules]\n"
        "b._preload()\n"
        "print(len(before) < len(b._PRELOAD), all(n in sys.modules for n in b._PRELOAD))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["True", "True"]
