"""Every op has a real handler at each level its route passes, built from the op table."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.agent import inbound
from runtime.daemon import backend
from runtime.daemon.gateway import Gateway
from runtime.lifecycle import project_core, supervisor_core
from runtime.wire.dispatch import op_handlers
from runtime.wire.ops import OP_TABLE, OPS, Level
from tests.runtime import fake_backend

SERVERS: dict[Level, tuple[type[Any], dict[str, Any]]] = {
    "daemon": (backend.ActorBackend, backend._OPS),
    "supervisor": (supervisor_core.SupervisorCore, supervisor_core._OPS),
    "project": (project_core.ProjectCore, project_core._OPS),
    "conversation": (inbound.Inbound, inbound._OPS),
}
"""Each level below the gateway: its class and the dispatch its module built at import."""


def _forward(*_: Any) -> None:
    raise AssertionError("not called")


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_client_op_has_a_handler_at_each_level_its_route_passes(op: str) -> None:
    spec = OP_TABLE[op]
    if spec.route == "stream":  # the gateway streams, the backend's ``subscribe`` feeds it
        assert callable(backend.ActorBackend.subscribe)
        return
    gateway = op_handlers(Gateway, "gateway", forward=_forward)
    assert (gateway[op] is _forward) != spec.serves("gateway")
    for level in spec.levels()[1:]:
        cls, dispatch = SERVERS[level]
        handler = dispatch[op]
        own = getattr(cls, "op_" + op, None)
        if spec.serves(level):  # where its route ends, a method of its own
            assert own is not None and handler is own, f"{op} at {level}"
        else:  # on the way: its own method, or the level's way down
            assert handler is own or own is None, f"{op} at {level}"


def test_a_level_serves_no_op_its_route_does_not_reach() -> None:
    for level, (_, dispatch) in SERVERS.items():
        assert set(dispatch) == {
            name
            for name, op in OP_TABLE.items()
            if op.route != "stream"
            and level in op.levels()
            and (op.client or level not in ("gateway", "daemon"))
        }


def test_the_fake_backend_serves_exactly_the_ops_the_real_one_does() -> None:
    assert set(fake_backend._OPS) == set(backend._OPS)
    for op, handler in fake_backend._OPS.items():  # its own method for each: no way down
        assert handler is getattr(fake_backend.FakeBackend, "op_" + op)


def test_a_level_missing_a_method_for_an_op_it_serves_fails_at_once() -> None:
    class Partial:
        def op_verify(self) -> None: ...

    with pytest.raises(TypeError, match=r"^Partial at level daemon: no handler for ops \["):
        op_handlers(Partial, "daemon")


def test_a_method_for_an_op_the_table_does_not_have_fails_at_once() -> None:
    class Stray:
        def op_fork_conversation(self) -> None: ...

    with pytest.raises(TypeError, match=r"handlers for no such ops \['fork_conversation'\]"):
        op_handlers(Stray, "conversation", forward=_forward)
