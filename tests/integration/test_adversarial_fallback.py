"""The fallback paths end to end: a daemon with the kernel layers forced off.

``ROOST_SANDBOX_DISABLE=bwrap,unshare`` leaves no namespace to make and
``ROOST_FORCE_NO_OPENAT2=1`` puts the workspace on the ``O_NOFOLLOW`` component walk. The
same path attacks must still be refused, every command fails closed with
``isolation_unavailable`` (no filesystem view can be made), and the project reports the
layers as unavailable.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.guard.sandbox.layers import DISABLE_ENV, FORCE_NO_OPENAT2_ENV
from tests.integration.adversarial_helpers import (
    Call,
    Expect,
    HitServer,
    Sentinel,
    World,
    daemon_world,
    decision_listed,
    fill,
    first,
    recorded,
    start_projects,
)
from tests.integration.test_adversarial_network import add_probe
from tests.integration.test_adversarial_paths import build_repo, fs_options, path_params

C = "c"
DISABLED = f"disabled by {DISABLE_ENV}"


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The hostile repository of the paths module, made again for this daemon."""
    base = tmp_path_factory.mktemp("adv-fallback")
    Sentinel(base / "sentinel")
    return {**build_repo(base), "base": str(base)}


@pytest.fixture(scope="module")
def world(places: dict[str, str]) -> Iterator[World]:
    """A daemon without bwrap, unshare or openat2: projects ``fs``, ``deny`` and ``egress``."""
    base = Path(places["base"])

    def setup(client: Client, server: HitServer) -> None:
        client.start_project(places["root"], project_id="fs", options=fs_options(places))
        client.start_conversation("fs", conversation_id=C)
        egress = {
            "deny": {"network_egress_policy": "deny"},
            "egress": {"network_egress_policy": "allow"},
        }
        start_projects(client, base, egress, (C,), lambda root: add_probe(root, server))

    env = {DISABLE_ENV: "bwrap,unshare", FORCE_NO_OPENAT2_ENV: "1"}
    with daemon_world(base, Sentinel.existing(base / "sentinel"), setup, **env) as world:
        yield world


def test_the_project_reports_the_kernel_layers_unavailable(world: World) -> None:
    layers = world.client.diagnostics("fs")["sandbox_layers"]
    assert layers["bwrap"] == {"available": False, "detail": DISABLED}
    assert (layers["unshare"]["available"], layers["unshare"]["detail"]) == (False, DISABLED)
    for name in ("netns", "pidns", "mount_isolation"):
        assert layers[name] == {"available": False, "via": None}, name
    assert layers["openat2"] == {"available": False, "detail": DISABLED}
    assert layers["process_tree_kill"]["available"] is True
    with world.client.subscribe("fs") as stream:
        started = next(e for e in stream if e["type"] == "project.started")
    assert started["data"]["sandbox_layers"] == layers


@pytest.mark.parametrize(("tool", "args", "expect"), path_params())
def test_the_component_walk_still_refuses_every_path_attack(
    world: World, places: dict[str, str], tool: str, args: dict[str, Any], expect: Expect
) -> None:
    world.refused(Call("fs", C, tool, fill(args, places)), expect)


@pytest.mark.parametrize("project", ["deny", "egress"])
def test_a_command_fails_closed_without_the_sandbox_view(
    world: World, places: dict[str, str], project: str
) -> None:
    """Egress allowed or not: without bubblewrap a command would see ROOST_HOME and $HOME."""
    hits = world.server.count()
    call = Call(project, C, "command.run", {"command": "touch ran.txt; python3 probe.py"})
    result = call.run(world.client)
    assert result["status"] == "error", result
    assert (result["reason"]["code"], result["reason"]["layer"]) == (
        "isolation_unavailable",
        "mount_isolation",
    )
    entries = recorded(world.client, call)
    assert first(entries, "tool.failed")["reason"]["code"] == "isolation_unavailable"
    decision_listed(world.client, call, "allow", "allowed")
    assert not Path(places["base"], project, "ran.txt").exists()
    world.untouched(hits)


def test_the_journal_verifies(world: World) -> None:
    assert world.client.verify("fs")["ok"] is True
