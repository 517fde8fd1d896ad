"""Ask the daemon, or read the journal when none answers, for views that are pure functions of it.

``timeline``, ``incident``, ``project events`` and ``project list --all`` need no actor.
:func:`query` asks the daemon; only when none answers (``daemon_unreachable``) does it load
:mod:`runtime.cli.offline` by name, which computes the same answer from the home's journal.
So a command that reaches its daemon loads no journal module (the ``thin-client`` contract).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from runtime.errors import DaemonUnreachableError

if TYPE_CHECKING:
    from runtime.client.connection import Client

__all__ = ["offline_args", "query"]

T = TypeVar("T")


def query(
    home: str | None,
    online: Callable[[Client], T],
    offline: Callable[[Any, Any], T],
) -> T:
    """``online(client)``, or ``offline(views, journal)`` when no daemon answers.

    ``views`` is the :mod:`runtime.journal.views` module, ``journal`` the home's journal.
    """
    from runtime.client.connection import Client  # noqa: PLC0415 - not for --help

    try:
        client = Client.connect(home)
    except DaemonUnreachableError as unreachable:
        reader = importlib.import_module("runtime.cli.offline")
        answer: T = reader.answer(home, unreachable, offline)
        return answer
    with client:
        return online(client)


def offline_args(op: str, args: Mapping[str, object]) -> Any:
    """``args`` as ``op``'s Struct, checked as the daemon would, for a journal view.

    Imported here, on the offline path only: ``roost --version`` loads no codec.
    """
    from runtime.wire.ops import validate_args  # noqa: PLC0415

    return validate_args(op, args)
