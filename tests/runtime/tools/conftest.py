"""The tools' tests run tool processes: their run records and quarantine go to a test home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.guard.home import roost_home


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A ``ROOST_HOME`` of the test's own (``runs/``, ``quarantine/``), never the user's."""
    place = tmp_path_factory.mktemp("roost-state")
    roost_home.protect(str(place))
    yield place
    roost_home.protect(None)
