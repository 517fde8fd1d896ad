"""The review pass: each entry a run changed in the root, described or quarantined.

:class:`RootReview` takes its candidates from inotify events or from a walk by ``ctime``
(:mod:`runtime.guard.review.leftovers` decides which), reaches them by ``lstat`` only,
every directory on the way checked to be a real one, and takes out what may not stay
(:mod:`runtime.guard.review.quarantine`; the reasons: ``docs/security-commands.md``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable

import msgspec

from runtime.guard.paths.rules import SensitiveRules, under
from runtime.guard.paths.safe_read import read_regular
from runtime.guard.review import inotify
from runtime.guard.review.quarantine import take_out
from runtime.guard.review.rootscan import BARE_MEMBERS, bare_shape
from runtime.logging import get_logger

log = get_logger("runtime.guard.review.rootreview")

__all__ = [
    "HASH_MAX_BYTES",
    "HASH_TOTAL_BYTES",
    "LIST_MAX",
    "Change",
    "Quarantined",
    "RootReview",
]

LIST_MAX = 200
"""Entries kept per list of a report (the counts are exact)."""

HASH_MAX_BYTES = 4 * 1024 * 1024
"""Largest regular file whose SHA-256 a report carries."""

HASH_TOTAL_BYTES = 32 * 1024 * 1024
"""Most bytes hashed for one report; past it, files get their size only."""

_DIR_EVENTS = inotify.IN_CREATE | inotify.IN_MOVED_TO


class Change(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry a run created, modified or deleted."""

    path: str
    """Relative to the root."""
    kind: str
    """``file``, ``dir``, ``symlink``, ``fifo``, ``socket``, ``device`` or ``gone``."""
    size: int | None = None
    """Bytes, for a regular file."""
    sha256: str | None = None
    """Hex digest of a regular file up to :data:`HASH_MAX_BYTES` (not of sensitive ones)."""
    target: str | None = None
    """A symbolic link's target."""
    outside_root: bool = False
    """A symbolic link whose target resolves outside the root."""


class Quarantined(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry taken out of the root."""

    path: str
    """Relative to the root."""
    reason: str
    """``git_dir_created``, ``bare_repository``, ``assets_created``, ``hooks_created``,
    ``sensitive_alias``, ``setid_file`` or ``special_file``."""
    kind: str
    """What it was (``file``, ``dir``, ``fifo``, ...)."""
    moved_to: str | None = None
    """Where it is now (``None``: a special file, removed; or the move failed)."""
    error: str | None = None
    """Why it could not be taken out (it is still in the root), when it could not."""


def _shown(name: str) -> str:
    r"""``name`` as text a report can carry: bytes that are not UTF-8 as ``\xNN``.

    A tool process names its files: one name that is not UTF-8 must not make its run's
    record unencodable (the events, the dead run's saved report), which would hide every
    other change with it.
    """
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


_KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "dir",
    stat.S_IFLNK: "symlink",
    stat.S_IFIFO: "fifo",
    stat.S_IFSOCK: "socket",
}
"""A :class:`Change`'s kind by file type; the others (character, block) are ``device``."""


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "device")


def _setid(review: RootReview, rel: str, parts: list[str], st: os.stat_result) -> bool:
    """A regular file that runs with its owner's or group's privileges."""
    mode = st.st_mode
    if not stat.S_ISREG(mode):
        return False
    return bool(mode & stat.S_ISUID) or (bool(mode & stat.S_ISGID) and bool(mode & stat.S_IXGRP))


def _special(review: RootReview, rel: str, parts: list[str], st: os.stat_result) -> bool:
    """A FIFO, socket or device: nothing a tool may leave in a project."""
    mode = st.st_mode
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode))


class _Memo(dict[str, bool]):
    """One judgement per path, made by ``judge`` when a path is first asked for."""

    def __init__(self, judge: Callable[[str], bool]) -> None:
        super().__init__()
        self.judge = judge

    def __missing__(self, path: str) -> bool:
        self[path] = judged = self.judge(path)
        return judged


class RootReview:
    """One review's state: the candidates, what was decided, the hash budget."""

    def __init__(
        self,
        root: str,
        *,
        project_id: str,
        run_id: str,
        rules: SensitiveRules,
        gits: frozenset[str],
        missing: tuple[str, ...],
    ) -> None:
        self.root = root.rstrip("/") or "/"
        self.project_id, self.run_id = project_id, run_id
        self.rules, self.gits, self.missing = rules, gits, missing
        self.created: list[Change] = []
        self.modified: list[Change] = []
        self.deleted: list[Change] = []
        self.counts = {"created": 0, "modified": 0, "deleted": 0}
        self.quarantined: list[Quarantined] = []
        self.gone: set[str] = set()  # relative paths quarantined (their insides with them)
        self.real_dirs = _Memo(self._judge_real_dir)
        self.real_dirs[""] = True  # the root itself
        self.bare_dirs = _Memo(self._judge_bare_dir)
        self.new_dirs: list[str] = []  # directories the run made or moved in (relative)
        self.hash_budget = HASH_TOTAL_BYTES

    # candidates ------------------------------------------------------------------------

    def events(self, events: list[tuple[str, str, int]]) -> None:
        """Judge the paths with events: the first event tells whether a path existed."""
        first: dict[str, int] = {}
        new_dirs: set[str] = set()
        for directory, name, mask in events:
            rel = os.path.relpath(os.path.join(directory, name), self.root)
            first.setdefault(rel, mask)
            if mask & inotify.IN_ISDIR and mask & _DIR_EVENTS:
                new_dirs.add(rel)
        for rel in sorted(first):
            existed = not first[rel] & _DIR_EVENTS
            st = self._lstat(rel)
            if st is None:
                if existed:
                    gone = Change(path=rel, kind="dir" if first[rel] & inotify.IN_ISDIR else "gone")
                    self._note("deleted", gone)
                continue
            self._judge(rel, st, created=not existed)
            if rel in new_dirs and stat.S_ISDIR(st.st_mode):
                self._walk_new(rel)

    def walk(self, since: float) -> None:
        """Judge every entry of the root whose ctime is at or after ``since``."""
        stack = [""]
        while stack:
            rel_dir = stack.pop()
            for rel, st in self._children(rel_dir):
                name = os.path.basename(rel)
                if name == ".git" and rel in self.gits:
                    continue  # read-only to commands: not theirs
                changed = st.st_ctime >= since or name == ".git"
                if changed:
                    self._judge(rel, st, created=True)
                if stat.S_ISDIR(st.st_mode) and rel not in self.gone:
                    stack.append(rel)

    def _walk_new(self, rel_dir: str) -> None:
        """Judge everything inside a directory the run created (all of it is new)."""
        stack = [rel_dir]
        while stack:
            current = stack.pop()
            if current in self.gone:
                continue
            self.new_dirs.append(current)
            for rel, st in self._children(current):
                self._judge(rel, st, created=True)
                if stat.S_ISDIR(st.st_mode) and rel not in self.gone:
                    stack.append(rel)

    # rules -----------------------------------------------------------------------------

    def _judge(self, rel: str, st: os.stat_result, *, created: bool) -> None:
        if any(rel == g or rel.startswith(g + "/") for g in self.gone):
            return
        parts = rel.split("/")
        reason: str | None = None
        if ".git" in parts and "/".join(parts[: parts.index(".git") + 1]) not in self.gits:
            rel = "/".join(parts[: parts.index(".git") + 1])
            reason = "git_dir_created"
        elif place := next((m for m in self.missing if rel == m or rel.startswith(m + "/")), None):
            reason = "assets_created" if os.path.basename(place) == ".roost" else "hooks_created"
            rel = place
        else:
            reason = self._entry_reason(rel, parts, st)
        if reason is not None:
            top = self._lstat(rel)
            if top is not None:
                self._quarantine(rel, top, reason)
            return
        self._note("created" if created else "modified", self._describe(rel, st))

    def _entry_reason(self, rel: str, parts: list[str], st: os.stat_result) -> str | None:
        """The first of :data:`_ENTRY_RULES` the entry itself breaks, or None."""
        for reason, breaks in _ENTRY_RULES:
            if breaks(self, rel, parts, st):
                return reason
        return None

    def _bare_member(self, rel: str, parts: list[str], st: os.stat_result) -> bool:
        """A name that makes its directory a git directory, in a directory of the bare shape."""
        return parts[-1] in BARE_MEMBERS and self.bare_dirs[os.path.dirname(rel)]

    def _alias(self, rel: str, parts: list[str], st: os.stat_result) -> bool:
        """A sensitive name that is a second way to reach a file the process can read.

        A symbolic link (``.env -> notes.txt``) or a hard link (``.env`` and ``notes.txt``
        one inode) under a name the view hides: what the user writes there later lands
        in a file every later command reads, and the masking (which reads the sensitive
        file itself, never through a link) does not know its values.
        """
        mode = st.st_mode
        alias = stat.S_ISLNK(mode) or (stat.S_ISREG(mode) and st.st_nlink > 1)
        return alias and self.rules.match(parts) is not None

    def _judge_bare_dir(self, parent: str) -> bool:
        """Whether the directory ``parent`` has the bare shape (judged once, before quarantines)."""
        names: set[str] = set()
        is_dir: dict[str, bool] = {}
        for child, st in self._children(parent):
            name = os.path.basename(child)
            names.add(name)
            # git checks objects/ and refs/ through symbolic links: a link may be one
            is_dir[name] = stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)
        return bare_shape(names, is_dir)

    # safe file access --------------------------------------------------------------------

    def _abs(self, rel: str) -> str:
        return self.root if rel in ("", ".") else os.path.join(self.root, rel)

    def _judge_real_dir(self, rel: str) -> bool:
        """Whether ``rel`` and every directory above it are real directories (no symlink)."""
        ok = self.real_dirs[os.path.dirname(rel)]
        if ok:
            try:
                ok = stat.S_ISDIR(os.lstat(self._abs(rel)).st_mode)
            except OSError:
                ok = False
        return ok

    def _lstat(self, rel: str) -> os.stat_result | None:
        if rel.startswith("..") or not self.real_dirs[os.path.dirname(rel)]:
            return None  # reached through a symlink the run left: judged as that link
        try:
            return os.lstat(self._abs(rel))
        except OSError:
            return None

    def _children(self, rel_dir: str) -> list[tuple[str, os.stat_result]]:
        if not self.real_dirs[rel_dir]:
            return []
        found: list[tuple[str, os.stat_result]] = []
        try:
            with os.scandir(self._abs(rel_dir)) as entries:
                for entry in entries:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    found.append((os.path.join(rel_dir, entry.name) if rel_dir else entry.name, st))
        except OSError:
            return []
        return found

    def _describe(self, rel: str, st: os.stat_result) -> Change:
        kind = _kind(st.st_mode)
        describe = _DESCRIBERS.get(kind, RootReview._plain)
        return describe(self, rel, st, kind)

    def _plain(self, rel: str, st: os.stat_result, kind: str) -> Change:
        """A directory, FIFO, socket or device: its kind only."""
        return Change(path=rel, kind=kind)

    def _link(self, rel: str, st: os.stat_result, kind: str) -> Change:
        """A symbolic link: its target, and whether that resolves outside the root."""
        try:
            target = os.readlink(self._abs(rel))
        except OSError:
            return Change(path=rel, kind=kind)
        where = os.path.normpath(os.path.join(os.path.dirname(self._abs(rel)), target))
        return Change(path=rel, kind=kind, target=target, outside_root=not under(where, self.root))

    def _file(self, rel: str, st: os.stat_result, kind: str) -> Change:
        """A regular file: its size, and its SHA-256 while the budget lasts (not if sensitive)."""
        digest = None
        if (
            st.st_size <= HASH_MAX_BYTES
            and st.st_size <= self.hash_budget
            and self.rules.match(rel.split("/")) is None
        ):
            digest = self._sha256(rel)
            self.hash_budget -= st.st_size
        return Change(path=rel, kind=kind, size=st.st_size, sha256=digest)

    def _sha256(self, rel: str) -> str | None:
        """SHA-256 of a regular file (no symlink, no FIFO; None past :data:`HASH_MAX_BYTES`)."""
        try:
            data = read_regular(self._abs(rel), HASH_MAX_BYTES)
        except OSError:
            return None
        return hashlib.sha256(data).hexdigest()

    def _note(self, what: str, change: Change) -> None:
        self.counts[what] += 1
        target = {"created": self.created, "modified": self.modified, "deleted": self.deleted}
        if len(target[what]) < LIST_MAX:
            shown = msgspec.structs.replace(
                change,
                path=_shown(change.path),
                target=None if change.target is None else _shown(change.target),
            )
            target[what].append(shown)

    # quarantine --------------------------------------------------------------------------

    def _quarantine(self, rel: str, st: os.stat_result, reason: str) -> None:
        kind = _kind(st.st_mode)
        self.gone.add(rel)
        error: str | None = None
        try:
            moved_to = take_out(
                self.root, rel, kind, project_id=self.project_id, run_id=self.run_id
            )
        except OSError as e:
            log.error("quarantine_failed", path=self._abs(rel), reason=reason, error=str(e))
            moved_to, error = None, f"{type(e).__name__}: {e.strerror or e}"
        self.quarantined.append(
            Quarantined(
                path=_shown(rel),
                reason=reason,
                kind=kind,
                moved_to=None if moved_to is None else _shown(moved_to),
                error=error,
            )
        )


_DESCRIBERS: dict[str, Callable[[RootReview, str, os.stat_result, str], Change]] = {
    "symlink": RootReview._link,
    "file": RootReview._file,
}
"""How an entry of each kind is described (the other kinds: by their kind alone)."""


_ENTRY_RULES: tuple[
    tuple[str, Callable[[RootReview, str, list[str], os.stat_result], bool]], ...
] = (
    ("bare_repository", RootReview._bare_member),
    ("sensitive_alias", RootReview._alias),
    ("setid_file", _setid),
    ("special_file", _special),
)
"""What an entry may not be, in order (the first one it is names its quarantine)."""
