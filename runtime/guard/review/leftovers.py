"""After a run: what a tool process changed in the project root, and what it may not leave.

The view (:mod:`runtime.guard.sandbox.view`) keeps every ``.git`` and ``.roost`` read-only;
what mounts cannot prevent is found here and **quarantined**: moved out of the root into
``ROOST_HOME/quarantine/<project>/<run>/<path>`` (set-id bits stripped; FIFOs, sockets
and devices removed) before anything but the finished command could use it:

- ``git_dir_created``: a ``.git`` (directory or gitfile) that was not there before the run;
- ``bare_repository``: an entry git's discovery reads (``HEAD``, ``config``, ``objects``,
  ``refs``, ``commondir``, ``hooks``...) created or changed in a directory that has the
  bare-repository shape (``HEAD`` + ``objects/`` + ``refs/``) after the run;
- ``assets_created``, ``hooks_created``: a ``.roost`` or ``core.hooksPath`` directory
  that did not exist before the run;
- ``sensitive_alias``: a symbolic or hard link under a name the sensitive-path rules
  match (what the user writes there later would land in a file commands read);
- ``setid_file``: a regular file with the set-uid bit, or set-gid with group execute;
- ``special_file``: a FIFO, a Unix socket file or a device node.

:func:`begin` (before the process starts) puts an inotify watch on every directory of
:mod:`runtime.guard.review.rootscan`'s walk and writes the run's durable record
(:mod:`runtime.guard.review.run_ledger`); :meth:`RootWatch.review` then looks only at the paths
with events, a new directory whole: O(changes). When inotify cannot be had or its queue
overflowed, and for a run that a stop or crash cut (:func:`review_walk`), the review walks
the whole root and judges by ``ctime`` (which no process can set back). Either way it
returns a :class:`ChangeReport`: created, modified and deleted entries with sizes and
SHA-256 (capped), and what was quarantined and why.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Iterable, Sequence

import msgspec

from runtime.guard.home import roost_home
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.paths.safe_read import read_regular
from runtime.guard.review import inotify
from runtime.guard.review.rootscan import BARE_MEMBERS, RootScan, bare_shape
from runtime.guard.review.run_ledger import (
    RunLabel,
    RunRecord,
    close_run,
    dead_runs,
    open_run,
    save_run,
)
from runtime.logging import get_logger

log = get_logger("runtime.guard.review.leftovers")

__all__ = [
    "HASH_MAX_BYTES",
    "HASH_TOTAL_BYTES",
    "LIST_MAX",
    "Change",
    "ChangeReport",
    "Quarantined",
    "RootWatch",
    "begin",
    "quarantine_dir",
    "recover_runs",
    "review_walk",
]

LIST_MAX = 200
"""Entries kept per list of a report (the counts are exact)."""

HASH_MAX_BYTES = 4 * 1024 * 1024
"""Largest regular file whose SHA-256 a report carries."""

HASH_TOTAL_BYTES = 32 * 1024 * 1024
"""Most bytes hashed for one report; past it, files get their size only."""

CTIME_SLACK_S = 0.05
"""A walk counts an entry changed when its ctime is at most this before the run began
(file times come from the kernel's coarse clock, which may lag the run's start a tick)."""

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


class ChangeReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one run changed in the root and what the review took out of it."""

    root: str
    """The project root reviewed."""
    method: str
    """``inotify`` (the paths with events) or ``walk`` (the whole root, by ctime)."""
    detail: str = ""
    """Why a walk was needed (inotify unavailable, its queue overflowed, a dead run)."""
    created: list[Change] = []
    """Entries that did not exist before the run (a walk lists every change here)."""
    modified: list[Change] = []
    """Entries that existed and were changed."""
    deleted: list[Change] = []
    """Entries that existed and are gone (not seen by a walk)."""
    created_count: int = 0
    """All created entries (the list keeps :data:`LIST_MAX`)."""
    modified_count: int = 0
    """All modified entries."""
    deleted_count: int = 0
    """All deleted entries."""
    quarantined: list[Quarantined] = []
    """What was moved out or removed, and why."""
    duration_ms: float = 0.0
    """Time the review took."""

    @property
    def empty(self) -> bool:
        """Nothing changed and nothing was quarantined."""
        return not (self.created_count or self.modified_count or self.deleted_count)


def quarantine_dir(project_id: str, run_id: str) -> str:
    """Where a run's quarantined entries go, in ``ROOST_HOME``."""
    return os.path.join(roost_home.home(), "quarantine", _safe(project_id), _safe(run_id))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name).lstrip(".") or "_"


# --- before the run ---------------------------------------------------------------------


class RootWatch:
    """One run's watch over a project root; :meth:`review` after the run (see the module)."""

    def __init__(
        self,
        root: str,
        scan: RootScan,
        *,
        protected: Sequence[str],
        rules: SensitiveRules,
        label: RunLabel | None,
    ) -> None:
        self.root = root
        self.rules = rules
        self.started_at = time.time()
        self.run_id = label.run_id if label is not None else uuid.uuid4().hex[:16]
        self.project_id = label.project_id if label is not None else "local"
        self.gits = frozenset(os.path.relpath(g, root) for g in scan.git if _inside(g, root))
        # Not a real directory now: not bound read-only, so what appears there is judged
        # (a symlinked .roost loads no assets, but a directory made in its place would).
        self.missing = tuple(
            os.path.relpath(p, root)
            for p in protected
            if not (os.path.isdir(p) and not os.path.islink(p))
        )
        self.notify: inotify.Inotify | None = None
        self.detail = ""
        self.record: RunRecord | None = None
        self.report: ChangeReport | None = None
        self.pending: list[tuple[str, str, int]] = []
        self.pending_overflow = False
        self.held: list[tuple[str, str, int]] = []
        if label is not None:
            self.record = open_run(
                label,
                root=root,
                started_at=self.started_at,
                gits=self.gits,
                missing=self.missing,
                sensitive=(tuple(rules.deny), tuple(rules.allow)),
            )
        try:
            self.notify = inotify.Inotify()
            for directory in scan.directories:
                if _inside(directory, root):
                    self.notify.watch(directory)
        except OSError as e:
            self.detail = f"inotify unavailable ({e.strerror or e}): the whole root was walked"
            if self.notify is not None:
                self.notify.close()
                self.notify = None

    def review(self, *, keep: bool = False) -> ChangeReport:
        """Find what changed since :func:`begin`, quarantine what may not stay, close.

        A second call returns the first call's report. With ``keep`` (a long-lived process,
        such as an MCP stdio server, after each of its calls) the watch goes on instead:
        the directories that appeared are watched from now on, the next review reports what
        changed after this one, and the run's record stays until a review without ``keep``.
        """
        if self.report is not None:
            return self.report
        started = time.perf_counter()
        epoch = time.time()
        try:
            events: list[tuple[str, str, int]] = []
            overflow = False
            if self.notify is not None:
                events, overflow = self.notify.drain()
                events = self.pending + events + self.held
                overflow = overflow or self.pending_overflow
                self.pending, self.pending_overflow, self.held = [], False, []
                if overflow:
                    self.detail = "the inotify queue overflowed: the whole root was walked"
            review = _Review(
                self.root,
                project_id=self.project_id,
                run_id=self.run_id,
                rules=self.rules,
                gits=self.gits,
                missing=self.missing,
            )
            if self.notify is None or overflow:
                review.walk(self.started_at - CTIME_SLACK_S)
                method = "walk"
            else:
                review.events(events)
                method = "inotify"
            report = review.report(method, self.detail, time.perf_counter() - started)
        finally:
            if not keep:
                self.close()
        if keep:
            self.started_at = epoch
            self._rewatch(review.new_dirs)
            self._skip_own(review.gone)
            return report
        if self.record is not None:
            close_run(self.record)
        self.report = report
        return report

    def held_open(self, paths: Iterable[str]) -> None:
        """Judge ``paths`` (absolute) as changed at the next review.

        For the files a process that lives on (a frozen MCP server) holds open for writing
        or maps shared and writable: a write through a mapping makes no inotify event, and
        a file never closed makes no close event either.
        """
        for path in paths:
            if path != self.root and _inside(path, self.root):
                name = os.path.basename(path)
                self.held.append((os.path.dirname(path), name, inotify.IN_MODIFY))

    def rebase(self) -> None:
        """Forget what changed since the last review (a frozen server's root: not its doing)."""
        if self.notify is not None:
            self.notify.drain()
        self.pending, self.pending_overflow = [], False
        self.started_at = time.time()

    def _skip_own(self, gone: set[str]) -> None:
        """Keep for the next review the events since this one, less the quarantine's own.

        Each entry taken out made one deletion or move event in its directory; only that
        one is dropped, so what the process did at the same path since is still seen.
        """
        if self.notify is None:
            return
        events, overflow = self.notify.drain()
        self.pending_overflow = overflow
        own = set(gone)
        for directory, name, mask in events:
            rel = os.path.relpath(os.path.join(directory, name), self.root)
            if rel in own and mask & (inotify.IN_DELETE | inotify.IN_MOVED_FROM):
                own.discard(rel)
                continue
            self.pending.append((directory, name, mask))

    def _rewatch(self, new_dirs: list[str]) -> None:
        """Watch the directories a run made (a moved one gets its new path back)."""
        if self.notify is None:
            return
        try:
            for rel in new_dirs:
                path = os.path.join(self.root, rel)
                if os.path.isdir(path) and not os.path.islink(path):
                    self.notify.watch(path)
        except OSError as e:
            self.detail = f"inotify unavailable ({e.strerror or e}): the whole root was walked"
            self.close()

    def close(self) -> None:
        """Drop the watches (the run record stays until :meth:`review` finishes).

        The kernel's teardown of an instance's watches waits for a grace period (~10 ms
        per hundred directories here), so it happens on a thread, off the call's path.
        """
        if self.notify is not None:
            threading.Thread(target=self.notify.close, name="inotify-close", daemon=True).start()
            self.notify = None


def begin(
    root: str,
    scan: RootScan,
    *,
    protected: Sequence[str] = (),
    rules: SensitiveRules | None = None,
    label: RunLabel | None = None,
) -> RootWatch:
    """Start watching ``root`` for one run (before its process starts).

    ``scan`` is the walk the view was built from; ``protected`` the places that must not
    appear if missing now (``.roost``, ``core.hooksPath`` directories); ``rules`` the
    sensitive-path rules (their files are not hashed); ``label`` names the run for its
    durable record and its quarantine directory.
    """
    return RootWatch(
        root, scan, protected=protected, rules=rules or SensitiveRules(()), label=label
    )


def review_walk(
    root: str,
    *,
    project_id: str,
    run_id: str,
    started_at: float,
    gits: Iterable[str],
    missing: Iterable[str],
    detail: str,
    rules: SensitiveRules | None = None,
) -> ChangeReport:
    """Review ``root`` by a whole walk for a run that began at ``started_at`` (a dead run)."""
    started = time.perf_counter()
    review = _Review(
        root,
        project_id=project_id,
        run_id=run_id,
        rules=rules or SensitiveRules(()),
        gits=frozenset(gits),
        missing=tuple(missing),
    )
    review.walk(started_at - CTIME_SLACK_S)
    return review.report("walk", detail, time.perf_counter() - started)


DEAD_RUN_DETAIL = "the run was cut (its process is gone): the whole root was walked"


def recover_runs(project_id: str | None = None) -> list[tuple[RunRecord, ChangeReport]]:
    """Review the root of every dead run (of ``project_id``), once each; return the reports.

    The report is kept in the run's record until the caller has recorded it as an event
    and calls :func:`runtime.guard.review.run_ledger.close_run`; a run already reviewed (by a
    daemon stop or start) is not walked again.
    """
    found: list[tuple[RunRecord, ChangeReport]] = []
    for record in dead_runs(project_id):
        if record.report is not None:
            try:
                found.append((record, msgspec.convert(record.report, ChangeReport)))
                continue
            except msgspec.ValidationError:
                pass
        label = record.label
        report = review_walk(
            record.root,
            project_id=label.project_id,
            run_id=label.run_id,
            started_at=record.started_at,
            gits=record.gits,
            missing=record.missing,
            detail=DEAD_RUN_DETAIL,
            rules=SensitiveRules(*record.sensitive) if len(record.sensitive) == 2 else None,
        )
        record.report = msgspec.to_builtins(report)
        save_run(record)
        log.warning(
            "dead_run_reviewed",
            project_id=label.project_id,
            call_id=label.call_id,
            root=record.root,
            quarantined=len(report.quarantined),
        )
        found.append((record, report))
    return found


# --- the review -------------------------------------------------------------------------


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def _shown(name: str) -> str:
    r"""``name`` as text a report can carry: bytes that are not UTF-8 as ``\xNN``.

    A tool process names its files: one name that is not UTF-8 must not make its run's
    record unencodable (the events, the dead run's saved report), which would hide every
    other change with it.
    """
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def _setid(mode: int) -> bool:
    if not stat.S_ISREG(mode):
        return False
    return bool(mode & stat.S_ISUID) or (bool(mode & stat.S_ISGID) and bool(mode & stat.S_IXGRP))


class _Review:
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
        self.real_dirs: dict[str, bool] = {"": True}
        self.bare_dirs: dict[str, bool] = {}
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
        mode = st.st_mode
        reason: str | None = None
        if ".git" in parts and "/".join(parts[: parts.index(".git") + 1]) not in self.gits:
            rel = "/".join(parts[: parts.index(".git") + 1])
            reason = "git_dir_created"
        elif place := next((m for m in self.missing if rel == m or rel.startswith(m + "/")), None):
            reason = "assets_created" if os.path.basename(place) == ".roost" else "hooks_created"
            rel = place
        elif parts[-1] in BARE_MEMBERS and self._bare_parent(rel):
            reason = "bare_repository"
        elif self._alias(parts, st):
            reason = "sensitive_alias"
        elif _setid(mode):
            reason = "setid_file"
        elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            reason = "special_file"
        if reason is not None:
            top = self._lstat(rel)
            if top is not None:
                self._quarantine(rel, top, reason)
            return
        self._note("created" if created else "modified", self._describe(rel, st))

    def _alias(self, parts: list[str], st: os.stat_result) -> bool:
        """A sensitive name that is a second way to reach a file the process can read.

        A symbolic link (``.env -> notes.txt``) or a hard link (``.env`` and ``notes.txt``
        one inode) under a name the view hides: what the user writes there later lands
        in a file every later command reads, and the masking (which reads the sensitive
        file itself, never through a link) does not know its values.
        """
        mode = st.st_mode
        alias = stat.S_ISLNK(mode) or (stat.S_ISREG(mode) and st.st_nlink > 1)
        return alias and self.rules.match(parts) is not None

    def _bare_parent(self, rel: str) -> bool:
        """Whether ``rel``'s directory has the bare shape (judged once, before quarantines)."""
        parent = os.path.dirname(rel)
        known = self.bare_dirs.get(parent)
        if known is not None:
            return known
        names: set[str] = set()
        is_dir: dict[str, bool] = {}
        for child, st in self._children(parent):
            name = os.path.basename(child)
            names.add(name)
            # git checks objects/ and refs/ through symbolic links: a link may be one
            is_dir[name] = stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)
        self.bare_dirs[parent] = bare_shape(names, is_dir)
        return self.bare_dirs[parent]

    # safe file access --------------------------------------------------------------------

    def _abs(self, rel: str) -> str:
        return self.root if rel in ("", ".") else os.path.join(self.root, rel)

    def _real_dir(self, rel: str) -> bool:
        """Whether ``rel`` and every directory above it are real directories (no symlink)."""
        known = self.real_dirs.get(rel)
        if known is not None:
            return known
        parent = os.path.dirname(rel)
        ok = self._real_dir(parent)
        if ok:
            try:
                ok = stat.S_ISDIR(os.lstat(self._abs(rel)).st_mode)
            except OSError:
                ok = False
        self.real_dirs[rel] = ok
        return ok

    def _lstat(self, rel: str) -> os.stat_result | None:
        if rel.startswith("..") or not self._real_dir(os.path.dirname(rel)):
            return None  # reached through a symlink the run left: judged as that link
        try:
            return os.lstat(self._abs(rel))
        except OSError:
            return None

    def _children(self, rel_dir: str) -> list[tuple[str, os.stat_result]]:
        if not self._real_dir(rel_dir):
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
        if kind == "symlink":
            try:
                target = os.readlink(self._abs(rel))
            except OSError:
                return Change(path=rel, kind=kind)
            where = os.path.normpath(os.path.join(os.path.dirname(self._abs(rel)), target))
            return Change(
                path=rel, kind=kind, target=target, outside_root=not _inside(where, self.root)
            )
        if kind != "file":
            return Change(path=rel, kind=kind)
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
        source = self._abs(rel)
        self.gone.add(rel)
        moved_to: str | None = None
        error: str | None = None
        try:
            parent = _open_dir(self.root, os.path.dirname(rel))
            try:
                name = os.path.basename(rel)
                if kind in ("fifo", "socket", "device"):
                    os.unlink(name, dir_fd=parent)
                else:
                    dest = os.path.join(quarantine_dir(self.project_id, self.run_id), rel)
                    moved_to = _move(parent, name, dest)
            finally:
                os.close(parent)
        except OSError as e:
            log.error("quarantine_failed", path=source, reason=reason, error=str(e))
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

    def report(self, method: str, detail: str, seconds: float) -> ChangeReport:
        return ChangeReport(
            root=self.root,
            method=method,
            detail=detail,
            created=self.created,
            modified=self.modified,
            deleted=self.deleted,
            created_count=self.counts["created"],
            modified_count=self.counts["modified"],
            deleted_count=self.counts["deleted"],
            quarantined=self.quarantined,
            duration_ms=round(seconds * 1000, 3),
        )


def _open_dir(root: str, rel_dir: str) -> int:
    """A descriptor of ``root/rel_dir``, opened one component at a time, never through a link.

    The review checked the path, but without a freezer a process may swap a directory on
    the way for a symbolic link since: ``ELOOP``/``ENOTDIR`` then, and nothing is touched.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in [p for p in rel_dir.split("/") if p]:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _move(parent: int, name: str, dest: str) -> str:
    """Move ``name`` of the directory ``parent`` to ``dest`` (another filesystem too).

    Set-id bits of what arrived are stripped and its special files removed; returns where
    it is now.
    """
    os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
    if os.path.lexists(dest):
        dest = f"{dest}.{uuid.uuid4().hex[:8]}"
    try:
        os.rename(name, dest, src_dir_fd=parent)
    except OSError as e:
        if e.errno != 18:  # EXDEV: copy, then remove
            raise
        source = f"/proc/self/fd/{parent}/{name}"  # the directory opened, not a path again
        st = os.lstat(name, dir_fd=parent)
        if stat.S_ISDIR(st.st_mode):
            shutil.copytree(source, dest, symlinks=True, ignore_dangling_symlinks=True)
            shutil.rmtree(name, dir_fd=parent)
        else:
            shutil.copy2(source, dest, follow_symlinks=False)
            os.unlink(name, dir_fd=parent)
    _defuse(dest)
    return dest


def _defuse(path: str) -> None:
    """Strip set-id bits and remove special files under ``path`` (never following links)."""
    todo = [path]
    while todo:
        current = todo.pop()
        try:
            st = os.lstat(current)
        except OSError:
            continue
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            with contextlib.suppress(OSError):
                todo.extend(os.path.join(current, n) for n in os.listdir(current))
        elif stat.S_ISREG(mode):
            if mode & (stat.S_ISUID | stat.S_ISGID):
                with contextlib.suppress(OSError):
                    os.chmod(current, stat.S_IMODE(mode) & ~(stat.S_ISUID | stat.S_ISGID))
        elif not stat.S_ISLNK(mode):
            with contextlib.suppress(OSError):
                os.unlink(current)
