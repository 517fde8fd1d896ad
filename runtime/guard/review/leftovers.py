"""After a run: what a tool process changed in the project root, and what it may not leave.

:func:`begin` (before the process starts) puts an inotify watch on every directory of
:mod:`runtime.guard.review.rootscan`'s walk and writes the run's durable record
(:mod:`runtime.guard.review.run_ledger`); :meth:`RootWatch.review` then has the paths with
events judged (:mod:`runtime.guard.review.rootreview`), a new directory whole: O(changes).
When inotify cannot be had or its queue overflowed, and for a run that a stop or crash cut
(:func:`review_walk`), the whole root is walked and judged by ``ctime``. Either way the
result is a :class:`ChangeReport`; ``docs/security-commands.md`` says what is quarantined.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterable, Sequence

import msgspec

from runtime.guard.paths.rules import SensitiveRules, under
from runtime.guard.review import inotify
from runtime.guard.review.rootreview import Change, Quarantined, RootReview
from runtime.guard.review.rootscan import RootScan
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
    "ChangeReport",
    "RootWatch",
    "begin",
    "recover_runs",
    "review_walk",
]

CTIME_SLACK_S = 0.05
"""A walk counts an entry changed when its ctime is at most this before the run began
(file times come from the kernel's coarse clock, which may lag the run's start a tick)."""


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
    """All created entries (the list keeps :data:`~runtime.guard.review.rootreview.LIST_MAX`)."""
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
        self.gits = frozenset(os.path.relpath(g, root) for g in scan.git if under(g, root))
        # Not a real directory now: not bound read-only, so what appears there is judged
        # (a symlinked .roost loads no assets, but a directory made in its place would).
        self.missing = tuple(
            os.path.relpath(p, root)
            for p in protected
            if not (os.path.isdir(p) and not os.path.islink(p))
        )
        self.notify: inotify.Inotify | inotify.NoInotify = inotify.NoInotify()
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
                if under(directory, root):
                    self.notify.watch(directory)
        except OSError as e:
            self.detail = f"inotify unavailable ({e.strerror or e}): the whole root was walked"
            self.notify.close()
            self.notify = inotify.NoInotify()

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
            events, overflow = self.notify.drain()
            events = self.pending + events + self.held
            overflow = overflow or self.pending_overflow
            self.pending, self.pending_overflow, self.held = [], False, []
            if overflow:
                self.detail = "the inotify queue overflowed: the whole root was walked"
            review = RootReview(
                self.root,
                project_id=self.project_id,
                run_id=self.run_id,
                rules=self.rules,
                gits=self.gits,
                missing=self.missing,
            )
            if not self.notify.watching or overflow:
                review.walk(self.started_at - CTIME_SLACK_S)
                method = "walk"
            else:
                review.events(events)
                method = "inotify"
            report = _report(review, method, self.detail, time.perf_counter() - started)
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
            if path != self.root and under(path, self.root):
                name = os.path.basename(path)
                self.held.append((os.path.dirname(path), name, inotify.IN_MODIFY))

    def rebase(self) -> None:
        """Forget what changed since the last review (a frozen server's root: not its doing)."""
        self.notify.drain()
        self.pending, self.pending_overflow = [], False
        self.started_at = time.time()

    def _skip_own(self, gone: set[str]) -> None:
        """Keep for the next review the events since this one, less the quarantine's own.

        Each entry taken out made one deletion or move event in its directory; only that
        one is dropped, so what the process did at the same path since is still seen.
        """
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
        if self.notify.watching:
            threading.Thread(target=self.notify.close, name="inotify-close", daemon=True).start()
            self.notify = inotify.NoInotify()


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
    review = RootReview(
        root,
        project_id=project_id,
        run_id=run_id,
        rules=rules or SensitiveRules(()),
        gits=frozenset(gits),
        missing=tuple(missing),
    )
    review.walk(started_at - CTIME_SLACK_S)
    return _report(review, "walk", detail, time.perf_counter() - started)


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


def _report(review: RootReview, method: str, detail: str, seconds: float) -> ChangeReport:
    return ChangeReport(
        root=review.root,
        method=method,
        detail=detail,
        created=review.created,
        modified=review.modified,
        deleted=review.deleted,
        created_count=review.counts["created"],
        modified_count=review.counts["modified"],
        deleted_count=review.counts["deleted"],
        quarantined=review.quarantined,
        duration_ms=round(seconds * 1000, 3),
    )
