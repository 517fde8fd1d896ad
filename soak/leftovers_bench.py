"""The cost of the review after a run: ``python -m soak.leftovers_bench``.

Builds a root of ``--files`` small files (100 per directory), then ``--runs`` times: the
walk every run makes before it starts (``rootscan``: the view's sensitive files and the
directories to watch), the inotify watches, a handful of changes (files written, one
deleted, a new directory, a FIFO), and the review (:mod:`runtime.guard.review.leftovers`), and
prints the medians in milliseconds as JSON, with the review by a whole walk (what a dead
run or an overflowed queue gets) beside it. It measures the guard itself, not the daemon
(``soak.command_bench`` measures a whole ``command.run``). Figures are in
``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time

from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.review.leftovers import begin, review_walk
from runtime.guard.review.rootscan import scan_paths

__all__ = ["main", "measure"]


def _root(base: str, files: int) -> str:
    root = os.path.join(base, "root")
    for i in range(files):
        directory = os.path.join(root, f"d{i // 100:03d}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, f"f{i}.txt"), "w", encoding="utf-8") as f:
            f.write("x\n")
    return root


def _change(root: str, run: int) -> None:
    """A handful of changes: 5 files written, one deleted, a new directory, a FIFO."""
    for i in range(5):
        with open(os.path.join(root, "d000", f"f{i}.txt"), "a", encoding="utf-8") as f:
            f.write(f"run {run}\n")
    os.unlink(os.path.join(root, "d001", f"f{100 + run}.txt"))
    new = os.path.join(root, f"new{run}")
    os.makedirs(os.path.join(new, "sub"))
    with open(os.path.join(new, "sub", "made.txt"), "w", encoding="utf-8") as f:
        f.write("made\n")
    os.mkfifo(os.path.join(root, f"pipe{run}"))


def _ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 2)


def measure(runs: int, files: int) -> dict[str, float]:
    """Run the benchmark; return the medians (ms) and what one review found."""
    base = tempfile.mkdtemp(prefix="roost-leftovers-bench-")
    rules = SensitiveRules([".env", "*.pem"])
    scans, watches, reviews, walks, lstat_walks = [], [], [], [], []
    found = 0
    try:
        root = _root(base, files)
        for run in range(runs):
            started = time.perf_counter()
            scan = scan_paths([root], rules)
            scans.append(time.perf_counter() - started)
            started = time.perf_counter()
            watch = begin(root, scan, rules=rules)
            watches.append(time.perf_counter() - started)
            began = time.time()
            _change(root, run)
            started = time.perf_counter()
            report = watch.review()
            reviews.append(time.perf_counter() - started)
            found = report.created_count + report.modified_count + report.deleted_count
            started = time.perf_counter()
            review_walk(
                root, project_id="bench", run_id="walk", started_at=began, gits=(), missing=(),
                detail="bench",
            )  # fmt: skip
            walks.append(time.perf_counter() - started)
            started = time.perf_counter()
            for top, _dirs, names in os.walk(root):
                for name in names:
                    os.lstat(os.path.join(top, name))
            lstat_walks.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {
        "files": float(files),
        "runs": float(runs),
        "scan_ms": _ms(scans),
        "watch_ms": _ms(watches),
        "review_inotify_ms": _ms(reviews),
        "review_walk_ms": _ms(walks),
        "lstat_walk_ms": _ms(lstat_walks),
        "changes_found": float(found),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m soak.leftovers_bench [--runs N] [--files N]``."""
    parser = argparse.ArgumentParser(prog="python -m soak.leftovers_bench")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--files", type=int, default=10_000)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.runs, args.files)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
