"""One connection to an external MCP server (``mcp_servers``), on the official ``mcp`` SDK.

**Confinement.** A stdio server is started by the one launcher that starts commands
(:class:`runtime.guard.sandbox.server_process.ServerProcess`): the project's command view
(:func:`runtime.tools.command.command_view`: the system read-only, the project root and a
scratch home writable, ``.roost`` and git's control files read-only, sensitive files
hidden, nothing of ``$HOME`` or ``ROOST_HOME``), its own network namespace unless
``network_egress_policy`` is ``allow``, the rlimits, a ``pids`` cgroup holding its whole
tree to ``tool_max_processes`` and a freezer cgroup, and a cleared environment holding only
:func:`runtime.guard.commands.controls.build_env`'s base plus the entry's ``env`` keys
``tool_env_allowlist`` lets through. Without bubblewrap the server is not started
(``isolation_unavailable``). The SDK's ``ClientSession`` talks to its pipes through
:func:`runtime.tools.mcp_client.pipe.pipe_streams`. An HTTP server's URL is judged by the egress
policy (:func:`runtime.guard.network.egress.judge_target`, then its addresses by
:func:`~runtime.guard.network.egress.resolve_and_check`) before any connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

import msgspec

from runtime.guard.commands.controls import build_env
from runtime.guard.network.egress import (
    NetworkPolicy,
    denial_error,
    judge_target,
    resolve_and_check,
)
from runtime.guard.review.leftovers import ChangeReport
from runtime.guard.review.run_ledger import RunLabel
from runtime.guard.sandbox.launcher import Limits
from runtime.guard.sandbox.layers import View, probe_layers, require_confinement
from runtime.guard.sandbox.server_process import SERVER_CPU_SECONDS, ServerProcess
from runtime.option_table import RuntimeOptions
from runtime.tools.command import command_view
from runtime.tools.mcp_client.failure import start_failure
from runtime.tools.mcp_client.pipe import pipe_streams

__all__ = ["Connection", "StdioSpec", "check_url", "stdio_spec"]


class StdioSpec(msgspec.Struct, frozen=True, kw_only=True):
    """How a stdio server is started: its argv, view, environment and limits."""

    argv: list[str]
    """The server's own command (``mcp_servers[].command``)."""
    view: View
    """What it sees: the project's command view."""
    env: dict[str, str]
    """Its whole environment (cleared, then the base and the allowed keys)."""
    allow_network: bool
    """Whether it shares the host's network (``network_egress_policy: allow``)."""
    max_processes: int
    """``tool_max_processes``: tasks of its whole tree at once."""
    memory_bytes: int | None = None
    """``tool_max_memory_bytes``: memory of its whole tree."""
    cpu_cores: float | None = None
    """``tool_cpu_cores``: CPU of its whole tree."""


def stdio_spec(
    entry: Mapping[str, Any], root: str, options: Mapping[str, Any], home: str
) -> StdioSpec:
    """The confinement of a stdio server (see the module docstring); ``ToolError`` if refused."""
    require_confinement(probe_layers())
    settings = RuntimeOptions.of(options)
    env = build_env(entry.get("env"), list(settings.tool_env_allowlist), home=home)
    real_root = os.path.realpath(root)
    return StdioSpec(
        argv=[str(a) for a in entry["command"]],
        view=command_view(settings, real_root, home, real_root),
        env=dict(env),
        allow_network=settings.network_egress_policy == "allow",
        max_processes=settings.tool_max_processes,
        memory_bytes=settings.tool_max_memory_bytes,
        cpu_cores=settings.tool_cpu_cores,
    )


def check_url(url: str, options: Mapping[str, Any]) -> None:
    """Refuse an HTTP server's URL the egress policy does not let through (``ToolError``)."""
    policy = NetworkPolicy.from_options(options)
    decision = judge_target(policy, url)
    if not decision.allowed:
        raise denial_error(decision)
    assert decision.host is not None and decision.port is not None
    resolve_and_check(policy, decision.host, decision.port, target=url)


_HOME_PREFIX = "roost-mcp-home-"


def _scratch_home() -> str:
    """A new scratch home named after this process; those of dead processes are removed.

    A process that runs tools can end without leaving its sessions (an actor stopped, a
    crash), so its servers' homes are swept by the next process that starts one.
    """
    tmp = tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for name in os.listdir(tmp):
            owner = name[len(_HOME_PREFIX) :].partition("-")[0]
            if name.startswith(_HOME_PREFIX) and owner.isdigit() and not _running(int(owner)):
                shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{_HOME_PREFIX}{os.getpid()}-")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class Connection:
    """One live connection, held open by a task on the loop until :meth:`close`."""

    def __init__(
        self,
        entry: Mapping[str, Any],
        root: str,
        options: Mapping[str, Any],
        *,
        project_id: str = "",
    ):
        self.entry = dict(entry)
        self.root = root
        self.options = dict(options)
        self.project_id = project_id or "local"
        """Names the durable record of a stdio server's life (reviewed after a crash)."""
        self.session: Any = None
        self.server: ServerProcess | None = None
        """The stdio server's process (None for HTTP)."""
        self.changes: list[ChangeReport] = []
        """The post-run check's reports when the server stopped."""
        self.closing = asyncio.Event()
        """Set by :meth:`close`: the session ends and the server stops."""
        self.task: asyncio.Task[None] | None = None

    @property
    def removed(self) -> list[str]:
        """What the post-run checks at the server's stop took out of the root (absolute)."""
        return [os.path.join(r.root, q.path) for r in self.changes for q in r.quarantined]

    async def open(self) -> None:
        """Start the server and initialize the session; raise what went wrong."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.task = asyncio.create_task(self._hold(ready))
        await ready

    def _stop_server(self) -> None:
        if self.server is not None:
            report = self.server.stop()
            if report is not None:
                self.changes.append(report)

    async def _hold(self, ready: asyncio.Future[None]) -> None:
        from mcp.client.session import ClientSession  # noqa: PLC0415

        home = _scratch_home()
        try:
            async with contextlib.AsyncExitStack() as stack:
                if "url" in self.entry:
                    from mcp.client.streamable_http import (  # noqa: PLC0415
                        streamable_http_client,
                    )

                    check_url(self.entry["url"], self.options)
                    streams = await stack.enter_async_context(
                        streamable_http_client(self.entry["url"])
                    )
                else:
                    spec = stdio_spec(self.entry, self.root, self.options, home)
                    # Started on the loop's thread, which lives as long as the process:
                    # the parent-death signal follows the thread that started a child.
                    self.server = ServerProcess.start(
                        spec.argv,
                        view=spec.view,
                        env=spec.env,
                        allow_network=spec.allow_network,
                        limits=Limits(
                            cpu_seconds=SERVER_CPU_SECONDS,
                            max_processes=spec.max_processes,
                            memory_bytes=spec.memory_bytes,
                            cpu_cores=spec.cpu_cores,
                        ),
                        label=RunLabel(
                            project_id=self.project_id,
                            call_id=f"mcp-server-{self.entry['name']}",
                            tool=f"mcp.{self.entry['name']}",
                        ),
                    )
                    stack.callback(self._stop_server)
                    streams = await stack.enter_async_context(
                        pipe_streams(self.server.stdin_fd, self.server.stdout_fd)
                    )
                read, write = streams[0], streams[1]
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                self.session = session
                ready.set_result(None)
                await self.closing.wait()
        except BaseException as e:
            if not ready.done():
                ready.set_exception(self._start_failure(e))
            if not isinstance(e, Exception):
                raise
        finally:
            self.session = None
            self._stop_server()
            shutil.rmtree(home, ignore_errors=True)

    def _start_failure(self, error: BaseException) -> Exception:
        """What ``open`` raises: the real cause, the server's exit status and stderr tail."""
        if isinstance(error, asyncio.CancelledError):
            return RuntimeError(str(error) or "the server's start was cancelled")
        report = {} if self.server is None else self.server.exit_report()
        argv = [str(a) for a in self.entry.get("command") or ()]
        return start_failure(str(self.entry["name"]), error, report, argv)

    async def close(self) -> None:
        """Leave the session and stop the server."""
        self.closing.set()
        if self.task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.task, 5.0)
