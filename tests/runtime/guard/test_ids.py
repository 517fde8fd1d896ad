"""Client-chosen ids: their shapes, and refusing secret-shaped ones before they are stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.daemon.config import config_for_home
from runtime.daemon.gateway import Gateway
from runtime.errors import BadRequestError
from runtime.guard.ids import check_client_ids
from runtime.wire.ops import Call, validate_args
from tests.runtime.fake_backend import FakeBackend

GITHUB = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
OPENAI = "sk-proj-abcDEF1234567890abcdefGHIJ_klmn-op"


def refused(op: str, args: dict[str, Any]) -> BadRequestError:
    with pytest.raises(BadRequestError) as caught:
        check_client_ids(op, validate_args(op, args))
    return caught.value


def send(**fields: Any) -> dict[str, Any]:
    event = {"type": "user.message", "data": {"content": "hi"}}
    event.update(fields.pop("event", {}))
    return {"project_id": "p", "conversation_id": "c", "event": event, **fields}


@pytest.mark.parametrize(
    ("op", "args", "reason", "field"),
    [
        (
            "send_event",
            send(event={"correlation_id": f"corr-{GITHUB}"}),
            "invalid_correlation_id",
            "event.correlation_id",
        ),
        (
            "send_event",
            send(event={"correlation_id": f"corr-{OPENAI}"}),
            "invalid_correlation_id",
            "event.correlation_id",
        ),
        (
            "send_event",
            send(event={"correlation_id": "x-api-key:abc123def"}),
            "invalid_correlation_id",
            "event.correlation_id",
        ),
        (
            "send_event",
            send(event={"correlation_id": "has spaces"}),
            "invalid_correlation_id",
            "event.correlation_id",
        ),
        (
            "send_event",
            send(event={"correlation_id": "c" * 129}),
            "invalid_correlation_id",
            "event.correlation_id",
        ),
        (
            "send_event",
            send(idempotency_key=f"k-{GITHUB}"),
            "invalid_idempotency_key",
            "idempotency_key",
        ),
        (
            "send_event",
            send(idempotency_key="a/b"),
            "invalid_idempotency_key",
            "idempotency_key",
        ),
        (
            "cancel",
            {"project_id": "p", "conversation_id": "c", "correlation_id": f"c-{GITHUB}"},
            "invalid_correlation_id",
            "correlation_id",
        ),
        (  # recorded in security.protocol_denied: checked like every stored correlation
            "check_protocol",
            {"project_id": "p", "protocol": "a2a", "operation": "POST /", "correlation_id": "a b"},
            "invalid_correlation_id",
            "correlation_id",
        ),
        (
            "run_tool",
            {
                "project_id": "p",
                "request": {"name": "fs.read", "meta": {"correlation_id": f"c-{GITHUB}"}},
            },
            "invalid_correlation_id",
            "request.meta.correlation_id",
        ),
        (
            "start_project",
            {"root": "/tmp", "project_id": GITHUB},
            "invalid_project_id",
            "project_id",
        ),
        (
            "start_project",
            {"root": "/tmp", "project_id": "-leading-dash"},
            "invalid_project_id",
            "project_id",
        ),
        (
            "start_conversation",
            {"project_id": "p", "conversation_id": f"c-{GITHUB}"},
            "invalid_conversation_id",
            "conversation_id",
        ),
        (
            "start_conversation",
            {"project_id": "p", "conversation_id": "conv 1"},
            "invalid_conversation_id",
            "conversation_id",
        ),
    ],
)
def test_an_id_of_another_shape_or_shaped_like_a_secret_is_refused(
    op: str, args: dict[str, Any], reason: str, field: str
) -> None:
    error = refused(op, args)

    assert (error.code, error.details) == ("bad_request", {"reason": reason, "field": field})
    assert GITHUB not in error.message and OPENAI not in error.message


def test_the_message_says_why_without_repeating_the_value() -> None:
    secret = refused("send_event", send(event={"correlation_id": f"corr-{GITHUB}"}))
    shape = refused("send_event", send(event={"correlation_id": "has spaces"}))

    assert secret.message == (
        "correlation_id looks like a secret (it would be stored and shown in the clear); "
        "choose another"
    )
    assert shape.message == (
        "correlation_id must be 1-128 letters, digits, '.', '_', ':' or '-'; choose another"
    )


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("send_event", send(event={"correlation_id": "corr-0123456789abcdef0123"})),
        ("send_event", send(event={"correlation_id": "deploy:2026-11-22.run_7"})),
        ("send_event", send(idempotency_key="123e4567-e89b-12d3-a456-426614174000")),
        ("send_event", send(event={"correlation_id": None}, idempotency_key=None)),
        ("send_event", send(event={"correlation_id": ""})),
        ("cancel", {"project_id": "p", "conversation_id": "c", "correlation_id": "corr-x"}),
        ("start_project", {"root": "/tmp", "project_id": "my-api-key-project"}),
        ("start_project", {"root": "/tmp"}),
        ("start_conversation", {"project_id": "p", "conversation_id": "c1"}),
        ("incident_timeline", {"project_id": "p", "conversation_id": "c", "correlation_id": "a b"}),
    ],
)
def test_ordinary_and_absent_ids_pass(op: str, args: dict[str, Any]) -> None:
    assert check_client_ids(op, validate_args(op, args)) is None


class RecordingBackend(FakeBackend):
    """A fake that remembers every op it was asked to handle."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def handle(self, call: Call[Any], *, deadline: float) -> Any:
        self.ops.append(call.op)
        return super().handle(call, deadline=deadline)


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[Client, RecordingBackend]]:
    config = config_for_home(str(tmp_path / "home"))
    backend = RecordingBackend()
    server = Gateway(config, backend)
    server.start()
    try:
        with Client.connect(config.home) as client:
            yield client, backend
    finally:
        backend.close()
        server.stop(timeout_s=5)


def test_the_gateway_refuses_a_secret_correlation_id_before_the_backend_sees_it(
    gateway: tuple[Client, RecordingBackend],
) -> None:
    client, backend = gateway
    with pytest.raises(BadRequestError) as caught:
        client.send_message("p", "c", "hi", correlation_id=f"corr-{GITHUB}")

    assert caught.value.details == {
        "reason": "invalid_correlation_id",
        "field": "event.correlation_id",
    }
    assert backend.ops == []
    assert client.ping()["pong"] is True
