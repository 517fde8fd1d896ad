"""Alert routers for the adversarial suite, loaded by the daemon as ``module:function``.

:func:`record` appends one JSON line per alert to the file named by
``ROOST_TEST_ALERT_FILE`` (set in the daemon's environment); :func:`explode` always
raises, to show that a failing router is recorded and the runtime keeps running.
"""

from __future__ import annotations

import json
import os
from typing import Any

ALERT_FILE_ENV = "ROOST_TEST_ALERT_FILE"
"""The environment variable naming the file :func:`record` appends to."""


def record(event_name: str, payload: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Append ``{event, payload, metadata}`` as one JSON line."""
    line = json.dumps({"event": event_name, "payload": payload, "metadata": metadata})
    with open(os.environ[ALERT_FILE_ENV], "a", encoding="utf-8") as f:
        f.write(line + "\n")


def explode(event_name: str, payload: dict[str, Any], metadata: dict[str, Any]) -> None:
    """Fail every time."""
    raise RuntimeError(f"router exploded on {event_name}")
