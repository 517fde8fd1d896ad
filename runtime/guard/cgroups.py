"""A process-count limit per command: one child cgroup of the ``pids`` controller per run.

``RLIMIT_NPROC`` counts every process of a user (and is not enforced for root), so it
cannot bound one command. The ``pids`` controller can: each run gets its own cgroup under
the runtime's own (cgroup v1 ``pids`` hierarchy, or the v2 unified one when its ``pids``
controller is enabled for our subtree), with ``pids.max`` set before the command starts.
A fork bomb then fails with ``EAGAIN`` inside that cgroup while the daemon and every other
call keep working. The command joins the cgroup through :func:`join_argv` (a shell that
writes its own pid to ``cgroup.procs`` and then execs the rest), so nothing runs between
``fork`` and ``exec`` in the runtime.

:func:`probe` tries it once per process; where no writable ``pids`` hierarchy exists (an
unprivileged user without a delegated cgroup), the layer is reported unavailable and
commands run without it (``docs/security-commands.md``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import time
import uuid

__all__ = ["PidsCgroup", "join_argv", "probe"]

_PREFIX = "roost-"
_JOIN_NAME = "roost-cgroup-join"
_JOIN_SCRIPT = 'echo $$ > "$1" || exit 125; shift; exec "$@"'


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``(mount point, fstype, super options)`` of every cgroup mount."""
    found = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                    found.append((fields[4], rest[0], set(rest[2].split(","))))
    except OSError:
        pass
    return found


def _own_cgroups() -> dict[str, str]:
    """Controller list (``"pids"``, ``""`` for v2) -> this process's cgroup path."""
    own: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3:
                    for controller in parts[1].split(",") if parts[1] else [""]:
                        own[controller] = parts[2]
    except OSError:
        pass
    return own


def _parent_dir() -> tuple[str, str] | None:
    """The directory to create call cgroups in, and the hierarchy (``v1``/``v2``)."""
    own = _own_cgroups()
    for mount, fstype, options in _mounts():
        if fstype == "cgroup" and "pids" in options and "pids" in own:
            return os.path.join(mount, own["pids"].lstrip("/")), "v1"
    for mount, fstype, _ in _mounts():
        if fstype == "cgroup2" and "" in own:
            base = os.path.join(mount, own[""].lstrip("/"))
            try:
                with open(os.path.join(base, "cgroup.subtree_control"), encoding="ascii") as f:
                    if "pids" in f.read().split():
                        return base, "v2"
            except OSError:
                continue
    return None


def _remove_stale(parent: str) -> list[str]:
    """Remove the empty call cgroups of processes that are gone (a SIGKILLed ToolRunner).

    A runner killed during a command cannot remove its call's cgroup; the next one made
    under the same parent removes it, once nothing runs in it. Returns what was removed.
    """
    removed: list[str] = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        owner = name[len(_PREFIX) :].split("-", 1)[0] if name.startswith(_PREFIX) else ""
        if not owner.isdigit() or os.path.exists(f"/proc/{owner}"):
            continue
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(parent, name))  # fails (EBUSY) while a task is left
            removed.append(name)
    return removed


class PidsCgroup:
    """One run's cgroup: create it, put the command in with :func:`join_argv`, then close."""

    def __init__(self, path: str, max_pids: int) -> None:
        self.path = path
        """The cgroup's directory."""
        self.max_pids = max_pids
        """Its ``pids.max``."""

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup:
        """Make a fresh cgroup limited to ``max_pids`` tasks; ``OSError`` when impossible."""
        where = _parent_dir()
        if where is None:
            raise OSError("no writable pids cgroup hierarchy")
        _remove_stale(where[0])
        path = os.path.join(where[0], f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")
        os.mkdir(path, 0o755)
        try:
            with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as f:
                f.write(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(path)
            raise
        return cls(path, max_pids)

    @property
    def procs_file(self) -> str:
        """The file a process writes its pid to in order to join."""
        return os.path.join(self.path, "cgroup.procs")

    def pids(self) -> list[int]:
        """Tasks in the cgroup now."""
        try:
            with open(self.procs_file, encoding="ascii") as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def peak_refused(self) -> int:
        """How many forks the limit refused (``pids.events`` ``max``), 0 when unknown."""
        try:
            with open(os.path.join(self.path, "pids.events"), encoding="ascii") as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "max":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def close(self, timeout_s: float = 2.0) -> None:
        """Kill whatever is left in the cgroup and remove it (best effort, bounded)."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = self.pids()
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)


def join_argv(cgroup: PidsCgroup) -> list[str]:
    """The prefix that moves the command into ``cgroup`` before it execs."""
    return ["/bin/sh", "-c", _JOIN_SCRIPT, _JOIN_NAME, cgroup.procs_file]


@functools.lru_cache(maxsize=1)
def probe() -> tuple[bool, str, str | None]:
    """Return ``(available, detail, via)``: can this process make and join a limited cgroup."""
    where = _parent_dir()
    if where is None:
        return False, "no writable pids cgroup hierarchy (v1 pids or v2 with pids delegated)", None
    try:
        group = PidsCgroup.create(8)
    except OSError as e:
        return False, f"cannot create a pids cgroup: {e.strerror or e}", None
    try:
        joined = subprocess.run(
            [*join_argv(group), "/bin/true"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"cannot join a pids cgroup: {e}", None
    finally:
        group.close()
    if joined.returncode != 0:
        return False, "cannot join a pids cgroup", None
    return True, "ok", f"cgroup_{where[1]}"
