"""Remote A2A agents as Roost tools: ``a2a.<agent>.send``.

:func:`a2a_tools` runs when the project's registry is built (project start): with ``a2a``
in ``protocol_allowlist``, it fetches every ``a2a_agents`` entry's agent card
(:func:`runtime.tools.a2a_client.listing.fetch_cards`) and makes each agent one tool named
:func:`tool_name`, described from its card (name, description, skills). An agent whose
card cannot be fetched (refused by the egress policy, unreachable, not an agent card) is
left out and named in the errors (``{type: "a2a_agent", key, reason}``, shown in
``project.assets_loaded``); the project still starts. Without ``a2a`` in
``protocol_allowlist`` no card is fetched and one error per agent says so.

A call runs :func:`call_a2a_agent` (a partial, so the registry stays picklable) in the
process that runs tools: :func:`runtime.tools.a2a_client.task.send_and_follow` on the SDK event
loop (:mod:`runtime.tools.sdk_loop`) with the call's remaining time. On a timeout or a
cancelled conversation the remote task is cancelled too (``tasks/cancel``), each step
recorded as ``a2a.task_updated``; a refused connection is ``security.network_denied`` and
the denial's code; an agent that goes away is ``tool_error {kind: a2a_connection_lost}``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from runtime.errors import ToolError
from runtime.guard.network.egress import NetworkPolicy, signal_for
from runtime.guard.network.pinning import denial_in
from runtime.option_table import RuntimeOptions
from runtime.tools.a2a_client.listing import fetch_cards
from runtime.tools.base import Built, LoadProblem, ToolContext, ToolFn, ToolSpec, remote_tools
from runtime.tools.sdk_loop import short_error, submit

if TYPE_CHECKING:  # the SDK is imported where a call runs, not where the registry is built
    from runtime.tools.a2a_client.task import A2AResult, Delegation

__all__ = [
    "CANCEL_TIMEOUT_S",
    "INPUT_SCHEMA",
    "PREFIX",
    "SETTLE_S",
    "a2a_tools",
    "call_a2a_agent",
    "describe_card",
    "tool_name",
]

PREFIX = "a2a."
"""Every remote agent's tool name starts with it."""

SETTLE_S = 0.5
"""Seconds a timed-out or cancelled call still waits to learn its remote task's id."""

CANCEL_TIMEOUT_S = 1.2
"""Seconds a remote cancel may take; with :data:`SETTLE_S`, within the runner's grace."""

INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "description": "The message to send to the agent."},
        "context_id": {
            "type": "string",
            "description": "The context_id of an earlier result, to continue that conversation.",
        },
        "task_id": {
            "type": "string",
            "description": "The task_id of a result in state input_required, to answer it.",
        },
    },
    "required": ["text"],
    "additionalProperties": False,
}
"""The input of every ``a2a.<agent>.send``."""

_MAX_DESCRIPTION = 1024


def tool_name(agent: str) -> str:
    """The Roost name of agent ``agent``'s tool: ``a2a.<agent>.send``."""
    return f"{PREFIX}{agent}.send"


def describe_card(agent: str, card: Mapping[str, Any]) -> str:
    """The tool description from an agent card's JSON form: who it is and its skills."""
    name = str(card.get("name") or agent)
    about = str(card.get("description") or "").strip()
    lines = [f"Delegate a task to the remote A2A agent {name!r}" + (f": {about}" if about else ".")]
    skills = [s for s in card.get("skills") or () if isinstance(s, Mapping)]
    if skills:
        lines.append("Skills:")
        for skill in skills:
            label = str(skill.get("name") or skill.get("id") or "?")
            said = str(skill.get("description") or "").strip()
            lines.append(f"- {label}" + (f": {said}" if said else ""))
    lines.append(
        "Returns the remote task's state, text and artifacts; pass its context_id to continue."
    )
    text = "\n".join(lines)
    return text if len(text) <= _MAX_DESCRIPTION else text[: _MAX_DESCRIPTION - 3] + "..."


def _cancel_remote(card: Any, policy: NetworkPolicy, delegation: Delegation, why: str) -> None:
    """Cancel the remote task after a timeout or a cancel; record each step."""
    from runtime.tools.a2a_client.task import cancel_task  # noqa: PLC0415

    if not delegation.task_id or not delegation.waiting:
        return
    delegation.note("cancel_requested", why)
    try:
        state = submit(
            cancel_task(card, policy, delegation.task_id, CANCEL_TIMEOUT_S),
            CANCEL_TIMEOUT_S,
            threading.Event(),
            f"A2A agent {delegation.agent} (tasks/cancel)",
        )
    except Exception as e:
        delegation.note("cancel_failed", short_error(e))
        return
    delegation.state = state
    delegation.note(state, "tasks/cancel answered")


def _too_large(
    error: ToolError, ctx: ToolContext, delegation: Delegation, cancel: _Cancel
) -> ToolError:
    """The answer outgrew the cap: the remote task is cancelled, the error names it."""
    cancel(delegation, error.code)
    task_id = delegation.task_id or None
    return ToolError(
        error.code, error.message, **error.details, agent=delegation.agent, task_id=task_id
    )


def _stopped(
    error: ToolError, ctx: ToolContext, delegation: Delegation, cancel: _Cancel
) -> ToolError:
    """Out of time or cancelled: the remote task is cancelled and the error says how far."""
    cancel(delegation, error.code)
    agent, task_id = delegation.agent, delegation.task_id or None
    ms = round(ctx.timeout_s * 1000)
    what = (
        f"A2A agent {agent} did not finish within {ms} ms"
        if error.code == "timeout"
        else f"the call to A2A agent {agent} was cancelled"
    )
    if task_id is not None:
        what += f"; its task {task_id} was " + (
            "cancelled" if delegation.state == "canceled" else "asked to cancel"
        )
    fields = {"timeout_ms": ms} if error.code == "timeout" else {}
    return ToolError(error.code, what, **fields, agent=agent, task_id=task_id)


def _relabelled(
    error: ToolError, ctx: ToolContext, delegation: Delegation, cancel: _Cancel
) -> ToolError:
    """Any other tool error: the same, naming the agent."""
    return ToolError(error.code, error.message, **{**error.details, "agent": delegation.agent})


_Cancel = Callable[["Delegation", str], None]
_TOOL_FAILURES: dict[str, Callable[[ToolError, ToolContext, Delegation, _Cancel], ToolError]] = {
    "output_too_large": _too_large,
    "timeout": _stopped,
    "conversation_cancelled": _stopped,
}
"""The tool errors that end a call with more than the agent's name added, by code."""


def _failure(
    error: Exception,
    ctx: ToolContext,
    delegation: Delegation,
    cancel: Callable[[Delegation, str], None],
) -> ToolError:
    """The call's error for what stopped it; a timeout or a cancel cancels the remote task."""
    agent = delegation.agent
    task_id = delegation.task_id or None
    denial = denial_in(error)
    if denial is not None:  # a request or a connection the egress policy refused
        ctx.signals.append(signal_for(denial.decision, tool_name(agent), ctx.call_id))
        denial.details["agent"] = agent
        return denial
    if isinstance(error, ToolError):
        return _TOOL_FAILURES.get(error.code, _relabelled)(error, ctx, delegation, cancel)
    from a2a.client.errors import A2AClientError  # noqa: PLC0415 - loaded by the call already
    from a2a.utils.errors import A2AError  # noqa: PLC0415

    if isinstance(error, A2AError) and not isinstance(error, A2AClientError):
        where = f" about task {task_id}" if task_id else ""
        return ToolError(
            "tool_error",
            f"A2A agent {agent} answered with an error{where}: {short_error(error)}",
            kind="a2a_error",
            agent=agent,
            task_id=task_id,
        )
    lost = task_id is not None
    where = f"went away during task {task_id}" if lost else "could not be reached"
    return ToolError(
        "tool_error",
        f"A2A agent {agent} {where}: {short_error(error)}",
        kind="a2a_connection_lost" if lost else "a2a_unreachable",
        agent=agent,
        task_id=task_id,
    )


def call_a2a_agent(
    entry: Mapping[str, Any],
    card_json: Mapping[str, Any],
    ctx: ToolContext,
    args: Mapping[str, Any],
) -> A2AResult:
    """Send ``args`` to agent ``entry`` and follow its task; the result or ``ToolError``."""
    from runtime.tools.a2a_client.task import Delegation, card_from_json, send_and_follow  # noqa: PLC0415

    agent = str(entry["name"])
    card = card_from_json(card_json)
    policy = NetworkPolicy.from_options(ctx.options)
    delegation = Delegation(agent, ctx.call_id, ctx.signals)
    timeout_s = ctx.remaining_s()
    try:
        submit(
            send_and_follow(
                card,
                policy,
                delegation,
                args,
                timeout_s=timeout_s,
                max_bytes=ctx.settings.tool_max_output_bytes,
            ),
            timeout_s,
            ctx.cancelled,
            f"A2A agent {agent}",
            settled=lambda: bool(delegation.task_id) or not delegation.waiting,
            settle_s=SETTLE_S,
        )
    except Exception as e:
        failure = _failure(e, ctx, delegation, functools.partial(_cancel_remote, card, policy))
        if failure is e:
            raise
        raise failure from e
    result = delegation.result()
    if delegation.state in ("failed", "rejected", "canceled"):
        raise ToolError(
            "tool_error",
            f"A2A agent {agent}'s task {delegation.task_id} ended {delegation.state}"
            + (f": {result['text'][:500]}" if result["text"] else ""),
            kind="a2a_task_" + delegation.state,
            agent=agent,
            task_id=delegation.task_id,
            context_id=delegation.context_id or None,
        )
    return result


def a2a_tools(
    root: str, options: Mapping[str, Any]
) -> tuple[list[ToolSpec], dict[str, ToolFn], list[LoadProblem]]:
    """The tools of the project's ``a2a_agents``: ``(specs, fns, errors)`` (see module doc)."""
    del root  # remote agents see nothing of the project
    settings = RuntimeOptions.of(options)
    agents: list[Mapping[str, Any]] = list(settings.a2a_agents)
    return remote_tools(
        agents,
        "a2a",
        settings.protocol_allowlist,
        ("a2a_agent", "no card was fetched"),
        functools.partial(_agent_tools, agents, options),
    )


def _agent_tools(agents: list[Mapping[str, Any]], options: Mapping[str, Any]) -> Built:
    """One ``a2a.<agent>.send`` per agent whose card was fetched; a problem per other one."""
    fetched = fetch_cards(agents, options)
    specs: list[ToolSpec] = []
    fns: dict[str, ToolFn] = {}
    errors: list[LoadProblem] = []
    for entry in agents:
        agent = str(entry["name"])
        answer = fetched.get(agent) or {"error": {"message": "no answer"}}
        if "error" in answer:
            error = answer["error"]
            reason = f"{error.get('code', 'tool_error')}: {error.get('message', '')}"
            errors.append({"type": "a2a_agent", "key": agent, "reason": reason})
            continue
        name = tool_name(agent)
        specs.append(
            ToolSpec(
                name=name,
                description=describe_card(agent, answer["card"]),
                input_schema=INPUT_SCHEMA,
                network_capable=True,
            )
        )
        fns[name] = functools.partial(call_a2a_agent, dict(entry), answer["card"])
    return specs, fns, errors
