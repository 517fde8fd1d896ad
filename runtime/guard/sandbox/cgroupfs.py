"""The cgroup filesystem: where this process may make cgroups, and how one is made and removed.

Finding the hierarchies (v1 per controller, or the v2 unified one), reading and writing
control files, making a cgroup, joining it through :func:`join_argv` (a shell that writes
its own pid to each ``cgroup.procs`` and then execs the rest, so nothing runs between
``fork`` and ``exec`` in the runtime) with the kernel's migration lock kept warm for it
(:func:`keep_warm`), and killing and removing one: also those of owners that are gone
(:func:`remove_stale`), thawing a frozen one first. A cgroup's name says which
``ROOST_HOME`` it belongs to (:func:`home_key`), so a daemon removes only its own home's.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable
from typing import Literal, Protocol

from runtime.guard.home import roost_home

__all__ = [
    "CGROUP_PREFIX",
    "CONTROLLERS",
    "Controller",
    "Joinable",
    "Version",
    "freezer_parent",
    "fresh_name",
    "home_key",
    "join_argv",
    "keep_warm",
    "kill_and_remove",
    "make_cgroup",
    "mounts",
    "own_cgroups",
    "parent_dir",
    "read_control",
    "remove_stale",
    "tasks",
    "thaw",
    "write_control",
]

Controller = Literal["pids", "memory", "cpu"]
"""A cgroup controller a call's limits use."""

Version = Literal["v1", "v2"]
"""cgroup v1 (a hierarchy per controller) or v2 (the unified one)."""

CONTROLLERS: tuple[Controller, ...] = ("pids", "memory", "cpu")
"""The controllers a call's cgroup is made in, where each can be had."""

CGROUP_PREFIX = "roost-"
"""Every cgroup Roost makes: ``<prefix><owner pid>-<home key>-<random>`` (:func:`fresh_name`)."""
_JOIN_NAME = "roost-cgroup-join"
_JOIN_LOOP = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift'
_JOIN_SCRIPT = f'{_JOIN_LOOP}; exec "$@"'


def mounts(mountinfo: str = "/proc/self/mountinfo") -> list[tuple[str, str, set[str]]]:
    """``(mount point, fstype, super options)`` of every cgroup mount.

    A mount point's escapes (an octal escape for a space) are read back; bytes that are not UTF-8
    stay as the surrogates ``os`` functions take back to the same bytes.
    """
    found = []
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                    point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
                    found.append((point, rest[0], set(rest[2].split(","))))
    except OSError:
        pass
    return found


def own_cgroups() -> dict[str, str]:
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


def parent_dir(controller: Controller = "pids") -> tuple[str, Version] | None:
    """The directory to create call cgroups of ``controller`` in, and ``v1``/``v2``."""
    return _parent(controller, functools.partial(_delegates, controller))


def freezer_parent() -> tuple[str, Version] | None:
    """The directory to create freezer cgroups in, and ``v1``/``v2`` (v2 needs no controller)."""
    return _parent("freezer", _writable)


def _parent(controller: str, serves: Callable[[str], bool]) -> tuple[str, Version] | None:
    """Our cgroup in the v1 hierarchy of ``controller``, else the first v2 one that ``serves``."""
    own = own_cgroups()
    for mount, fstype, options in mounts():
        if fstype == "cgroup" and controller in options and controller in own:
            return os.path.join(mount, own[controller].lstrip("/")), "v1"
    for mount, fstype, _ in mounts():
        if fstype == "cgroup2" and "" in own:
            base = os.path.join(mount, own[""].lstrip("/"))
            if serves(base):
                return base, "v2"
    return None


def _delegates(controller: str, base: str) -> bool:
    """Whether the v2 cgroup ``base`` hands ``controller`` down to the cgroups made in it."""
    try:
        with open(os.path.join(base, "cgroup.subtree_control"), encoding="ascii") as f:
            return controller in f.read().split()
    except OSError:
        return False


def _writable(base: str) -> bool:
    """Whether this process may make cgroups in the v2 cgroup ``base`` (a freezer needs no more)."""
    return os.access(base, os.W_OK)


def read_control(path: str) -> str:
    """A cgroup file's text (bounded; cgroupfs files are the kernel's, never a tool's)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        return os.read(fd, 1 << 20).decode("ascii", "replace")
    finally:
        os.close(fd)


def tasks(path: str) -> list[int]:
    """The pids in the cgroup at ``path`` now (``[]`` when it cannot be read)."""
    try:
        return [int(x) for x in read_control(os.path.join(path, "cgroup.procs")).split()]
    except (OSError, ValueError):
        return []


def thaw(path: str) -> None:
    """Let a frozen cgroup's tasks run again (v1 or v2; nothing when not a freezer)."""
    for name, value in (("freezer.state", "THAWED"), ("cgroup.freeze", "0")):
        if os.path.exists(os.path.join(path, name)):
            with contextlib.suppress(OSError):
                write_control(path, name, value)


def kill_and_remove(path: str, timeout_s: float) -> bool:
    """SIGKILL every task of the cgroup at ``path`` (thawing it first) and remove it."""
    deadline = time.monotonic() + timeout_s
    while True:
        for pid in tasks(path):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        thaw(path)  # a frozen task dies of its SIGKILL only once thawed (cgroup v1)
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


def remove_stale(
    parent: str, *, any_owner: bool = False, wait_s: float = 1.0
) -> dict[str, list[int]]:
    """Kill what is left in this home's cgroups of processes that are gone, and remove them.

    A runner killed during a command, or while its MCP server was frozen, cannot remove its
    cgroups; the next one made under the same parent does. ``any_owner``: every cgroup of
    this home, whoever made it (a daemon's start: every process of the one before is gone).
    ``wait_s``: how long each may take to empty. Returns each removed cgroup of this home's
    name and the processes that were in it.

    Another home's cgroup (or one named before homes were in the name) whose owner is not
    seen here is removed only when empty, and nothing in it is ever killed: its owner may
    live in another pid namespace. So a home whose daemon never starts again (a temporary
    one) leaves no empty cgroups behind, and another home's runs are never touched.
    """
    removed: dict[str, list[int]] = {}
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    key = home_key()
    for name in names:
        owner, home = _owner(name)
        if owner is None or ((home != key or not any_owner) and os.path.exists(f"/proc/{owner}")):
            continue
        path = os.path.join(parent, name)
        held = tasks(path)
        if home != key:
            if not held:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
        elif kill_and_remove(path, wait_s):
            removed[name] = held
    return removed


def _owner(name: str) -> tuple[str | None, str]:
    """The owner pid and the home key in a cgroup name of ours (``(None, "")``: not ours)."""
    owner, _, rest = name.removeprefix(CGROUP_PREFIX).partition("-")
    if not name.startswith(CGROUP_PREFIX) or not owner.isdigit():
        return None, ""
    home, _, random = rest.partition("-")
    return owner, home if random else ""  # no random part: a name from before homes


def write_control(directory: str, name: str, value: str) -> None:
    """Write ``value`` to the control file ``name`` of the cgroup ``directory``."""
    with open(os.path.join(directory, name), "w", encoding="ascii") as f:
        f.write(value)


def make_cgroup(parent: str, name: str, files: list[tuple[str, str, bool]]) -> str:
    """Create ``parent/name`` (or reuse it: v2 holds every controller in one) and limit it."""
    path = os.path.join(parent, name)
    made = False
    try:
        os.mkdir(path, 0o755)
        made = True
    except FileExistsError:
        pass
    try:
        for file, value, required in files:
            try:
                write_control(path, file, value)
            except OSError:
                if required:
                    raise
    except OSError:
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(path)
        raise
    return path


def join_argv(*groups: Joinable, first: str | None = None) -> list[str]:
    """The prefix that moves the process into every one of ``groups`` before it execs.

    ``first``: shell commands it runs once it joined, just before the exec (the rlimits'
    ``ulimit``: after the join, so the join's own redirections run without them, as with
    ``prlimit`` after it); when one fails, it exits 125 as a failed join does.
    """
    files = [f for group in groups for f in group.procs_files]
    script = _JOIN_SCRIPT if first is None else f'{_JOIN_LOOP}; {first} || exit 125; exec "$@"'
    return ["/bin/sh", "-c", script, _JOIN_NAME, *files, "--"]


WARM_PERIOD_S = 0.002
"""How often :func:`keep_warm` takes the migration lock again (well inside its ~10 ms window)."""
WARM_LIMIT_S = 0.5
"""How long :func:`keep_warm` goes on at most when the join never comes (a failed spawn)."""


def keep_warm(
    directory: str, joined: Callable[[], bool], stop: threading.Event
) -> threading.Thread | None:
    """Keep the kernel's cgroup migration lock warm until a join shell has joined.

    Every move into a cgroup (a write to a ``cgroup.procs`` file) takes one global lock of
    the kernel (``cgroup_threadgroup_rwsem``), and taking it after a pause waits for an RCU
    grace period: the join shell's write cost 8 ms on a quiet host with cgroup v1, 13 ms
    under load, most of a sandbox's start. Taken again within ~10 ms of its last release
    it costs 0.1 ms. So while the launcher prepares a process, this thread moves the daemon
    into the cgroup it is already in (``directory``, its own: no membership changes), then
    again every :data:`WARM_PERIOD_S`, until ``joined()`` (the new cgroup has a member),
    ``stop`` is set, or :data:`WARM_LIMIT_S` passed. A write that is refused ends it: the
    join then pays the grace period itself, as it did before.

    Nothing is warmed (None) unless this process is a member of ``directory`` already (a
    cgroup mount that binds a subtree could make ``directory`` another cgroup, and the
    writes would move the daemon), or when no thread can be started.
    """
    try:
        if os.getpid() not in tasks(directory):
            return None
        thread = threading.Thread(
            target=_warm,
            args=(os.path.join(directory, "cgroup.procs"), joined, stop),
            name="roost-cgroup-warm",
            daemon=True,
        )
        thread.start()
    except (OSError, ValueError, RuntimeError):
        return None
    return thread


def _warm(procs: str, joined: Callable[[], bool], stop: threading.Event) -> None:
    deadline = time.monotonic() + WARM_LIMIT_S
    pid = str(os.getpid()).encode("ascii")
    while True:
        try:
            fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        except OSError:
            return
        if stop.wait(WARM_PERIOD_S) or joined() or time.monotonic() > deadline:
            return


class Joinable(Protocol):
    """A cgroup a process can join: a ``ToolCgroup`` or a ``FreezerCgroup``."""

    @property
    def procs_files(self) -> list[str]:
        """The files a process writes its pid to in order to join."""
        ...


def home_key() -> str:
    """Which ``ROOST_HOME`` a cgroup belongs to, as its name says it: a hash of the home's path.

    Every daemon on the machine makes its cgroups under the same parents; the key lets one
    find the cgroups its home's killed daemon left without touching another home's.
    """
    return hashlib.blake2b(os.fsencode(roost_home.home()), digest_size=6).hexdigest()


def fresh_name() -> str:
    """A new cgroup's name: the prefix, this process's pid (its owner), the home, a random part."""
    return f"{CGROUP_PREFIX}{os.getpid()}-{home_key()}-{uuid.uuid4().hex[:12]}"
