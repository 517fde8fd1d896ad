"""Reading the journal when no daemon answers, for the views that are pure functions of it.

:func:`runtime.cli.querying.query` loads this module by name only when no daemon answers;
:func:`answer` computes the daemon's answer from the home's journal
(``runtime.journal.views``, which the daemon serves from too), as ``roost export otel``
does. A home without a journal has nothing to read: the ``daemon_unreachable`` error stands.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from runtime.daemon.config import config_for_home
from runtime.errors import DaemonUnreachableError

if TYPE_CHECKING:
    from runtime.journal.store import Journal

__all__ = ["answer"]

T = TypeVar("T")


def _open_journal(home: str | None, unreachable: DaemonUnreachableError) -> Journal:
    config = config_for_home(home)
    from runtime.journal.recorder import journal_backend  # noqa: PLC0415 - only without a daemon
    from runtime.journal.store import Journal  # noqa: PLC0415

    home_file = journal_backend(config.journal).home_file
    if home_file is not None and not os.path.isfile(os.path.join(config.home, home_file)):
        raise unreachable
    path = os.path.join(config.home, home_file) if home_file is not None else None
    return Journal(config.journal, sqlite_path=path)


def answer(
    home: str | None,
    unreachable: DaemonUnreachableError,
    offline: Callable[[Any, Journal], T],
) -> T:
    """``offline(views, journal)`` on the home's journal; ``unreachable`` when it has none.

    ``views`` is the :mod:`runtime.journal.views` module.
    """
    journal = _open_journal(home, unreachable)
    from runtime.journal import views  # noqa: PLC0415 - only without a daemon

    with journal:
        return offline(views, journal)
