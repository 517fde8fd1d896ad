"""A real headless Chromium driven over the DevTools protocol on a pipe (no port, no library).

``Browser`` starts ``chromium --headless --remote-debugging-pipe`` with a fresh profile and
speaks CDP as NUL-terminated JSON over fds 3 (commands in) and 4 (replies and events out).
``Browser.open(path)`` loads a local file in a new tab with the Runtime, Log, Network and
Page domains enabled and returns a ``Page`` that has seen every console message, exception,
log entry and network request of the load; ``Page.evaluate`` runs an expression in it and
``Page.screenshot`` takes a PNG. Used by the HTML incident report's tests and by
``scripts/incident_screenshot.py``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_ON_FDS_3_AND_4 = """
import os, sys
inbound, outbound = (os.dup(int(fd)) for fd in sys.argv[1:3])
os.dup2(inbound, 3)
os.dup2(outbound, 4)
os.set_inheritable(3, True)
os.set_inheritable(4, True)
os.execv(sys.argv[3], sys.argv[3:])
"""
# Puts the pipe ends on fds 3 and 4, where Chromium looks for them, then runs it (a shell
# cannot: dash takes single-digit fds only, and the ends may already sit on 3 or 4).

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
"""Programs tried, in order, when ``ROOST_CHROMIUM`` does not name one."""


def find_chromium() -> str | None:
    """The Chromium program to run (``ROOST_CHROMIUM`` or the first on ``PATH``), or None."""
    named = os.environ.get("ROOST_CHROMIUM")
    if named:
        return shutil.which(named)
    return next((path for name in CHROMIUM_NAMES if (path := shutil.which(name))), None)


class CdpError(Exception):
    """The browser answered a command with an error, or did not answer in time."""


@dataclass
class Page:
    """A loaded tab: what it logged and requested while loading, and a way to query it."""

    browser: Browser
    session: str
    url: str
    console: list[dict[str, Any]] = field(default_factory=list)
    """``Runtime.consoleAPICalled`` params."""
    exceptions: list[dict[str, Any]] = field(default_factory=list)
    """``Runtime.exceptionThrown`` params."""
    log_entries: list[dict[str, Any]] = field(default_factory=list)
    """``Log.entryAdded`` entries (CSP violations, blocked loads, deprecations...)."""
    requests: list[str] = field(default_factory=list)
    """URL of every ``Network.requestWillBeSent``, in order."""

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` evaluated in the page."""
        reply = self.browser.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=self.session,
        )
        if "exceptionDetails" in reply:
            raise CdpError(f"evaluate failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def resize(self, width: int, height: int = 800) -> None:
        """Lay the page out in a ``width`` x ``height`` CSS-pixel viewport at scale 1."""
        self.browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )

    def screenshot(self, width: int, max_height: int | None = None) -> bytes:
        """A PNG of the page, ``width`` CSS pixels wide at scale 1, at most ``max_height`` high."""
        self.resize(width)
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.browser.send(  # the whole page in the viewport: no scrollbar in the picture
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=self.session,
        )
        clip = {"x": 0, "y": 0, "width": width, "height": min(height, max_height or height)}
        shot = self.browser.send(
            "Page.captureScreenshot",
            {"format": "png", "clip": {**clip, "scale": 1}},
            session=self.session,
        )
        return base64.b64decode(shot["data"])


class Browser:
    """A headless Chromium with a fresh profile; use as a context manager."""

    def __init__(self, program: str, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._profile = tempfile.mkdtemp(prefix="roost-chromium-")
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-dev-shm-usage",
            "--mute-audio",
            f"--user-data-dir={self._profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                _ON_FDS_3_AND_4,
                str(to_browser_r),
                str(from_browser_w),
                program,
                *args,
            ],
            pass_fds=(to_browser_r, from_browser_w),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            start_new_session=True,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ask the browser to quit, then kill its process group if it lingers."""
        try:
            if self._proc.poll() is None:
                with contextlib.suppress(CdpError, OSError):
                    self.send("Browser.close", timeout_s=5)
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(self._proc.pid, signal.SIGKILL)
                    self._proc.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._stderr.close()
            shutil.rmtree(self._profile, ignore_errors=True)
            # the renderers and helpers share the browser's process group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CdpError("no message from the browser in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                self._stderr.seek(0)
                said = self._stderr.read().decode(errors="replace")[-2000:]
                raise CdpError(f"the browser closed its pipe; its stderr ends: {said}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        value: dict[str, Any] = json.loads(message)
        return value

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Send one command and return its result; events that come first are kept."""
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            command["sessionId"] = session
        os.write(self._to_browser, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            message = self._read_message(deadline)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise CdpError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            if "method" in message:
                self._events.append(message)

    def _drain(self, until: str | None, session: str, quiet_s: float) -> None:
        """Collect events until ``until`` arrives (if given), then until ``quiet_s`` of quiet."""
        deadline = time.monotonic() + self.timeout_s
        seen = until is None
        while True:
            if not seen:
                message = self._read_message(deadline)
            else:
                try:
                    message = self._read_message(min(deadline, time.monotonic() + quiet_s))
                except CdpError:
                    return
            self._events.append(message)
            if message.get("method") == until and message.get("sessionId") == session:
                seen = True

    def open(self, path: Path, settle_s: float = 0.5) -> Page:
        """Load the file ``path`` in a new tab and return the page with what it did."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime", "Log", "Network", "Page"):
            self.send(f"{domain}.enable", session=session)
        url = path.resolve().as_uri()
        self._events.clear()
        self.send("Page.navigate", {"url": url}, session=session)
        self._drain("Page.loadEventFired", session, settle_s)
        page = Page(browser=self, session=session, url=url)
        for event in self._events:
            if event.get("sessionId") != session:
                continue
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                page.console.append(params)
            elif method == "Runtime.exceptionThrown":
                page.exceptions.append(params)
            elif method == "Log.entryAdded":
                page.log_entries.append(params["entry"])
            elif method == "Network.requestWillBeSent":
                page.requests.append(params["request"]["url"])
        self._events.clear()
        return page
