"""Each actor's message table (``actors.dispatch``), built from its marked methods."""

from __future__ import annotations

from typing import Any

import pytest

from actors import (
    ConversationActor,
    JournalActor,
    PolicyActor,
    ProjectActor,
    SupervisorActor,
    ToolRunnerActor,
)
from actors.dispatch import handler_table, handles

ACTORS = [
    ConversationActor,
    JournalActor,
    PolicyActor,
    ProjectActor,
    SupervisorActor,
    ToolRunnerActor,
]


class Ping:
    """A message."""


class Pong:
    """Another message."""


class Base:
    @handles(Ping)
    def on_ping(self, message: Ping, sender: Any) -> str:
        return "base"

    @handles(Pong, table="input")
    def on_pong(self, message: Pong, sender: Any) -> str:
        return "input"


class Derived(Base):
    @handles(Ping)
    def on_ping(self, message: Ping, sender: Any) -> str:
        return "derived"


def test_a_table_holds_the_rows_of_its_name_only() -> None:
    assert handler_table(Base) == {Ping: Base.on_ping}
    assert handler_table(Base, "input") == {Pong: Base.on_pong}


def test_a_subclass_replaces_a_row_by_marking_a_method_of_the_same_name() -> None:
    row = handler_table(Derived)[Ping]
    assert row(Derived(), Ping(), None) == "derived"
    assert handler_table(Derived, "input") == {Pong: Base.on_pong}


def test_two_methods_claiming_one_type_fail_when_the_table_is_made() -> None:
    class Twice:
        @handles(Ping)
        def first(self, message: Ping, sender: Any) -> None: ...

        @handles(Ping)
        def second(self, message: Ping, sender: Any) -> None: ...

    with pytest.raises(
        TypeError, match=r"^Twice: a message type has two handlers among \['Ping', 'Ping'\]$"
    ):
        handler_table(Twice)
