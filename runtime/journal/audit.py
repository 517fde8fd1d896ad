"""A project's stream checked page by page: its hash chain and its seals, in one pass.

``roost verify`` of a project of millions of events must not hold them at once (an hour's
soak made 2.4 million a project, and a verify that read them all grew the daemon by
gigabytes). :func:`audit_stream` reads the stream in pages of ``page`` rows, in version
order, feeds each page to the chain (:class:`events.chain.ChainWalk`) and the seals
(:class:`events.seal_check.SealWalk`), hands it to the caller's ``visit`` (the rest of
``verify``: stream versions, snapshots) and lets it go: what it keeps is the last hash, the
checkpoints and the counts. The anchor is read before the first page and again after the
last one (see :func:`events.seal_check.check_seals`), so a writer sealing meanwhile is no
false alarm.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from events.chain import ChainBreak, ChainReport, ChainWalk
from events.envelope import Envelope
from events.seal_check import SealReport
from runtime.journal.mapper import project_stream_id
from runtime.journal.recorder import JournalRecorder
from runtime.journal.seal_mode import SealMode
from runtime.journal.stored import decode_rows

__all__ = ["AUDIT_PAGE", "Audit", "PageVisitor", "audit_stream"]

AUDIT_PAGE: Final = 2000
"""Rows a page of the audit reads (a few MB of decoded envelopes at most)."""

PageVisitor = Callable[[Sequence[Envelope]], None]
"""What sees each page of events after the audit (in ``seq`` order, each page once)."""


@dataclass(frozen=True)
class Audit:
    """What checking a project's events found (:meth:`runtime.journal.store.Journal.audit`)."""

    checked_events: int
    """How many events the project's stream held."""
    chain: ChainReport
    """The hash chain."""
    seals: SealReport | None
    """The seals; None for a journal opened without a sealer."""
    anchored: bool
    """True when an anchor file exists for the project (even if its events do not)."""


def audit_stream(
    recorder: JournalRecorder,
    seals: SealMode,
    project_id: str,
    *,
    visit: PageVisitor | None = None,
    page: int = AUDIT_PAGE,
) -> Audit:
    """Check the project's stream in pages of ``page`` rows; ``visit`` sees each page."""
    stream = project_stream_id(project_id)

    def hash_of(position: int) -> str | None:
        """The hash of the event at ``position``, read again (a sealed head pages ago)."""
        rows = recorder.select_stream_range(stream, position, position)
        return decode_rows(rows)[0].hash if rows else None

    before = seals.anchor(project_id)
    # What was committed by now is checked; a writer's later appends are not chased (the
    # anchor, read first, names a checkpoint at or below this position).
    last_seq = int(recorder.max_notification_id() or 0)
    chain = ChainWalk()
    walk = seals.walk(project_id, hash_of)
    breaks: list[tuple[ChainBreak, int]] = []
    after = 0
    done = False
    while not done and (rows := recorder.select_stream(stream, gt=after, limit=page)):
        if rows[-1][0] > last_seq:  # seq grows with the version within a stream
            rows = [row for row in rows if row[0] <= last_seq]
            done = True
            if not rows:
                break
        events = decode_rows(rows)
        positions = [version for _, version, _, _ in rows]
        for position, event in zip(positions, events, strict=True):
            found = chain.feed(event)
            if found is not None:
                breaks.append((found, position))
        if walk is not None:
            walk.forget()
            walk.run(zip(positions, events, strict=True))
        if visit is not None:
            visit(events)
        after = positions[-1]
    anchor_after = seals.anchor(project_id)
    return Audit(
        checked_events=chain.checked,
        chain=chain.report(),
        seals=None if walk is None else walk.report(before, anchor_after, breaks),
        anchored=before is not None,
    )
