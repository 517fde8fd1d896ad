"""Every event type declares what the incident views need (``events.facts``), and it holds."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from events.catalog import PAYLOAD_TYPES, facts_of
from events.facts import SECTIONS, STAGES, EventFacts, Mark, Section, Stage
from events.incident_style import CSS
from events.incidents import ERROR_KINDS

CLOSERS = {
    stage: {name for name, cls in PAYLOAD_TYPES.items() if stage in cls.facts.closes}
    for stage in STAGES
}
OPENERS = {
    stage: {name for name, cls in PAYLOAD_TYPES.items() if stage in cls.facts.opens}
    for stage in STAGES
}


@pytest.mark.parametrize("name", sorted(PAYLOAD_TYPES))
def test_every_event_type_declares_its_facts_on_its_own_class(name: str) -> None:
    cls = PAYLOAD_TYPES[name]
    assert isinstance(vars(cls).get("facts"), EventFacts), (
        f"{cls.__name__} declares no facts: add `facts = PLAIN` or `facts = EventFacts(...)`"
    )


def test_every_error_kind_and_mark_has_a_colour_on_the_page() -> None:
    colours = set(re.findall(r"--([a-z_]+):", CSS))
    assert set(get_args(Mark)) <= colours
    assert {stage for stage, info in STAGES.items() if info.measured} <= colours


def test_every_error_kind_is_listed_in_a_section_with_a_chip() -> None:
    for name, kind in ERROR_KINDS.items():
        section = facts_of(name).section
        assert section is not None, name
        chip = SECTIONS[section].chip
        assert chip is not None, name
        assert kind in get_args(Mark)


def test_every_section_is_declared_by_some_event_type() -> None:
    declared = {cls.facts.section for cls in PAYLOAD_TYPES.values()}
    timeouts = {"timeouts"} if any(c.facts.timeout_when for c in PAYLOAD_TYPES.values()) else set()
    assert set(get_args(Section)) == set(SECTIONS) == (declared - {None}) | timeouts


@pytest.mark.parametrize("stage", list(STAGES))
def test_every_stage_is_opened_by_some_type_and_closed_by_another(stage: Stage) -> None:
    assert OPENERS[stage], f"nothing opens {stage}"
    assert CLOSERS[stage] - OPENERS[stage], f"only its openers close {stage}"


def test_a_stage_ends_in_a_denial_failure_cancel_or_nothing_marked() -> None:
    ends = {name for closers in CLOSERS.values() for name in closers}
    assert {facts_of(name).marked for name in ends} == {None, "denial", "failure", "cancel"}


def test_every_policy_decision_closes_the_policy_stage() -> None:
    decisions = {name for name, cls in PAYLOAD_TYPES.items() if cls.facts.decision}
    assert decisions == CLOSERS["policy"]
    assert decisions == {"policy.allowed", "policy.denied", "tool.approval_requested"}


def test_an_unknown_security_type_is_a_security_signal_and_other_unknowns_are_plain() -> None:
    assert (facts_of("security.new_kind").section, facts_of("security.new_kind").marked) == (
        "security_signals",
        "security",
    )
    assert facts_of("vendor.thing") == EventFacts()
