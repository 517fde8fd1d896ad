"""Reading the journal when no daemon answers, for the views that are pure functions of it.

``timeline``, ``incident``, ``project events`` and ``project list --all`` need no actor.

:func:`query` asks the daemon and, when none answers (``daemon_unreachable``), computes the
same answer from the home's journal (``runtime.journal.views``, which the daemon serves
from too), as ``roost export otel`` does. A home without a journal has nothing to read:
the ``daemon_unreachable`` error stands. The journal and the views are imported only
then, so a command that reaches its daemon loads none of them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from runtime.client.connection import Client
from runtime.daemon.config import config_for_home
from runtime.errors import DaemonUnreachableError

if TYPE_CHECKING:
    from runtime.journal.store import Journal

__all__ = ["query"]

T = TypeVar("T")


def _open_journal(home: str | None, unreachable: DaemonUnreachableError) -> Journal:
    config = config_for_home(home)
    if config.journal == "sqlite" and not os.path.isfile(
        os.path.join(config.home, "journal.sqlite")
    ):
        raise unreachable
    from runtime.journal.store import Journal  # noqa: PLC0415 - only without a daemon

    path = os.path.join(config.home, "journal.sqlite") if config.journal == "sqlite" else None
    return Journal(config.journal, sqlite_path=path)


def query(
    home: str | None,
    online: Callable[[Client], T],
    offline: Callable[[Any, Journal], T],
) -> T:
    """``online(client)``, or ``offline(views, journal)`` when no daemon answers.

    ``views`` is the :mod:`runtime.journal.views` module.
    """
    try:
        client = Client.connect(home)
    except DaemonUnreachableError as unreachable:
        journal = _open_journal(home, unreachable)
        from runtime.journal import views  # noqa: PLC0415 - only without a daemon

        with journal:
            return offline(views, journal)
    with client:
        return online(client)
