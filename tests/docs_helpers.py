"""Load ``scripts/run_docs.py`` (the docs runner) for the tests that use it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_run_docs() -> ModuleType:
    """The ``scripts/run_docs.py`` module (scripts/ is not a package)."""
    if "run_docs" in sys.modules:
        return sys.modules["run_docs"]
    spec = importlib.util.spec_from_file_location("run_docs", ROOT / "scripts" / "run_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_docs"] = module
    spec.loader.exec_module(module)
    return module
