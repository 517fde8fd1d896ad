"""The journal's tables of rules: SQL conditions, and what each SQLite layout does."""

from __future__ import annotations

from runtime.journal.scope import where
from runtime.journal.sqlite_layout import LAYOUT, LAYOUTS, layout_of
from runtime.journal.sqlite_migrations import UPGRADES


def test_only_the_conditions_that_apply_are_joined_with_their_parameters_in_order() -> None:
    text, params = where(
        (True, "a=?", (1,)),
        (False, "b=?", (2,)),
        (True, "c IN (?,?)", ("x", "y")),
        (True, "d IS NULL", ()),
    )
    assert (text, params) == ("a=? AND c IN (?,?) AND d IS NULL", [1, "x", "y"])


def test_no_condition_that_applies_is_no_text() -> None:
    assert where((False, "a=?", (1,))) == ("", [])


def test_every_sqlite_layout_has_its_class_and_its_upgrade() -> None:
    assert set(LAYOUTS) == set(UPGRADES) == {1, LAYOUT}
    assert [layout_of(version).version for version in sorted(LAYOUTS)] == sorted(LAYOUTS)
