"""Run Thespian's own test suite for ``multiprocQueueBase`` with Roost's patches applied.

``.venv/bin/python scripts/thespian_suite.py`` downloads the sdist of the Thespian version
``pyproject.toml`` pins (``pip download thespian==X --no-deps --no-binary :all:``) into
a temporary directory and runs its tests twice, each with ``actors.thespian.patches``
applied in the test process before any actor system starts:

1. ``-k multiprocQueueBase``: every test of the queue transport Thespian runs by default;
2. ``--unstable`` on the tests pass 1 skipped as "unstable for multiprocQueueBase"
   (Thespian's own label for tests that hang or fail on stock queues).

Each test has a time limit (``--timeout``, default 120 s): a hang is a failure. A hang
that swallows that limit's exception (stock Thespian has some, in its own shutdown code)
is caught by a limit on the whole pass (``--pass-timeout``, default 30 min): the pass is
killed and the test it was in is reported as hung. Processes a test leaves behind are
killed after each pass. Exit status 0 only when both passes have no failure, no error and
no hang. ``--stock`` runs the same passes without the patches, for comparison. It takes
about 7 minutes, mostly waiting (Thespian's tests sleep), so it is a separate command,
not part of ``make test``; see docs/performance.md for the figures.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
MARK = "ROOST_THESPIAN_SUITE"
"""Environment variable set in the suite's processes, to find the ones left behind."""

CONFTEST = """
import os

import pytest

UNSTABLE = "Test unstable for multiprocQueueBase system base"


def pytest_addoption(parser):
    parser.addoption("--unstable", action="store_true", default=False,
                     help="run the tests Thespian marks unstable for a system base")


def pytest_configure(config):
    if os.environ.get("ROOST_PATCHES") == "1":
        from actors.thespian import patches as thespian_tuning

        thespian_tuning.apply()


def pytest_collection_modifyitems(config, items):
    only = os.environ.get("ROOST_ONLY")
    if only:
        wanted = set(open(only).read().split())
        items[:] = [item for item in items if item.nodeid in wanted]


def pytest_runtest_logreport(report):
    record = os.environ.get("ROOST_RECORD_UNSTABLE")
    if record and report.skipped and isinstance(report.longrepr, tuple):
        if UNSTABLE in str(report.longrepr[2]):
            with open(record, "a") as out:
                out.write(report.nodeid + "\\n")
"""


def pinned_version() -> str:
    """The exact Thespian version ``pyproject.toml`` pins."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        match = re.fullmatch(r"thespian==([\w.]+)", requirement.replace(" ", ""))
        if match:
            return match.group(1)
    raise SystemExit("pyproject.toml does not pin thespian exactly (thespian==X)")


def download(version: str, into: Path) -> Path:
    """Download and unpack the sdist; return the directory that holds ``thespian/``."""
    subprocess.run(
        [
            sys.executable,
            *("-m", "pip", "download", "--quiet", f"thespian=={version}"),
            *("--no-deps", "--no-binary", ":all:", "--dest", str(into)),
        ],
        check=True,
    )
    (archive,) = into.glob("thespian-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    source = into / f"thespian-{version}"
    (source / "conftest.py").write_text(CONFTEST)
    return source


def kill_leftovers(token: str) -> int:
    """Kill every process that carries this run's mark; how many there were."""
    killed = 0
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(MARK) == token:
                proc.send_signal(signal.SIGKILL)
                killed += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return killed


def run_pass(
    source: Path,
    args: list[str],
    env: dict[str, str],
    token: str,
    limit_s: float,
    *,
    keep: Path | None = None,
) -> dict[str, int]:
    """One pytest run; the counts of its outcomes (and hangs, processes left behind)."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *args, "thespian"]
    print("$", " ".join(command), flush=True)
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(command, cwd=source, env=env, stdout=out, stderr=out, text=True)
        try:
            proc.wait(limit_s)
            hung = False
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            hung = True
        out.seek(0)
        text = out.read()
    if keep is not None:
        keep.write_text(text)
    lines = text.strip().splitlines()
    for line in lines:
        if line.startswith(("FAILED", "ERROR")):
            print("  ", line, flush=True)
    tests = [line for line in lines if line.startswith("thespian/") and "::" in line]
    counts: dict[str, int] = {}
    for word in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
        n = sum(1 for line in tests if f" {word}" in line)
        if n:
            counts[word.lower()] = n
    if hung:
        last = tests[-1].split(" ")[0] if tests else "?"
        print(f"   HUNG: killed after {limit_s:.0f} s, in or after {last}", flush=True)
        counts["hung"] = 1
    elif lines:
        print(f"   {lines[-1]}", flush=True)
    counts["left_behind"] = kill_leftovers(token)
    counts["seconds"] = int(time.monotonic() - started)
    print(f"   -> {counts}", flush=True)
    return counts


def main(argv: list[str] | None = None) -> int:
    """Run both passes; 0 when neither has a failure, an error or a hang."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stock", action="store_true", help="without Roost's patches")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
    parser.add_argument("--pass-timeout", type=int, default=1800, help="seconds per pass")
    parser.add_argument("--keep", type=Path, help="write each pass's full output in this directory")
    options = parser.parse_args(argv)
    version = pinned_version()
    token = f"{os.getpid()}-{time.time_ns()}"
    with tempfile.TemporaryDirectory(prefix="thespian-suite-") as tmp:
        source = download(version, Path(tmp))
        record = Path(tmp) / "unstable.txt"
        record.touch()
        env = dict(os.environ)
        env.update(
            {
                MARK: token,
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p),
                "ROOST_PATCHES": "0" if options.stock else "1",
                "ROOST_RECORD_UNSTABLE": str(record),
            }
        )
        timeout = [f"--timeout={options.timeout}"]
        print(f"thespian {version}, {'stock' if options.stock else 'patched'}", flush=True)
        limit = options.pass_timeout
        logs = options.keep
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
        first = run_pass(
            source,
            ["-k", "multiprocQueueBase", *timeout],
            env,
            token,
            limit,
            keep=logs / "pass1.txt" if logs else None,
        )
        env.pop("ROOST_RECORD_UNSTABLE")
        env["ROOST_ONLY"] = str(record)
        unstable = len(set(record.read_text().split()))
        print(f"{unstable} tests skipped as unstable for multiprocQueueBase", flush=True)
        second = run_pass(
            source,
            ["--unstable", *timeout],
            env,
            token,
            limit,
            keep=logs / "pass2.txt" if logs else None,
        )
    bad = sum(c.get("failed", 0) + c.get("error", 0) + c.get("hung", 0) for c in (first, second))
    ran = first.get("passed", 0) + second.get("passed", 0)
    print(f"passed {first.get('passed', 0)} + {second.get('passed', 0)} (unstable); ", end="")
    print(f"failed, errors or hung: {bad}")
    return 0 if bad == 0 and ran > 0 and second.get("passed", 0) == unstable else 1


if __name__ == "__main__":
    sys.exit(main())
