"""``verify`` of one large project, its time and peak memory: ``python -m soak.verify_bench``.

1. Builds a SQLite journal of ``--events`` events on a fresh ``ROOST_HOME`` with the real
   writer (:func:`soak.query_bench.build_journal`: redaction, hash chain, seals, batches),
   one project of ``--conversations`` conversations (the soak's 4 by default), and with
   ``--snapshots`` a stored snapshot of each conversation at its middle event (folded by
   the agent loop's codec, as the writer would), so ``verify`` rebuilds and compares them.
2. Runs :func:`runtime.daemon.verify.verify_project` on it in a fresh Python process (the
   daemon's own code path, without the actors: the project is stopped) and reads that
   process's RSS before the verify and its peak (``ru_maxrss``) after it.

``--tree DIR`` runs step 2 with the code of another checkout (for a before/after); ``--home``
verifies a journal built earlier instead of building one. Prints a JSON report (also to
``--json FILE``). Figures are in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from runtime.agent.snapshot import CODEC
from runtime.journal.scope import Scope
from runtime.journal.snapshots import StoredSnapshot
from runtime.journal.store import Journal
from soak.query_bench import PROJECT, _conversation, build_journal, emit_report

__all__ = ["VERIFY", "add_snapshots", "main", "run_verify"]

VERIFY = """
import json, resource, sys, time
import psutil
from runtime.daemon.verify import verify_project
from runtime.journal.store import Journal

with Journal.open(sys.argv[1], "sqlite") as journal:
    rss_before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    report = verify_project(journal, sys.argv[2], {}, None, time.monotonic() + 3600)
    seconds = time.perf_counter() - started
print(json.dumps({
    "seconds": round(seconds, 1),
    "rss_before_mb": round(rss_before / 2**20, 1),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    "checked_events": report["checked_events"],
    "ok": report["ok"],
    "mismatches": len(report["mismatches"]),
    "snapshots": report["snapshots"],
}))
"""
"""The verify step, run as ``python -c VERIFY HOME PROJECT`` (old and new code alike)."""

_PAGE = 2000


def add_snapshots(home: str, conversations: int) -> int:
    """Store a snapshot of each conversation at its middle event; how many were stored."""
    stored = 0
    with Journal.open(home, "sqlite") as journal:
        options = journal.project_options(PROJECT) or {}
        for index in range(conversations):
            conversation = _conversation(index)
            middle = journal.count_scope(PROJECT, Scope(conversation_id=conversation)) // 2
            body: bytes | None = None
            after = folded = 0
            last = None
            while folded < middle:
                scope = Scope(conversation_id=conversation, after_seq=after)
                page = journal.read_scope(PROJECT, scope, limit=min(_PAGE, middle - folded))
                if not page:
                    break
                body = CODEC.fold(
                    body, page, project_id=PROJECT, conversation_id=conversation, options=options
                )
                folded += len(page)
                last = page[-1]
                after = last.seq
            if body is None or last is None:
                continue
            journal.put_snapshot(
                StoredSnapshot.at(
                    last,
                    project_id=PROJECT,
                    conversation_id=conversation,
                    format=CODEC.format,
                    body=body,
                )
            )
            stored += 1
    return stored


def run_verify(home: str, tree: str) -> dict[str, Any]:
    """Verify the bench project of ``home`` in a fresh process on ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run(
        [sys.executable, "-c", VERIFY, home, PROJECT],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m soak.verify_bench [--events N] [--snapshots] ...``."""
    parser = argparse.ArgumentParser(prog="python -m soak.verify_bench")
    parser.add_argument("--events", type=int, default=200_000, help="default 200,000")
    parser.add_argument("--conversations", type=int, default=4, help="default 4")
    parser.add_argument("--snapshots", action="store_true", help="a snapshot per conversation")
    parser.add_argument("--home", help="verify this home's journal (built before) instead")
    parser.add_argument("--keep", action="store_true", help="keep the home built (prints it)")
    parser.add_argument("--tree", action="append", help="verify with this checkout's code")
    parser.add_argument("--workdir", help="where the temporary home goes (default: TMPDIR)")
    parser.add_argument("--json", dest="json_path", help="also write the report here")
    args = parser.parse_args(argv)
    base = None
    report: dict[str, Any] = {}
    home = args.home
    if home is None:
        base = tempfile.mkdtemp(prefix="roost-verify-bench-", dir=args.workdir)
        home = os.path.join(base, "home")
        os.makedirs(home, mode=0o700)
        report["build"] = build_journal(home, args.events, args.conversations)
        if args.snapshots:
            report["snapshots_stored"] = add_snapshots(home, args.conversations)
    try:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        trees = args.tree or [here]
        report["verify"] = {tree: run_verify(home, tree) for tree in trees}
    finally:
        if base is not None and not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        elif base is not None:
            report["home"] = home
    emit_report(report, args.json_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
