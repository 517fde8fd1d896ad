"""Shell completion: ``roost completion SHELL`` and what a TAB offers.

The shell runs ``roost`` on every TAB with ``_ARGCOMPLETE`` set; ``runtime.cli.app`` then
builds the parser (the thin client's modules only: no daemon, journal or logging stack) and
hands it to ``argcomplete``. Positional ``PROJECT`` and ``CONV`` arguments (and
``--conversation``) are completed with the ids the daemon knows: ``list_projects``, and the
``diagnostics`` of the project already typed, asked with a short timeout
(:data:`ASK_TIMEOUT_S`, or ``ROOST_COMPLETION_TIMEOUT_S`` seconds); with no daemon, or one
that does not answer in time, they offer nothing and say nothing.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "ASK_TIMEOUT_S",
    "SHELLS",
    "ask_timeout_s",
    "attach_id_completers",
    "cmd_completion",
    "conversation_ids",
    "project_ids",
]

SHELLS = ("bash", "zsh", "fish")
"""Shells ``roost completion`` writes a script for."""

ASK_TIMEOUT_S = 2.0
"""The longest a TAB waits for the daemon's ids by default; then it offers nothing."""


def ask_timeout_s() -> float:
    """``ROOST_COMPLETION_TIMEOUT_S`` when it is a positive number, else :data:`ASK_TIMEOUT_S`."""
    try:
        value = float(os.environ.get("ROOST_COMPLETION_TIMEOUT_S", ""))
    except ValueError:
        return ASK_TIMEOUT_S
    return value if value > 0 and math.isfinite(value) else ASK_TIMEOUT_S


def cmd_completion(ns: argparse.Namespace) -> int:
    """``roost completion bash|zsh|fish``: the script that makes the shell complete ``roost``."""
    from argcomplete.shell_integration import shellcode  # noqa: PLC0415 - only here

    sys.stdout.write(shellcode(["roost"], shell=ns.shell))
    sys.stdout.flush()
    return 0


def _ask(home: str | None, question: Callable[[Any], list[str]]) -> list[str]:
    """``question(client)`` within :func:`ask_timeout_s`; ``[]`` on any failure or timeout.

    The daemon is asked on a daemon thread: one that hangs is left behind, and the process
    (argcomplete ends it with ``os._exit``) does not wait for it.
    """
    import threading  # noqa: PLC0415 - on a TAB only

    answer: list[str] = []
    timeout_s = ask_timeout_s()

    def run() -> None:
        from runtime.client.connection import Client  # noqa: PLC0415 - only on a TAB

        try:
            with Client.connect(home, timeout_s=timeout_s) as client:
                answer.extend(question(client))
        except Exception:  # a TAB says nothing when the daemon cannot answer
            answer.clear()

    thread = threading.Thread(target=run, name="roost-complete", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return [] if thread.is_alive() else list(answer)


def project_ids(home: str | None) -> list[str]:
    """The ids of the projects the daemon of ``home`` runs (``[]`` when it does not answer)."""
    return _ask(
        home, lambda c: [str(p["project_id"]) for p in c.list_projects() if p.get("project_id")]
    )


def conversation_ids(home: str | None, project_id: str) -> list[str]:
    """The conversation ids of ``project_id`` (``[]`` when the daemon does not answer)."""
    return _ask(
        home, lambda c: [str(i) for i in c.diagnostics(project_id).get("conversations") or []]
    )


def _home(parsed: argparse.Namespace) -> str | None:
    home = getattr(parsed, "home", None)
    return home if isinstance(home, str) else None


def _complete_project(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    return [i for i in project_ids(_home(parsed_args)) if i.startswith(prefix)]


def _complete_conversation(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    project = getattr(parsed_args, "project", None)
    if not isinstance(project, str):
        return []
    return [i for i in conversation_ids(_home(parsed_args), project) if i.startswith(prefix)]


_COMPLETERS: dict[str, Callable[..., list[str]]] = {
    "project": _complete_project,
    "conversation": _complete_conversation,
}


def attach_id_completers(parser: argparse.ArgumentParser) -> None:
    """Give every ``project`` and ``conversation`` argument, in every subcommand, its completer.

    Found by ``dest``, so a command added later gets them without a line of its own.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                attach_id_completers(sub)
        elif action.dest in _COMPLETERS:
            setattr(action, "completer", _COMPLETERS[action.dest])  # noqa: B010 - argcomplete's hook
