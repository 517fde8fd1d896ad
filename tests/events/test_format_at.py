"""``format_at``: UTC, milliseconds, ``Z``, whatever zone the moment comes in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from events.envelope import format_at


def _reference(moment: datetime) -> str:
    utc = (moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment).astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


@given(
    moment=st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9998, 12, 30)),
    offset=st.one_of(st.none(), st.integers(-14 * 60, 14 * 60)),
)
def test_format_at_is_the_utc_moment_to_the_millisecond(
    moment: datetime, offset: int | None
) -> None:
    if offset is not None:
        moment = moment.replace(tzinfo=UTC if offset == 0 else timezone(timedelta(minutes=offset)))
    assert format_at(moment) == _reference(moment)


def test_format_at_truncates_and_pads() -> None:
    assert (
        format_at(datetime(2026, 1, 2, 3, 4, 5, 999_999, tzinfo=UTC)) == "2026-01-02T03:04:05.999Z"
    )
    assert format_at(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"
    plus_two = timezone(timedelta(hours=2))
    assert format_at(datetime(2026, 1, 1, 1, 0, 0, 1_000, tzinfo=plus_two)) == (
        "2025-12-31T23:00:00.001Z"
    )
