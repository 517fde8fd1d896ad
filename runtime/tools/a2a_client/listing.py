"""The agent cards of ``a2a_agents`` at project start, fetched in a short-lived child process.

:func:`fetch_cards` runs ``python -m runtime.tools.a2a_client.listing`` with the agents and the
options as JSON on stdin (:func:`runtime.tools.sdk_loop.child_answers`, as the MCP tool listing
does); the child fetches each agent's card with the SDK's ``A2ACardResolver`` through a
pinned client (:func:`runtime.guard.network.pinning.pinned_client`: the egress policy
judges the URL and the addresses before any byte is sent), and prints ``{name: {card:
{...}} | {error: {code, message}}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from runtime.guard.network.egress import NetworkPolicy
from runtime.guard.network.pinning import denial_in
from runtime.tools.sdk_loop import (
    ChildError,
    Failed,
    child_answers,
    child_main,
    gather_by_name,
    short_error,
)

__all__ = ["FETCH_TIMEOUT_S", "CardFetch", "fetch_cards"]

FETCH_TIMEOUT_S = 20.0
"""Seconds the card fetches at project start may take for all agents together."""


class CardFetch(TypedDict, total=False):
    """What the fetching child says of one agent: its card or an error."""

    card: dict[str, object]
    """The agent card in its JSON form (:func:`runtime.tools.a2a_client.task.card_to_json`)."""
    error: ChildError
    """Why there is none."""


async def _fetch_one(entry: Mapping[str, Any], options: Mapping[str, Any]) -> CardFetch:
    from a2a.client import A2ACardResolver  # noqa: PLC0415 - the SDK loads only where used

    from runtime.guard.network.pinning import pinned_client  # noqa: PLC0415
    from runtime.tools.a2a_client.task import BINDINGS, card_to_json, open_client  # noqa: PLC0415

    policy = NetworkPolicy.from_options(options)
    try:
        async with pinned_client(policy, timeout_s=FETCH_TIMEOUT_S) as http:
            card = await A2ACardResolver(http, str(entry["url"])).get_agent_card()
            try:
                open_client(card, http, streaming=False)
            except ValueError as e:
                message = (
                    f"the agent card offers no binding Roost speaks ({', '.join(BINDINGS)}): {e}"
                )
                return {"error": {"code": "tool_error", "message": message}}
        return {"card": card_to_json(card)}
    except Exception as e:
        denial = denial_in(e)
        if denial is not None:
            return {"error": {"code": denial.code, "message": denial.message}}
        return {"error": {"code": "tool_error", "message": short_error(e)}}


async def _fetch_all(request: Mapping[str, Any]) -> dict[str, CardFetch | Failed]:
    options = request["options"]
    return await gather_by_name(
        list(request["agents"]), lambda e: _fetch_one(e, options), FETCH_TIMEOUT_S, "agent card"
    )


def fetch_cards(agents: list[Mapping[str, Any]], options: Mapping[str, Any]) -> Mapping[str, Any]:
    """``{name: {card: {...}} | {error: {...}}}`` for every agent, from a child process."""
    request = {"agents": agents, "options": dict(options)}
    names = [str(a["name"]) for a in agents]
    return child_answers(__name__, request, names, FETCH_TIMEOUT_S + 10, "agent card fetch")


if __name__ == "__main__":
    child_main(_fetch_all)
