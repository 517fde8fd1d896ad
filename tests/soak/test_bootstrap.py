"""Starting the soak's projects through the client."""

from __future__ import annotations

from typing import Any

from runtime.policy.options import MAX_INT
from soak.bootstrap import start_projects
from soak.config import SoakConfig
from soak.monitor import Failures


class _Client:
    def __init__(self) -> None:
        self.options: list[dict[str, Any]] = []

    def start_project(self, root: str, *, project_id: str, options: dict[str, Any]) -> str:
        self.options.append(options)
        return project_id


def test_soak_projects_get_the_largest_token_budget(tmp_path: Any) -> None:
    client = _Client()
    config = SoakConfig(projects=2, idle_passivation_ms=1234)
    started = start_projects(client, config, str(tmp_path), "r1", Failures())  # type: ignore[arg-type]
    assert started == ["soak-r1-p0", "soak-r1-p1"]
    assert client.options == [{"idle_passivation_ms": 1234, "token_budget": MAX_INT}] * 2
