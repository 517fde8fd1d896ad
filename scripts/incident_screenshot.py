"""Regenerate docs/incident-report.png: the HTML incident report of a real incident.

Starts a daemon on a temporary home, plays the incident of
``tests/integration/incident_scenario.py`` (a tool call, a policy denial, a failing tool, a
timeout and a ToolRunner killed mid-call), renders it with ``roost incident shop c1
--format html -o FILE``, opens the page in headless Chromium (which must load nothing
else and log nothing), and saves a screenshot of its top. Run from the repository root:

    .venv/bin/python scripts/incident_screenshot.py [--output docs/incident-report.png]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtime.client import Client  # noqa: E402
from runtime.daemon import start_daemon, stop_daemon  # noqa: E402
from tests.browser import Browser, find_chromium  # noqa: E402
from tests.integration.conftest import daemon_env, make_root  # noqa: E402
from tests.integration.incident_scenario import CONVERSATION, PROJECT, stage_incident  # noqa: E402


def main() -> int:
    """Play the incident, render it, and write the screenshot; 1 when Chromium is missing."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=str(REPO / "docs" / "incident-report.png"))
    parser.add_argument("--html", help="also keep the rendered page here")
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=1290, help="crop the page to this")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        print("chromium not found (set ROOST_CHROMIUM)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="roost-shot-") as tmp:
        home, page_path = Path(tmp) / "home", Path(tmp) / "incident.html"
        root = make_root(Path(tmp) / "repo")
        env = daemon_env()
        start_daemon(str(home), env=env, timeout_s=60)
        try:
            with Client.connect(str(home), timeout_s=120) as client:
                stage_incident(client, root)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "runtime.cli",
                    "--home",
                    str(home),
                    "incident",
                    PROJECT,
                    CONVERSATION,
                    "--format",
                    "html",
                    "-o",
                    str(page_path),
                ],
                env={**os.environ, **env},
                check=True,
            )
        finally:
            stop_daemon(str(home), timeout_s=30)
        if args.html:
            Path(args.html).write_bytes(page_path.read_bytes())
        with Browser(chromium) as browser:
            page = browser.open(page_path)
            trouble = page.console + page.exceptions + page.log_entries
            if trouble or page.requests != [page.url]:
                print(f"the page misbehaved: {trouble} {page.requests}", file=sys.stderr)
                return 1
            Path(args.output).write_bytes(page.screenshot(args.width, args.height))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
