"""What one append commits together: its events, its key, whether its sender redacted it."""

from __future__ import annotations

import msgspec

from events.envelope import NewEvent

__all__ = ["Batch"]


class Batch(msgspec.Struct, frozen=True, kw_only=True):
    """Events to commit together, and the key that makes a retry harmless."""

    events: list[NewEvent]
    """The events, in order."""
    key: str | None = None
    """Idempotency key: a batch with a key already committed is not appended again."""
    redacted: bool = False
    """The sender redacted each event as the append would (a host's staged turn,
    ``actors.agent_shell``): its data is hashed as it is, not scanned again (its ids are).
    Streamed texts are still redacted as wholes, and a journal given its own redactor
    ignores the mark."""
