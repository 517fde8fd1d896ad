"""The daemon's processes load neither httpx's command line nor rich (unused_imports)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
{block}
import runtime.daemon.backend
from runtime.daemon import actor_system
actor_system.preload()
import actors.conversation, actors.project, actors.toolrunner
import httpx, structlog
log = structlog.get_logger()
try:
    raise ValueError("boom")
except ValueError:
    rendered = structlog.processors.format_exc_info(None, "error", {{"exc_info": True}})
print(json.dumps({{
    "loaded": sorted(m for m in ("click", "rich", "pygments") if sys.modules.get(m)),
    "modules": len(sys.modules),
    "traceback": "ValueError: boom" in rendered["exception"],
    "httpx_client": hasattr(httpx, "Client"),
}}))
"""


def _probe(block: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(block=block)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_the_daemon_side_loads_no_cli_library_and_still_logs_tracebacks() -> None:
    kept = _probe("from runtime.daemon.unused_imports import keep_out; keep_out()")
    assert kept["loaded"] == []
    assert kept["traceback"] is True
    assert kept["httpx_client"] is True


@pytest.mark.slow
def test_without_it_they_are_loaded_so_the_check_can_fail() -> None:
    plain = _probe("")
    kept = _probe("from runtime.daemon.unused_imports import keep_out; keep_out()")
    assert plain["loaded"] == ["click", "pygments", "rich"]
    assert int(plain["modules"]) > int(kept["modules"])


def test_a_module_already_imported_is_left_alone() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import rich, sys; from runtime.daemon.unused_imports import keep_out; "
            "print(keep_out(), sys.modules['rich'] is not None)",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.split() == ["['httpx._main']", "True"]


def test_the_daemon_entry_point_itself_never_imports_them() -> None:
    # python -m runtime.daemon imports the package before its __main__: the package must
    # stay light, or structlog (and rich with it) is loaded before keep_out() runs.
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "runtime.daemon", "--help"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "structlog" in imported  # the probe sees the daemon's imports
    # a blocked import is still listed (it was tried, and failed at once); its submodules are not
    assert {"click", "pygments"} & imported == set()
    assert [name for name in imported if name.startswith(("rich.", "httpx._main."))] == []
