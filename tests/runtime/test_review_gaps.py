"""Small behaviours of the second session that had no test of their own."""

from __future__ import annotations

import resource
import subprocess
import sys
from typing import Any

import pytest

from actors.base import profiling_wanted
from runtime.journal.link import _raise_descriptor_limit
from runtime.policy.options import MAX_INT
from soak.bootstrap import start_projects
from soak.monitor import Failures
from soak.report import SoakConfig


def test_profiling_follows_the_profile_dir_and_the_listed_kinds() -> None:
    assert not profiling_wanted("conversation", {})
    assert not profiling_wanted("conversation", {"ROOST_PROFILE_KINDS": "conversation"})
    assert profiling_wanted("journal", {"ROOST_PROFILE_DIR": "/x"})
    only = {"ROOST_PROFILE_DIR": "/x", "ROOST_PROFILE_KINDS": "conversation,journal"}
    assert profiling_wanted("journal", only)
    assert not profiling_wanted("project", only)


def test_the_journal_link_raises_the_descriptor_limit_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 64:
        pytest.skip(f"the hard descriptor limit here is only {hard}")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
        _raise_descriptor_limit()
        raised, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert raised == (hard if hard != resource.RLIM_INFINITY else max(64, 1 << 16))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


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
