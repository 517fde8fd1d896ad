"""Run Thespian's own test suite for ``multiprocQueueBase`` with Roost's patches applied.

``.venv/bin/python scripts/thespian_suite.py`` downloads the sdist of the Thespian version
``pyproject.toml`` pins (``pip download thespian==X --no-deps --no-binary :all:``) into
a temporary directory and runs its tests twice, each with ``runtime.thespian_tuning``
applied in the test process before any actor system starts:

1. ``-k multiprocQueueBase``: every test of the queue transport Thespian runs by default;
2. ``--unstable`` on the tests pass 1 skipped as "unstable for multiprocQueueBase"
   (Thespian's own label for tests that hang or fail on stock queues).

Each test has a time limit (``--timeout``, default 120 s): a hang is a failure. Processes
a test leaves behind are killed after each pass. Exit status 0 only when both passes
have no failure and no error. ``--stock`` runs the same passes without the patches, for
comparison. It takes about 10 minutes, mostly waiting (Thespian's tests sleep), so it is
a separate command, not part of ``make test``; see docs/performance.md for the figures.
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
        from runtime import thespian_tuning

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


def run_pass(source: Path, args: list[str], env: dict[str, str], token: str) -> dict[str, int]:
    """One pytest run; the counts of its summary line (and processes left behind)."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, "thespian"]
    print("$", " ".join(command), flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    for line in lines:
        if line.startswith(("FAILED", "ERROR")) or "Timeout" in line:
            print("  ", line, flush=True)
    summary = lines[-1] if lines else done.stderr.strip()[-500:]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary)}
    counts["left_behind"] = kill_leftovers(token)
    counts["seconds"] = int(time.monotonic() - started)
    print(f"   {summary} -> {counts}", flush=True)
    return counts


def main(argv: list[str] | None = None) -> int:
    """Run both passes; 0 when neither has a failure or an error."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stock", action="store_true", help="without Roost's patches")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test")
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
        first = run_pass(source, ["-k", "multiprocQueueBase", *timeout], env, token)
        env.pop("ROOST_RECORD_UNSTABLE")
        env["ROOST_ONLY"] = str(record)
        unstable = len(set(record.read_text().split()))
        print(f"{unstable} tests skipped as unstable for multiprocQueueBase", flush=True)
        second = run_pass(source, ["--unstable", *timeout], env, token)
    bad = sum(c.get("failed", 0) + c.get("error", 0) + c.get("errors", 0) for c in (first, second))
    ran = first.get("passed", 0) + second.get("passed", 0)
    print(f"passed {first.get('passed', 0)} + {second.get('passed', 0)} (unstable); ", end="")
    print(f"failed or errors: {bad}")
    return 0 if bad == 0 and ran > 0 and second.get("passed", 0) == unstable else 1


if __name__ == "__main__":
    sys.exit(main())
