"""The soak report for people: one topic per line (``roost soak`` prints it).

``--json`` gives the whole report; this is its reading: the run's verdict, turns, latency,
throughput, memory, integrity, back-pressure, the design's figures (messages per turn,
appends per commit, memory per live conversation, throughput per minute, overhead and the
``slow-model`` goals), the leak check and what failed.
"""

from __future__ import annotations

from soak.report import SoakReport

__all__ = ["render_summary"]

_MIB = 1024 * 1024


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
    if r.cpu_ms_per_turn is not None:
        cpu = r.cpu_ms_per_turn
        lines.append(
            f"  cpu per turn   {cpu.tree_ms:g} ms in the daemon's tree, {cpu.client_ms:g} ms "
            "in this harness"
        )
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
            f"{m.model_latency_ms} ms per round ({m.model_requests} requests, at most "
            f"{m.model_peak_waiting} at once); "
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
