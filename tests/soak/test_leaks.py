"""The soak leak check's decision from readings (issue 19): plain data in, pass or fail out."""

from __future__ import annotations

import msgspec

from soak.cli import render_summary
from soak.leaks import LIMIT_PCT, Reading, judge, leak_reasons
from soak.report import LeakCheck
from soak.verdict import decide
from tests.soak.test_report import _report

MIB = 1024 * 1024


def _reading(
    name: str, uss_mib: float, pid: int = 100, created: float = 1.0, rss_mib: float | None = None
) -> Reading:
    """A reading whose RSS is its USS plus 40 MiB shared (unless ``rss_mib`` says)."""
    rss = uss_mib + 40 if rss_mib is None else rss_mib
    return Reading(name=name, pid=pid, created=created, uss=int(uss_mib * MIB), rss=int(rss * MIB))


def _check(before: list[Reading], after: list[Reading]) -> LeakCheck:
    return LeakCheck(limit_pct=LIMIT_PCT, settle_s=3.0, processes=judge(before, after))


def test_growth_within_ten_percent_passes_and_beyond_fails() -> None:
    before = [_reading("daemon", 10.0, 1), _reading("journal", 20.0, 2)]
    after = [_reading("daemon", 10.99, 1), _reading("journal", 22.2, 2)]
    check = _check(before, after)
    assert [(p.name, p.growth_pct, p.leaked) for p in check.processes] == [
        ("daemon", 9.9, False),
        ("journal", 11.0, True),
    ]
    assert leak_reasons(check) == [
        "leak: journal (pid 2) USS grew +11.0% (20.0 -> 22.2 MiB; RSS 60.0 -> 62.2 MiB) "
        "between the warm-up and 3 s after the load stopped; the limit is 10%"
    ]


def test_exactly_ten_percent_is_still_within_the_limit() -> None:
    check = _check([_reading("daemon", 10.0)], [_reading("daemon", 11.0)])
    assert check.processes[0].leaked is False


def test_pages_a_parent_shared_with_its_children_becoming_its_own_are_no_leak() -> None:
    """USS up by what its forked children copied or freed, RSS the same: nothing allocated."""
    before = [_reading("daemon", 11.0, rss_mib=60.0)]
    after = [_reading("daemon", 51.0, rss_mib=60.5)]
    [daemon] = judge(before, after)
    assert (daemon.growth_pct, daemon.leaked) == (363.64, False)
    assert (daemon.rss_before, daemon.rss_after) == (60 * MIB, int(60.5 * MIB))


def test_resident_growth_without_unique_growth_is_no_leak_either() -> None:
    """A first use of shared library code: RSS up, nothing of its own."""
    [daemon] = judge(
        [_reading("daemon", 11.0, rss_mib=60.0)], [_reading("daemon", 11.2, rss_mib=80.0)]
    )
    assert daemon.leaked is False


def test_shrinking_is_never_a_leak() -> None:
    check = _check([_reading("supervisor", 30.0)], [_reading("supervisor", 12.0)])
    assert (check.processes[0].growth_pct, check.processes[0].leaked) == (-60.0, False)


def test_a_process_gone_or_replaced_by_one_with_its_pid_is_reported_not_compared() -> None:
    before = [_reading("journal", 10.0, pid=7, created=1.0), _reading("project", 10.0, pid=8)]
    after = [_reading("journal", 50.0, pid=7, created=2.0)]  # killed; its pid reused
    processes = judge(before, after)
    assert [(p.name, p.uss_after, p.growth_pct, p.leaked) for p in processes] == [
        ("journal", None, None, False),
        ("project", None, None, False),
    ]


def test_a_sequence_of_runs_fails_only_the_leaking_one() -> None:
    """Readings of four runs, as a long-running daemon would give them."""
    runs = [(12.2, 12.4), (12.2, 36.9), (30.0, 31.5), (6.0, 6.7)]
    verdicts = [
        bool(leak_reasons(_check([_reading("daemon", a)], [_reading("daemon", b)])))
        for a, b in runs
    ]
    assert verdicts == [False, True, False, True]


def test_a_leak_fails_the_run_and_the_summary_shows_every_process() -> None:
    check = _check(
        [_reading("daemon", 12.0, 1), _reading("journal", 9.0, 2), _reading("project", 5.0, 3)],
        [_reading("daemon", 36.0, 1), _reading("journal", 9.1, 2)],
    )
    report = decide(_report(leaks=check))
    assert report.passed is False
    assert report.reasons == [
        "leak: daemon (pid 1) USS grew +200.0% (12.0 -> 36.0 MiB; RSS 52.0 -> 76.0 MiB) "
        "between the warm-up and 3 s after the load stopped; the limit is 10%"
    ]
    lines = render_summary(report).splitlines()
    assert (
        "  leak check     USS after the warm-up -> 3 s after the load (limit +10%): "
        "1 process(es) grew beyond it"
    ) in lines
    assert any(line.split()[:2] == ["daemon", "pid"] and line.endswith("LEAK") for line in lines)
    assert any(line.split()[:2] == ["project", "pid"] and "gone" in line for line in lines)
    assert lines[-1].startswith("  NOT PASSED     leak: daemon (pid 1)")


def test_a_clean_check_passes_and_is_in_the_json() -> None:
    check = _check([_reading("daemon", 12.0)], [_reading("daemon", 12.1)])
    report = decide(_report(leaks=check))
    assert (report.passed, report.reasons) == (True, [])
    data = msgspec.to_builtins(report)["leaks"]
    assert data["limit_pct"] == 10.0
    assert data["processes"][0]["name"] == "daemon"
    assert data["processes"][0]["leaked"] is False


def test_a_run_without_both_readings_has_no_check_and_says_so() -> None:
    report = decide(_report(leaks=None))
    assert report.passed is True
    assert "  leak check     not made (the run broke off before its two readings)" in (
        render_summary(report).splitlines()
    )


def test_a_run_too_short_to_judge_reports_its_growth_and_fails_nothing() -> None:
    grown = judge([_reading("supervisor", 6.0)], [_reading("supervisor", 16.0)])
    judged = LeakCheck(limit_pct=LIMIT_PCT, settle_s=3.0, processes=grown, load_s=300.0)
    short = LeakCheck(limit_pct=LIMIT_PCT, settle_s=3.0, processes=grown, load_s=19.0, judged=False)
    assert grown[0].leaked is True
    assert len(leak_reasons(judged)) == 1
    assert leak_reasons(short) == []
