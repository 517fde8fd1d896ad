"""``chaos``: kill hosts and the Journal, crash conversations and tool runners, under load.

What dies. A project's Conversations, Policy and ToolRunner are entities hosted in the
project's process (``actors.hosting``); the processes are the daemon's, the Supervisor,
the Journal and one host per project. The monkey SIGKILLs hosts (``host``: the project
and every entity in it come back by replay) and the Journal (``journal``), and crashes
single entities through the daemon's ``inject_fault`` (``conversation``, ``toolrunner``:
the host restarts that entity by replay and leaves its neighbours alone; allowed only by a
daemon started with ``ROOST_FAULT_INJECTION=1``, which ``roost soak --scenario chaos``
does for the daemon it starts).

Telling actor processes apart. Every actor is a fork of the daemon with the daemon's
command line, so the harness works it out, in this order of preference:

1. the daemon's ``actor_pids`` operation, if the backend has one
   (``[{pid, role, ...}]``);
2. process names (``/proc/PID/comm``) starting with ``roost-`` (``roost-journal``...),
   if actors name themselves;
3. the shape of the tree (``tree``): the Journal is the actor process that holds
   ``journal.sqlite`` open; its parent is the Supervisor; the Supervisor's other children
   are the projects' hosts. A killed process's replacement is the new child that appears
   under the same parent, and inherits the role.

The monkey kills one process at a time and waits for its replacement before the next
kill, choosing targets it has not killed within the restart period, so a run exercises
recovery rather than escalation.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable

import psutil

from runtime.client import Client
from runtime.daemon import daemon_pid, daemon_processes
from runtime.errors import RoostError

__all__ = ["ROLES", "ChaosMonkey", "ProcessRoles", "identify_roles"]

ROLES = ("conversation", "toolrunner", "host", "journal")
"""What the monkey kills: hosted entities (crashed) and processes (SIGKILLed)."""

ENTITY_ROLES = frozenset({"conversation", "toolrunner"})
"""Roles that are entities in a host: crashed through ``inject_fault``."""
_PROCESS_ROLE = {"host": "project", "journal": "journal"}
"""The process role each killed role is found under."""

_WEIGHTS = {"conversation": 5, "toolrunner": 2, "host": 2, "journal": 2}
_QUIET_S = 5.5  # the default restart_period_ms (5000) and a margin
_REPLACEMENT_TIMEOUT_S = 30.0


class ProcessRoles:
    """The role of each actor process of one daemon, as far as it could be told."""

    def __init__(self, roles: dict[int, str], parents: dict[int, int], method: str) -> None:
        self.roles = roles
        """pid → ``journal``, ``supervisor``, ``project`` (a project's host)."""
        self.parents = parents
        """pid → parent pid, for the processes in :attr:`roles`."""
        self.method = method
        """``actor_pids``, ``names`` or ``tree``."""

    def pids(self, role: str) -> list[int]:
        """Live pids with ``role``, oldest first."""
        return sorted(pid for pid, r in self.roles.items() if r == role)


def _snapshot(home: str) -> dict[int, psutil.Process]:
    main = daemon_pid(home)
    procs = {}
    for proc in daemon_processes(home):
        if proc.pid == main:
            continue
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE:
                procs[proc.pid] = proc
    return procs


def _from_op(home: str) -> ProcessRoles | None:
    try:
        with Client.connect(home) as client:
            answer = client.call("actor_pids")
    except RoostError:
        return None
    roles: dict[int, str] = {}
    parents: dict[int, int] = {}
    for item in answer if isinstance(answer, list) else []:
        if isinstance(item, dict) and isinstance(item.get("pid"), int):
            roles[item["pid"]] = str(item.get("role"))
            if isinstance(item.get("parent_pid"), int):
                parents[item["pid"]] = item["parent_pid"]
    return ProcessRoles(roles, parents, "actor_pids") if roles else None


def _from_names(procs: dict[int, psutil.Process]) -> ProcessRoles | None:
    roles: dict[int, str] = {}
    parents: dict[int, int] = {}
    for pid, proc in procs.items():
        with contextlib.suppress(psutil.Error):
            name = proc.name()
            if not name.startswith("roost-"):
                continue
            suffix = name.removeprefix("roost-")
            for role in ("journal", "supervisor", "project", "policy", "toolrunner", "conv"):
                if suffix.startswith(role[:8]):
                    roles[pid] = "conversation" if role == "conv" else role
                    parents[pid] = proc.ppid()
    return ProcessRoles(roles, parents, "names") if roles else None


def _holds_journal(proc: psutil.Process, journal_path: str) -> bool:
    with contextlib.suppress(psutil.Error):
        return any(f.path == journal_path for f in proc.open_files())
    return False


def _status_actors(home: str) -> dict[str, int]:
    """The pids the daemon's ``status`` names (``actors: {supervisor, journal}``), if any."""
    try:
        with Client.connect(home) as client:
            actors = client.status().get("actors")
    except RoostError:
        return {}
    if not isinstance(actors, dict):
        return {}
    return {str(k): v for k, v in actors.items() if isinstance(v, int)}


def _from_tree(home: str, procs: dict[int, psutil.Process]) -> ProcessRoles:
    parents: dict[int, int] = {}
    created: dict[int, float] = {}
    for pid, proc in procs.items():
        with contextlib.suppress(psutil.Error):
            parents[pid] = proc.ppid()
            created[pid] = proc.create_time()
    roles: dict[int, str] = {}
    named = _status_actors(home)
    journal = named.get("journal")
    if journal not in procs:
        journal_path = os.path.join(os.path.realpath(home), "journal.sqlite")
        journal = next((p for p, proc in procs.items() if _holds_journal(proc, journal_path)), None)
    if journal is None:
        return ProcessRoles(roles, parents, "tree")
    roles[journal] = "journal"
    supervisor = named.get("supervisor") or parents.get(journal)
    if supervisor is None:
        return ProcessRoles(roles, parents, "tree")
    roles[supervisor] = "supervisor"
    for project in [p for p, parent in parents.items() if parent == supervisor and p != journal]:
        roles[project] = "project"
    return ProcessRoles(roles, parents, "tree")


def identify_roles(home: str) -> ProcessRoles:
    """Tell the daemon's actor processes apart (see the module docstring)."""
    found = _from_op(home)
    if found is not None:
        return found
    procs = _snapshot(home)
    return _from_names(procs) or _from_tree(home, procs)


class ChaosMonkey:
    """A thread that kills actor processes of the daemon of ``home`` at random."""

    def __init__(
        self,
        home: str,
        *,
        min_kills: int,
        interval_s: float,
        seed: int,
        on_kill: Callable[[str, int], None] | None = None,
    ) -> None:
        self.home = home
        self.min_kills = min_kills
        self.interval_s = interval_s
        self.seed = seed
        self.on_kill = on_kill
        self.kills: list[tuple[str, int]] = []
        """``(role, pid)`` of every kill, in order."""
        self.problems: list[str] = []
        """What went wrong on the monkey's side (no target, no replacement...)."""
        self.method = "none"
        """How roles were told apart."""
        self.log: list[str] = []
        """One line per kill: when, what, and how long its replacement took."""
        self.fatal: str | None = None
        """Set when the Journal was not replaced: nothing can commit, the monkey stops."""
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._roles: ProcessRoles | None = None
        self._last_kill: dict[int, float] = {}
        self._last_crash: dict[tuple[str, str], float] = {}
        self.entities_refused = False
        """The daemon refused ``inject_fault``: only processes are killed."""
        self._started = time.monotonic()

    @property
    def done(self) -> bool:
        """True once at least ``min_kills`` processes were killed."""
        return len(self.kills) >= self.min_kills

    def start(self) -> None:
        """Identify the actor processes now (before any kill) and start killing."""
        self._roles = identify_roles(self.home)
        self.method = self._roles.method
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="soak-chaos", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop killing and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def by_role(self) -> dict[str, int]:
        """Kills per role."""
        counts = dict.fromkeys(ROLES, 0)
        for role, _ in self.kills:
            counts[role] = counts.get(role, 0) + 1
        return counts

    # --- the loop -----------------------------------------------------------------------

    def _run(self) -> None:
        plan = list(ROLES)  # one of each role first, then weighted at random
        self._random.shuffle(plan)
        failures = 0
        while not self._stop.wait(self.interval_s) and self.fatal is None:
            role = plan.pop() if plan else self._weighted()
            try:
                killed = self._kill_one(role)
            except Exception as e:  # never let the monkey take the harness down
                self.problems.append(f"chaos: {type(e).__name__}: {e}")
                killed = False
            failures = 0 if killed else failures + 1
            if failures >= 20:
                self.problems.append("chaos: gave up after 20 attempts without a target")
                return

    def _weighted(self) -> str:
        roles = list(_WEIGHTS)
        return self._random.choices(roles, weights=[_WEIGHTS[r] for r in roles])[0]

    def _crash_one(self, role: str) -> bool:
        """Crash one hosted entity of ``role`` through ``inject_fault``."""
        now = time.monotonic()
        with Client.connect(self.home, timeout_s=30) as client:
            targets: list[tuple[str, str]] = []
            for project in client.list_projects():
                project_id = str(project.get("project_id", ""))
                if not project_id:
                    continue
                if now - self._last_crash.get((project_id, "*"), -1e9) <= _QUIET_S:
                    continue  # one crash per host per restart period: no escalation
                if role == "toolrunner":
                    targets.append((project_id, "toolrunner"))
                    continue
                live = client.diagnostics(project_id).get("active_conversations") or []
                targets += [(project_id, f"conversation:{c}") for c in live]
            if not targets:
                return False
            project_id, target = self._random.choice(sorted(targets))
            try:
                client.call("inject_fault", {"project_id": project_id, "target": target})
            except RoostError as e:
                if e.details.get("reason") == "fault_injection_disabled":
                    self.entities_refused = True
                    self.problems.append(f"chaos: {e}")
                    return False
                return False  # e.g. the conversation passivated meanwhile
            host = int(client.diagnostics(project_id).get("actors", {}).get("project") or 0)
        self._last_crash[(project_id, "*")] = now
        self.kills.append((role, host))
        if self.on_kill is not None:
            self.on_kill(role, host)
        self.log.append(f"+{now - self._started:.1f}s {role} {target} of {project_id}: crashed")
        return True

    def _kill_one(self, role: str) -> bool:
        if role in ENTITY_ROLES:
            return False if self.entities_refused else self._crash_one(role)
        roles = self._roles
        assert roles is not None
        roles = self._refresh(keep=roles)
        now = time.monotonic()
        candidates = [
            pid
            for pid in roles.pids(_PROCESS_ROLE[role])
            if now - self._last_kill.get(pid, -1e9) > _QUIET_S and _alive(pid)
        ]
        if not candidates:
            return False
        pid = self._random.choice(candidates)
        parent = roles.parents.get(pid)
        before = set(self._children(parent)) if parent is not None else set()
        killed_at = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self.kills.append((role, pid))
        self._last_kill[pid] = killed_at
        if self.on_kill is not None:
            self.on_kill(role, pid)
        replacement = self._await_replacement(parent, before)
        roles.roles.pop(pid, None)
        when = f"+{killed_at - self._started:.1f}s {role} pid {pid}"
        if replacement is None and self._stop.is_set():
            self.log.append(f"{when}: the run ended before a replacement was seen")
        elif replacement is None:
            self.log.append(f"{when}: not replaced within {_REPLACEMENT_TIMEOUT_S:g} s")
            self.problems.append(
                f"chaos: no replacement appeared for {role} pid {pid} under pid {parent} "
                f"within {_REPLACEMENT_TIMEOUT_S:g} s (children now {self._children(parent)})"
            )
            if role == "journal":
                self.fatal = (
                    f"the Journal (pid {pid}) was SIGKILLed and no new Journal appeared "
                    f"within {_REPLACEMENT_TIMEOUT_S:g} s: nothing can be committed any more"
                )
        else:
            waited = time.monotonic() - killed_at
            self.log.append(f"{when}: replaced by pid {replacement} after {waited:.2f} s")
            roles.roles[replacement] = _PROCESS_ROLE[role]
            if parent is not None:
                roles.parents[replacement] = parent
            self._last_kill[replacement] = time.monotonic()
        return True

    def _refresh(self, keep: ProcessRoles) -> ProcessRoles:
        """Look at the processes again before a kill.

        With ``actor_pids`` or names the daemon's answer is the truth. With the tree, what
        the monkey learned wins: dead pids are dropped and the Journal is found again; a
        new child of the Supervisor is a (restarted) project's host.
        """
        fresh = identify_roles(self.home)
        if fresh.method != "tree":
            self._roles = fresh
            return fresh
        for pid in [p for p in keep.roles if not _alive(p)]:
            keep.roles.pop(pid)
        for pid in [p for p, r in keep.roles.items() if r == "journal"]:
            keep.roles.pop(pid)
        for pid, guess in fresh.roles.items():
            if pid in keep.roles and guess != "journal":
                continue
            keep.roles[pid] = guess
            keep.parents[pid] = fresh.parents.get(pid, 0)
        return keep

    def _children(self, parent: int | None) -> list[int]:
        if parent is None:
            return []
        with contextlib.suppress(psutil.Error):
            return [c.pid for c in psutil.Process(parent).children()]
        return []

    def _await_replacement(self, parent: int | None, before: set[int]) -> int | None:
        if parent is None:
            return None
        deadline = time.monotonic() + _REPLACEMENT_TIMEOUT_S
        while time.monotonic() < deadline and not self._stop.is_set():
            fresh = [p for p in self._children(parent) if p not in before and _alive(p)]
            if fresh:
                return min(fresh)
            time.sleep(0.01)
        return None


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
