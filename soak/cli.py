"""``roost soak``: options, the progress bar, the printed summary, ``--json`` and ``--compare``.

``main(argv)`` is what ``roost soak ...`` runs (``runtime.cli.app`` hands it the arguments
after ``soak``, with ``--home DIR`` in front when the global option was given). Exit
status: 0 when the run passed, 1 when it did not (or could not run), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

import msgspec

from soak.report import SoakConfig, SoakReport, compare_reports

__all__ = ["build_parser", "main", "render_summary"]

_MIB = 1024 * 1024


_RUN_SHAPE = (
    ("--projects", "N", "projects to start"),
    ("--conversations", "N", "per project"),
)
_SHAPED_BY_SCENARIO = (
    ("--events", "N", "user.message turns per conversation"),
    (
        "--concurrency",
        "N",
        "turns in flight (worker threads); slow-model: live conversations, spread over the "
        "projects",
    ),
    ("--timeout-ms", "MS", "a turn slower than this fails"),
)
SLOW_MODEL_DEFAULTS = {"events": 2, "concurrency": 1000, "timeout_ms": 120_000}
"""``slow-model``'s own defaults: two turns per conversation (the first starts its actor),
a thousand live conversations, and room for two model rounds of ``--model-latency-ms``
each (the time limit is at least four of them)."""
_CHAOS_AND_PASSIVATION = (
    ("--kills", "N", "chaos: kill at least N actor processes"),
    ("--kill-interval-ms", "MS", "chaos: pause between kills"),
    ("--idle-passivation-ms", "MS", "the soak projects' idle_passivation_ms"),
)


def _counts(
    p: argparse.ArgumentParser,
    defaults: SoakConfig,
    options: tuple[tuple[str, str, str | None], ...],
    *,
    by_scenario: bool = False,
) -> None:
    """Positive-integer options whose default is the ``SoakConfig`` field of their name.

    ``by_scenario``: the default depends on the scenario (:data:`SLOW_MODEL_DEFAULTS`), so
    the option is None when not given and :func:`_config` fills it in.
    """
    from runtime.cli.format import number_type

    positive = number_type(int, lambda n: n >= 1, "a positive integer")
    for flag, metavar, text in options:
        field = flag[2:].replace("-", "_")
        default = getattr(defaults, field)
        shown = text
        if by_scenario:
            shown = f"{text} (default: {default}; slow-model: {SLOW_MODEL_DEFAULTS[field]})"
            default = None
        p.add_argument(flag, type=positive, default=default, metavar=metavar, help=shown)


def build_parser() -> argparse.ArgumentParser:
    """The ``roost soak`` argument parser."""
    from runtime.cli.format import UsageParser, number_type

    positive_number = number_type(float, lambda n: n > 0, "a positive number")
    d = SoakConfig()
    p = UsageParser(
        prog="roost soak",
        description="Drive the daemon with concurrent user.message turns, check the journal,\n"
        "and report latency, throughput, memory and integrity. Exit 0 only when it passed.",
    )
    _counts(p, d, _RUN_SHAPE)
    _counts(p, d, _SHAPED_BY_SCENARIO, by_scenario=True)
    p.add_argument(
        "--scenario",
        choices=("steady", "burst", "chaos", "baseline", "slow-model"),
        default=d.scenario,
        help="the workload's shape",
    )
    _counts(
        p,
        d,
        (
            (
                "--model-latency-ms",
                "MS",
                "slow-model: the loopback model server's wait before each answer",
            ),
        ),
    )
    p.add_argument(
        "--duration-s",
        type=positive_number,
        default=None,
        metavar="S",
        help="keep sending for S seconds instead of --events turns per conversation",
    )
    p.add_argument(
        "--json",
        dest="json_paths",
        action="append",
        nargs="?",
        const="-",
        metavar="FILE",
        help="write the report as JSON to FILE; without FILE (or -) on stdout instead of the "
        "summary; may be given twice",
    )
    p.add_argument(
        "--home",
        metavar="DIR",
        help="use the daemon running there (or start one there); default: a temporary one",
    )
    p.add_argument(
        "--connection-per-turn",
        action="store_true",
        help="send each turn on a new client connection (as the CLI and scripts do)",
    )
    p.add_argument("--compare", metavar="FILE", help="an earlier --json report to compare with")
    p.add_argument(
        "--threshold",
        type=positive_number,
        default=d.threshold_pct,
        metavar="PCT",
        help="--compare: worse by more than PCT%% is a regression",
    )
    _counts(p, d, _CHAOS_AND_PASSIVATION)
    p.add_argument("--seed", type=int, default=None, help="chaos: seed of the random choices")
    return p


def _config(ns: argparse.Namespace) -> SoakConfig:
    d = SoakConfig()
    slow = ns.scenario == "slow-model"

    def shaped(field: str) -> int:
        given: int | None = getattr(ns, field)
        if given is not None:
            return given
        return SLOW_MODEL_DEFAULTS[field] if slow else int(getattr(d, field))

    timeout_ms = shaped("timeout_ms")
    if slow and ns.timeout_ms is None:
        timeout_ms = max(timeout_ms, 4 * ns.model_latency_ms)
    return SoakConfig(
        projects=ns.projects,
        conversations=ns.conversations,
        events=shaped("events"),
        concurrency=shaped("concurrency"),
        timeout_ms=timeout_ms,
        model_latency_ms=ns.model_latency_ms,
        scenario=ns.scenario,
        duration_s=ns.duration_s,
        home=ns.home,
        kills=ns.kills,
        kill_interval_ms=ns.kill_interval_ms,
        idle_passivation_ms=ns.idle_passivation_ms,
        threshold_pct=ns.threshold,
        seed=ns.seed,
        connection_per_turn=ns.connection_per_turn,
    )


def _mib(n: int) -> str:
    return f"{n / _MIB:.1f} MiB"


def render_summary(report: SoakReport) -> str:
    """The report for people, one topic per line."""
    r = report
    lat = r.events.latency_ms
    mem = r.memory
    growth = (mem.rss_end - mem.rss_start) / mem.rss_start * 100 if mem.rss_start else 0.0
    i = r.integrity
    lines = [
        f"roost soak: {r.scenario}: {'PASSED' if r.passed else 'FAILED'} "
        f"({r.total_ms / 1000:.1f} s in all)",
        f"  projects       {r.projects.started}/{r.projects.requested} started; "
        f"conversations {r.conversations.started}/{r.conversations.requested} started",
        f"  turns          {r.events.requested} requested, {r.events.sent} sent, "
        f"{r.events.failed} failed, in {r.elapsed_ms / 1000:.2f} s",
        f"  latency ms     p50 {lat.p50:.1f}  p95 {lat.p95:.1f}  p99 {lat.p99:.1f}  "
        f"(min {lat.min:.1f}, avg {lat.avg:.1f}, max {lat.max:.1f}; nearest rank)",
        f"  throughput     {r.throughput.turns_per_s:.1f} turns/s, "
        f"{r.throughput.events_per_s:.1f} events/s ({r.throughput.events_committed} events)",
        f"  memory         daemon tree: start {_mib(mem.rss_start)}, peak {_mib(mem.rss_peak)}, "
        f"end {_mib(mem.rss_end)} ({growth:+.1f}%); processes {mem.processes_start} -> "
        f"{mem.processes_peak} -> {mem.processes_end}; PSS {_mib(mem.pss_start)} -> "
        f"{_mib(mem.pss_end)}",
        f"  integrity      {i.checked_events} events: {i.lost} lost, {i.duplicated} duplicated, "
        f"{i.unterminated_calls} unterminated calls, {i.unfinished_turns} unfinished turns, "
        f"{i.replay_mismatch} replay mismatches, "
        f"hash chains {'ok' if i.hash_chain_ok else 'BROKEN'}"
        + (f"; {i.unchecked_projects} project(s) NOT READ" if i.unchecked_projects else ""),
        f"  restarts       {r.restarts} (crashes {r.crashes})",
        f"  backpressure   {r.backpressure.overloaded} overloaded, "
        f"{r.backpressure.refused_connections} connections refused, {r.backpressure.retries} "
        f"retries, onset at {r.backpressure.onset_inflight or '-'} in flight, "
        f"max {r.backpressure.max_inflight} in flight",
    ]
    lines += _design_lines(r)
    lines += _leak_lines(r)
    if r.chaos is not None:
        roles = ", ".join(f"{k} {v}" for k, v in sorted(r.chaos.by_role.items()))
        lines.append(
            f"  chaos          {r.chaos.kills} kills ({roles}), {r.chaos.interrupted_turns} "
            f"turns interrupted, seed {r.chaos.seed}, roles by {r.chaos.identification}"
        )
        lines += [f"                 {p}" for p in r.chaos.problems[:5]]
        if r.chaos.fatal:
            lines.append(f"                 FATAL: {r.chaos.fatal}")
    if r.baseline is not None:
        b = r.baseline
        lines.append(
            f"  baseline       bare Thespian + eventsourcing: {b.turns_per_s:.1f} turns/s, "
            f"p99 {b.latency_ms.p99:.1f} ms, {b.actor_messages} actor messages, "
            f"{b.events} events in {b.batches} batches; ratio roost/baseline {r.ratio}"
        )
    if r.compared_with is not None:
        found = f"{len(r.regressions)} regression(s)" if r.regressions else "no regression"
        lines.append(
            f"  compare        with {r.compared_with} (threshold "
            f"{r.config.threshold_pct:g}%): {found}"
        )
    lines += [f"  problem        {p}" for p in i.problems[:10]]
    lines += [
        f"  failure        {f.stage}: {f.code} x{f.count}: {f.message}" for f in r.failures[:10]
    ]
    lines += [f"  NOT PASSED     {reason}" for reason in r.reasons]
    if r.kept:
        lines.append(f"  kept           {r.kept} (project roots; home/ holds the journal and logs)")
    return "\n".join(lines)


def _figure(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:g}{unit}"


def _design_lines(report: SoakReport) -> list[str]:
    """Counters, memory per conversation, throughput per minute, overhead, slow-model goals."""
    r = report
    per_conversation = r.memory.pss_per_live_conversation
    lines = [
        f"  design         {_figure(r.messages_per_turn)} messages per turn, "
        f"{_figure(r.appends_per_commit)} appends per commit; PSS peak "
        f"{_mib(r.memory.pss_peak)}, "
        + ("-" if per_conversation is None else f"{per_conversation / _MIB:.3f} MiB")
        + " per live conversation",
        f"  per minute     {' '.join(str(n) for n in r.throughput.per_minute) or '-'} turns",
    ]
    if r.overhead_ms is not None:
        o = r.overhead_ms
        lines.append(
            f"  overhead ms    p50 {o.p50:.1f}  p95 {o.p95:.1f}  p99 {o.p99:.1f}  "
            f"(max {o.max:.1f}; latency minus the model's own time)"
        )
    if r.slow_model is not None:
        m = r.slow_model
        first, later = m.overhead_first_turn_ms, m.overhead_later_turns_ms
        start = m.start_conversation_ms
        lines.append(
            f"  slow model     {m.live_conversations} live conversations, model "
            f"{m.model_latency_ms} ms per round ({m.model_requests} requests); "
            f"start_conversation p50 {start.p50:.1f} p99 {start.p99:.1f} ms; overhead p50/p99 "
            f"first turn {first.p50:.1f}/{first.p99:.1f} ms, later {later.p50:.1f}/"
            f"{later.p99:.1f} ms"
        )
        verdict = "all met" if m.goals_met else "NOT all met"
        lines.append(f"  goals          issue 18 ({verdict}; reported, not part of PASSED):")
        for g in m.goals:
            bound = ">=" if g.higher_is_better else "<="
            value, limit = _figure(g.value), f"{g.limit:g}"
            if g.metric.startswith("memory."):  # bytes
                value = "-" if g.value is None else f"{g.value / _MIB:.3f} MiB"
                limit = f"{g.limit / _MIB:g} MiB"
            lines.append(
                f"                 {g.metric} {value} {bound} {limit}: "
                f"{'met' if g.met else 'NOT MET'}"
            )
    return lines


def _leak_lines(report: SoakReport) -> list[str]:
    """The leak check: each always-on process's USS after the warm-up and after the load."""
    check = report.leaks
    if check is None:
        return ["  leak check     not made (the run broke off before its two readings)"]
    grew = [p for p in check.processes if p.leaked]
    verdict = f"{len(grew)} process(es) grew beyond it" if grew else "ok"
    if not check.judged:
        verdict += f" (not judged: {check.load_s:g} s of load, a warm-up more than a leak)"
    lines = [
        f"  leak check     USS after the warm-up -> {check.settle_s:g} s after the load "
        f"(limit +{check.limit_pct:g}%): {verdict}"
    ]
    for p in check.processes:
        after = "gone" if p.uss_after is None else _mib(p.uss_after)
        growth = "" if p.growth_pct is None else f" ({p.growth_pct:+.1f}%)"
        mark = ("  LEAK" if check.judged else "  grew") if p.leaked else ""
        rss = "" if p.rss_after is None else f"; RSS {_mib(p.rss_before)} -> {_mib(p.rss_after)}"
        lines.append(
            f"                 {p.name:<16} pid {p.pid:<7} {_mib(p.uss_before)} -> {after}"
            f"{growth}{rss}{mark}"
        )
    return lines


class _Terminated(BaseException):
    """SIGTERM arrived: unwind so the run's ``finally`` blocks stop the daemon."""


def _terminate_cleanly() -> Callable[[], None]:
    """Turn SIGTERM into :class:`_Terminated` (main thread only); return the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(_signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, handler)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore


def _compare(report: SoakReport, path: str, threshold: float) -> SoakReport:
    from soak.harness import decide

    with open(path, "rb") as f:
        previous = msgspec.json.decode(f.read())
    if not isinstance(previous, dict):
        raise ValueError(f"{path} is not a soak report (expected a JSON object)")
    current: dict[str, Any] = msgspec.to_builtins(report)
    regressions = compare_reports(current, previous, threshold)
    return decide(msgspec.structs.replace(report, compared_with=path, regressions=regressions))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``roost soak`` with ``argv``; return the exit status."""
    from runtime.cli.commands import exit_status
    from runtime.cli.format import UsageError
    from runtime.cli.progress import Progress
    from runtime.errors import RoostError
    from soak.harness import run_soak

    try:
        ns = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    except UsageError as e:
        print(f"roost: usage: {e}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    config = _config(ns)
    if ns.compare:
        try:
            with open(ns.compare, "rb"):
                pass
        except OSError as e:
            print(
                f"roost: usage: cannot read --compare {ns.compare}: {e.strerror}", file=sys.stderr
            )
            return 2
    conversations = config.concurrency if config.scenario == "slow-model" else None
    turns = (conversations or config.projects * config.conversations) * config.events
    open_ended = config.duration_s is not None or config.scenario == "chaos"
    progress = Progress(f"soak {config.scenario}", total=None if open_ended else turns)

    def on_progress(done: int, note: str) -> None:
        progress.update(done, note=note or None)

    restore = _terminate_cleanly()
    try:
        with progress.ticking():
            report = run_soak(config, on_progress=on_progress)
    except RoostError as e:
        print(f"roost: {e.code}: {e}", file=sys.stderr)
        return exit_status(e.code)
    except KeyboardInterrupt:
        print("roost: interrupted: the soak run was stopped (its daemon too)", file=sys.stderr)
        return 130
    except _Terminated:
        print("roost: terminated: the soak run was stopped (its daemon too)", file=sys.stderr)
        return 143
    finally:
        restore()
    if ns.compare:
        try:
            report = _compare(report, ns.compare, config.threshold_pct)
        except (OSError, ValueError, msgspec.DecodeError) as e:
            print(f"roost: bad_compare: {ns.compare}: {e}", file=sys.stderr)
            return 1
    encoded = msgspec.json.format(msgspec.json.encode(report)) + b"\n"
    paths = ns.json_paths or []
    for path in paths:
        if path != "-":
            with open(path, "wb") as f:
                f.write(encoded)
    try:
        if "-" in paths:
            sys.stdout.write(encoded.decode())
            sys.stdout.flush()
        else:
            print(render_summary(report), flush=True)
    except BrokenPipeError:  # `roost soak | head`: the reader left; the status still counts
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0 if report.passed else 1
