"""Asset files and helpers shared by the asset tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.errors import ToolError
from runtime.tools.asset_store import load_assets
from runtime.tools.base import ToolContext

GIT_LOG = """---
description: Show recent commits
input_schema: {"type": "object", "properties": {"count": {"type": "integer", "default": 5}}}
argv: ["git", "log", "-n", "{{count}}", "--format=%h {{count}}"]
---
# Git log

Prints the last commits.
"""

TRIAGE = """---
description: Read a file, then show the log
input_schema: {
  "type": "object",
  "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
  "required": ["path"]
}
steps: [
  {"tool": "fs.read", "args": {"path": "{{path}}", "limit": "{{limit}}"}},
  {"tool": "command.run.git-log", "args": {"count": 3}}
]
---
Triage steps.
"""

ECHO = """---
description: Echo a message
input_schema: {"type": "object", "properties": {"msg": {"type": "string"}}, "required": ["msg"]}
argv: ["echo", "{{msg}}"]
---
"""


def write(root: Path, kind: str, name: str, text: str | bytes) -> Path:
    """Write ``ROOT/.roost/KIND/NAME``."""
    path = root / ".roost" / kind / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def only(root: Path) -> Any:
    """Load the root's assets and return the only one."""
    catalog = load_assets(str(root))
    assert len(catalog.assets) == 1
    return catalog.assets[0]


def ctx_for(root: Path) -> ToolContext:
    """A tool context for the root with default options."""
    return ToolContext(root=str(root), options={}, call_id="call-1")


def tool_error(fn: Any, *args: Any) -> ToolError:
    """Call ``fn(*args)`` and return the ToolError it raises."""
    with pytest.raises(ToolError) as exc:
        fn(*args)
    return exc.value


def cmd(front: str) -> str:
    """An asset text with ``front`` as its frontmatter and a one-line body."""
    return f"---\n{front}\n---\nbody\n"
