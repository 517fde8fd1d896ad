"""The journal's seals on disk: the key, the anchor files, when to seal, and resuming.

What :mod:`events.seal` computes, this module keeps outside the database: the key
(:func:`load_key`), each project's latest anchor, replaced atomically and always *after*
the checkpoint it names is committed (:class:`AnchorStore`), and the :class:`Sealer`,
which decides when to seal and whether a project it resumes may be sealed further (a
journal that disagrees with its anchor never is, so the evidence stays for ``roost
verify``). The files, their modes, the settings and the rules: ``docs/security.md``,
"Sealed history".
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import secrets
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import msgspec

from events.catalog import JournalCheckpoint
from events.envelope import format_at
from events.seal import (
    GENESIS_MAC,
    Anchor,
    AnchorUnreadable,
    anchor_mac,
    checkpoint_mac,
    key_id,
    make_checkpoint,
    sign_anchor,
)
from runtime.errors import JournalError
from runtime.logging import get_logger

__all__ = [
    "ANCHOR_DIR",
    "KEY_FILE_ENV",
    "KEY_NAME",
    "AnchorStore",
    "SealSettings",
    "SealState",
    "Sealer",
    "load_key",
]

KEY_NAME: Final = "journal.key"
"""The key's file name in ``ROOST_HOME`` (unless ``ROOST_JOURNAL_KEY_FILE`` is set)."""
KEY_FILE_ENV: Final = "ROOST_JOURNAL_KEY_FILE"
"""Names the key file when the key must live elsewhere."""
ANCHOR_DIR: Final = "anchors"
"""The anchors' directory in ``ROOST_HOME``."""

_KEY_BYTES: Final = 32
_KEY_MAX_BYTES: Final = 4096
_ANCHOR_MAX_BYTES: Final = 1 << 20
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

log = get_logger("roost.journal")


def _utc_now() -> str:
    return format_at(datetime.now(UTC))


@dataclass(frozen=True)
class SealSettings:
    """How often the journal seals a project."""

    every_events: int = 256
    """Seal once a project has this many unsealed events (0: never by count)."""
    interval_s: float = 5.0
    """Seal every project with unsealed events this often (0: never by time)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> SealSettings:
        """``ROOST_SEAL_EVERY_EVENTS`` and ``ROOST_SEAL_INTERVAL_S``, or the defaults."""
        return cls(
            every_events=int(_number(env, "ROOST_SEAL_EVERY_EVENTS", cls.every_events)),
            interval_s=_number(env, "ROOST_SEAL_INTERVAL_S", cls.interval_s),
        )


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw) if "." in raw else int(raw)
    except ValueError:
        value = -1
    if value < 0 or (name.endswith("_EVENTS") and not isinstance(value, int)):
        kind = "a non-negative integer" if name.endswith("_EVENTS") else "a non-negative number"
        raise JournalError(f"{name} must be {kind}, got {raw!r}", key=name, value=raw)
    return value


# --- the key -------------------------------------------------------------------------------


def load_key(home: str, env: Mapping[str, str] | None = None) -> bytes:
    """The journal key: ``$ROOST_JOURNAL_KEY_FILE``, else ``home/journal.key`` (made if absent).

    Raises :class:`JournalError` when the configured file is missing, is not a regular
    file, is readable by others than its owner, or holds fewer than 32 bytes; and rather
    than make a new key when ``home/anchors`` already holds seals (the key was lost).
    """
    env = os.environ if env is None else env
    configured = env.get(KEY_FILE_ENV, "").strip()
    path = configured or os.path.join(home, KEY_NAME)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if configured:
            raise JournalError(
                f"{KEY_FILE_ENV} names {path}, which does not exist; create it with "
                f"(umask 077; head -c 32 /dev/urandom > {path})",
                path=path,
            ) from None
        anchors = os.path.join(home, ANCHOR_DIR)
        if os.path.isdir(anchors) and any(n.endswith(".json") for n in os.listdir(anchors)):
            raise JournalError(
                f"the journal key {path} is missing but {anchors} holds seals made with it; "
                f"restore the key from a backup, or move {anchors} aside to start new seals",
                path=path,
            ) from None
        _create_key(path)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        raise JournalError(f"cannot open the journal key {path}: {e.strerror}", path=path) from e
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise JournalError(f"the journal key {path} is not a regular file", path=path)
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise JournalError(
                f"the journal key {path} must be readable by its owner only (0600), "
                f"got {mode:04o}; fix it with chmod 600 {path}",
                path=path,
            )
        key = f.read(_KEY_MAX_BYTES + 1)
    if not _KEY_BYTES <= len(key) <= _KEY_MAX_BYTES:
        raise JournalError(
            f"the journal key {path} must hold {_KEY_BYTES} to {_KEY_MAX_BYTES} bytes, "
            f"got {len(key)}",
            path=path,
        )
    return key


def _create_key(path: str) -> None:
    """Write a fresh key to ``path`` whole or not at all (two starters may race)."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileExistsError):  # another starter won: use its key
            os.link(tmp, path)
        _fsync_dir(directory)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- the anchors ----------------------------------------------------------------------------


class AnchorStore:
    """The anchor files of one ``ROOST_HOME``."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._decoder = msgspec.json.Decoder(Anchor)

    def path(self, project_id: str) -> str:
        """The anchor file of ``project_id`` (a hash of the id when it is not a safe name)."""
        name = project_id if _SAFE_NAME.match(project_id) else None
        if name is None:
            name = "_" + hashlib.sha256(project_id.encode()).hexdigest()[:32]
        return os.path.join(self.directory, name + ".json")

    def read(self, project_id: str) -> Anchor | AnchorUnreadable | None:
        """The project's anchor; None when there is none."""
        path = self.path(project_id)
        try:
            with open(path, "rb") as f:
                raw = f.read(_ANCHOR_MAX_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as e:
            return AnchorUnreadable(reason=f"cannot read {path}: {e.strerror}")
        if len(raw) > _ANCHOR_MAX_BYTES:
            return AnchorUnreadable(reason=f"{path} is larger than {_ANCHOR_MAX_BYTES} bytes")
        try:
            return self._decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError) as e:
            return AnchorUnreadable(reason=f"{path} is not an anchor: {e}")

    def write(self, anchor: Anchor) -> None:
        """Replace the project's anchor atomically and durably."""
        os.makedirs(self.directory, mode=0o700, exist_ok=True)
        path = self.path(anchor.project_id)
        tmp = path + ".tmp"
        body = msgspec.json.format(msgspec.json.encode(anchor), indent=2) + b"\n"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(self.directory)


# --- sealing and resuming -----------------------------------------------------------------


@dataclass
class SealState:
    """Where a project's seals stand for the writer."""

    index: int = 0
    """The last checkpoint's index (0: none)."""
    mac: str = GENESIS_MAC
    """The last checkpoint's MAC."""
    position: int = 0
    """The last checkpoint's position."""
    seq: int = 0
    """The last checkpoint's ``seq`` (once committed)."""
    checkpoint: JournalCheckpoint | None = None
    """The last checkpoint."""
    sealing: bool = True
    """False once :meth:`Sealer.resume` refused: the project is never sealed again here."""


Checkpoints = Sequence[tuple[int, int, JournalCheckpoint | None]]
"""A project's checkpoints in the journal as ``(position, seq, checkpoint)``, in order
(``None`` for one whose data does not decode)."""


class Sealer:
    """Makes checkpoints and anchors for one journal writer (or checks them for a reader)."""

    def __init__(
        self,
        key: bytes,
        anchors: AnchorStore,
        settings: SealSettings | None = None,
        *,
        clock: Callable[[], str] = _utc_now,
    ) -> None:
        self.key = key
        self.key_id = key_id(key)
        self.anchors = anchors
        self.settings = settings or SealSettings()
        self.clock = clock

    @classmethod
    def for_home(cls, home: str, env: Mapping[str, str] | None = None) -> Sealer:
        """The sealer of ``home``: its key, its anchors, the settings in ``env``."""
        env = os.environ if env is None else env
        return cls(
            load_key(home, env),
            AnchorStore(os.path.join(home, ANCHOR_DIR)),
            SealSettings.from_env(env),
        )

    def checkpoint(
        self, project_id: str, state: SealState, head_position: int, head_hash: str, reason: str
    ) -> JournalCheckpoint:
        """The next checkpoint of ``project_id``, sealing ``head_hash`` at ``head_position``."""
        return make_checkpoint(
            self.key,
            project_id,
            index=state.index + 1,
            head_position=head_position,
            head_hash=head_hash,
            prev_checkpoint=state.mac,
            sealed_at=self.clock(),
            reason=reason,
        )

    def publish(self, project_id: str, state: SealState, *, closed: bool = False) -> bool:
        """Write the anchor of ``state``'s last checkpoint; False (and a log line) on failure."""
        if state.checkpoint is None:
            return True
        anchor = Anchor(
            project_id=project_id,
            checkpoint=state.checkpoint,
            checkpoint_seq=state.seq,
            closed=closed,
            written_at=self.clock(),
        )
        try:
            self.anchors.write(sign_anchor(self.key, anchor))
        except OSError as e:
            log.error(
                "journal_anchor_write_failed",
                project_id=project_id,
                path=self.anchors.path(project_id),
                error=str(e),
            )
            return False
        return True

    def resume(
        self,
        project_id: str,
        *,
        head_position: int,
        checkpoints: Checkpoints,
        anchor: Anchor | AnchorUnreadable | None,
        anchor_head_hash: str | None,
    ) -> SealState:
        """The seal state of a project a writer is about to append to.

        ``anchor`` was read before the project's events; ``anchor_head_hash`` is the hash
        the journal holds at the anchor's sealed head position. When the journal agrees with
        the anchor, the anchor is (re)written for the journal's last checkpoint, marked open,
        before anything is appended; when it does not, sealing stops for this project.
        """
        state = SealState()
        if checkpoints:
            position, seq, checkpoint = checkpoints[-1]
            if checkpoint is not None:
                state = SealState(checkpoint.index, checkpoint.mac, position, seq, checkpoint)
        refused = self._refusal(project_id, head_position, checkpoints, anchor, anchor_head_hash)
        if refused is not None:
            reason, details = refused
            log.error("journal_seal_refused", project_id=project_id, reason=reason, **details)
            state.sealing = False
            return state
        stale = (
            not isinstance(anchor, Anchor) or anchor.closed or anchor.checkpoint != state.checkpoint
        )
        if stale:
            self.publish(project_id, state)
        return state

    def _refusal(
        self,
        project_id: str,
        head_position: int,
        checkpoints: Checkpoints,
        anchor: Anchor | AnchorUnreadable | None,
        anchor_head_hash: str | None,
    ) -> tuple[str, dict[str, object]] | None:
        if isinstance(anchor, AnchorUnreadable):
            return "anchor_invalid", {"detail": anchor.reason}
        if checkpoints:
            _, seq, last = checkpoints[-1]
            if last is None or not hmac.compare_digest(
                checkpoint_mac(self.key, project_id, last), last.mac
            ):
                return "last_checkpoint_invalid", {"seq": seq}
        if anchor is None:
            return None
        sealed = anchor.checkpoint
        if (
            anchor.project_id != project_id
            or not hmac.compare_digest(anchor_mac(self.key, anchor), anchor.mac)
            or not hmac.compare_digest(checkpoint_mac(self.key, project_id, sealed), sealed.mac)
        ):
            return "anchor_invalid", {"detail": "its MAC does not match"}
        position = sealed.head_position + 1
        found = next((c for p, _, c in checkpoints if p == position), None)
        if found is None or not hmac.compare_digest(found.mac, sealed.mac):
            return "anchor_checkpoint_not_in_journal", {
                "checkpoint_index": sealed.index,
                "expected_position": position,
                "journal_ends_at": head_position,
            }
        if anchor_head_hash != sealed.head_hash:
            return "sealed_head_changed", {"head_position": sealed.head_position}
        if anchor.closed and head_position > position:
            return "appended_after_shutdown", {
                "sealed_through": position,
                "journal_ends_at": head_position,
            }
        return None
