"""A journal writer for the crash-consistency test: appends numbered batches forever.

``python journal_writer.py DB START`` appends batch START, START+1, ... Each batch's
events have ids derived from the batch number, and the batch's idempotency key is its
number, so re-sending a batch after a crash is exactly the retry the journal must absorb.
After each commit it prints ``ack N seq1,seq2,...`` and flushes: an acknowledged batch.
"""

from __future__ import annotations

import sys
import uuid

from events.envelope import NewEvent
from runtime.journal.store import Journal

NAMESPACE = uuid.UUID("0e8f3c1a-2f6b-4f5e-8d2a-6c1b9e7d4a10")
PROJECTS = ("alpha", "beta")


def batch_events(n: int) -> list[NewEvent]:
    """The deterministic events of batch ``n`` (1 to 7 events, two projects)."""
    size = 1 + n % 7
    out = []
    for i in range(size):
        project = PROJECTS[(n + i) % 2]
        conversation = None if i % 3 == 2 else f"c{(n + i) % 4}"
        out.append(
            NewEvent(
                event_id=str(uuid.uuid5(NAMESPACE, f"{n}/{i}")),
                type="user.message",
                at="2026-11-22T10:00:00.000Z",
                project_id=project,
                conversation_id=conversation,
                correlation_id=f"corr-{n:020x}",
                data={"content": f"batch {n} event {i}", "pad": "x" * (n % 50)},
            )
        )
    return out


def main() -> None:
    """Append batches from ``argv[2]`` on, acknowledging each on stdout."""
    db, start = sys.argv[1], int(sys.argv[2])
    journal = Journal("sqlite", sqlite_path=db, redactor=lambda v: v)
    n = start
    while True:
        out = journal.append(batch_events(n), key=f"batch-{n}")
        sys.stdout.write(f"ack {n} {','.join(str(e.seq) for e in out)}\n")
        sys.stdout.flush()
        n += 1


if __name__ == "__main__":
    main()
