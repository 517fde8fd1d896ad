"""One soak run, end to end: daemon, bootstrap, workload, journal checks, memory, shutdown.

:func:`run_soak` drives the real daemon through the real client (its steps are in
``soak.steps``, the verdict in ``soak.verdict``):

1. use the daemon running on ``--home``, or spawn one (``soak.monitor.DaemonSession``);
2. create temporary project roots with seed files, start the projects (their
   ``idle_passivation_ms`` is short, so idle conversations stop after the run), sample the
   daemon tree's memory, start the conversations, warm up (``soak.steps.warm_up``), wait
   for the conversations to be passivated, read the always-on processes' USS (``soak.leaks``);
3. run the scenario's workload (``soak.scenarios``; ``chaos`` crashes entities and kills hosts
   meanwhile, ``soak.chaos``), wait until no turn runs and the idle conversations are
   passivated, settle, read the USS again: a process grown by over 10% fails the run;
4. read every project's journal back, streaming, and check it (``soak.readback``,
   ``soak.integrity``); 5. sample memory again; 6. stop the daemon it spawned and make sure
   no process of it is left; 7. ``baseline``: replay the run's message and append pattern
   on bare Thespian and eventsourcing (``soak.baseline``) and report the ratio.

The daemon's ``status`` counters are read just before and just after the workload (step
3), for ``messages_per_turn``, ``appends_per_commit`` and ``cpu_ms_per_turn`` (the CPU
time of the daemon's tree and of the harness). ``slow-model`` serves the projects' model
from ``soak.model_server``, starts no conversation and sends no warm-up: its workload
starts every conversation at once (``start_conversation`` timed), then sends its turns.
"""

from __future__ import annotations

import contextlib
import functools
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

from runtime.client import Client
from runtime.errors import RoostError
from soak.bootstrap import event_counts, start_conversations, start_projects
from soak.config import SoakConfig
from soak.figures import (
    appends_per_commit,
    counter_delta,
    latency_stats,
    messages_per_turn,
    overheads,
    per_live_conversation,
    per_minute,
)
from soak.integrity import StreamCheck
from soak.leaks import Watch
from soak.model_server import ModelServer
from soak.monitor import DaemonSession, MemorySampler
from soak.readback import (
    READ_BACK_S_PER_EVENT,
    Guard,
    collect_events,
    first_verify_allowance,
    journal_batch_sizes,
    wait_idle,
)
from soak.report import (
    Backpressure,
    ChaosSummary,
    EventCounts,
    Integrity,
    LeakCheck,
    Memory,
    SlowModelSummary,
    SoakReport,
    StageCounts,
    Throughput,
)
from soak.steps import (
    RunState,
    bare_baseline,
    keep_going_while,
    passivation_wait_s,
    spread_conversations,
    status_counters,
    wait_passivated,
    warm_up,
    workload_for,
)
from soak.turns import TurnResult, WorkloadResult, plan_turns
from soak.verdict import CHAOS_TOLERATED, decide, judge_goals, turn_failures

if TYPE_CHECKING:
    from soak.chaos import ChaosMonkey

__all__ = ["run_soak"]


def run_soak(
    config: SoakConfig, *, on_progress: Callable[[int, str], None] | None = None
) -> SoakReport:
    """Run one soak (see the module docstring) and return its report, ``passed`` decided.

    ``on_progress(turns_done, note)`` is called as the run advances (for a progress line).
    """
    started_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    t0 = time.monotonic()
    run = RunState(config, on_progress)
    workdir = tempfile.mkdtemp(prefix="roost-soak-")
    session = DaemonSession(
        config.home,
        workdir,
        faults=config.scenario == "chaos",
        clients=config.concurrency if config.scenario == "slow-model" else 0,
    )
    sampler = MemorySampler(session.home)
    monkey: ChaosMonkey | None = None
    result = WorkloadResult()
    integrity = Integrity(
        checked_events=0,
        lost=0,
        duplicated=0,
        unterminated_calls=0,
        unfinished_turns=0,
        replay_mismatch=0,
        hash_chain_ok=False,
        unchecked_projects=config.projects,
    )
    restarts = crashes = committed = 0
    slow = config.scenario == "slow-model"
    stack = contextlib.ExitStack()
    model: ModelServer | None = None
    counted: dict[str, int] = {}
    rss_start = rss_end = procs_start = procs_end = pss_start = pss_end = 0
    batch_sizes: list[int] | None = None
    leak_watch: Watch | None = None
    interrupted = False
    try:
        run.note("starting the daemon")
        session.start()
        if slow:
            model = stack.enter_context(ModelServer(config.model_latency_ms))
        with Client.connect(session.home) as client:
            run.note("starting projects")
            run.projects = start_projects(
                client,
                config,
                workdir,
                run.run_id,
                run.failures,
                options=None
                if model is None
                else {"llm_adapter": "openai", "llm_base_url": model.base_url},
            )
            leak_watch = Watch(session.home, session.pid)
            leak_watch.name_processes()
            rss_start, procs_start = sampler.sample(refresh=True)
            pss_start = sampler.pss(refresh=True)
            sampler.start()
            passivated = functools.partial(
                wait_passivated, client, run.projects, sampler, procs_start, config
            )
            if slow:  # started by the workload, all at once
                run.conversations = spread_conversations(run.projects, config.concurrency)
            else:
                run.note("starting conversations")
                run.conversations = start_conversations(
                    client, run.projects, config.conversations, run.failures
                )
                run.note("warm-up round")
                warm_up(config, session.home, run, passivated)
            before = event_counts(client, run.projects)
            # as at the *after* reading
            passivated()
            leak_watch.before()
            per_conversation = 1 if config.duration_s else config.events
            turns = plan_turns(run.conversations, per_conversation, run.run_id)
            end_at = time.monotonic() + (config.duration_s or 0)
            if config.scenario == "chaos":
                from soak.chaos import ChaosMonkey

                seed = config.seed if config.seed is not None else random.randrange(2**31)
                monkey = ChaosMonkey(
                    session.home,
                    min_kills=config.kills,
                    interval_s=config.kill_interval_ms / 1000,
                    seed=seed,
                )
            keep_going = keep_going_while(monkey, end_at if config.duration_s else None)
            workload = workload_for(config, session.home, run, keep_going=keep_going)
            run.note(f"{config.scenario} workload")
            if monkey is not None:
                monkey.start()
            first = status_counters(client)
            counters_before = status_counters(client)
            try:
                with sampler.cpu:  # the CPU of the load alone
                    result = workload.run(turns)
            finally:
                if monkey is not None:
                    monkey.stop()
            reading = counter_delta(first, counters_before)  # one reading's own messages
            counted = counter_delta(counters_before, status_counters(client), reading)
            if result.stalled:
                run.failures.add(
                    "workload",
                    "stalled",
                    f"no turn finished for {workload.stall_s:g} s, so the remaining turns were "
                    "not sent (the daemon looks wedged)",
                )
            run.note("waiting for turns to settle")
            settle_s = 5.0 if result.stalled else config.timeout_ms / 1000 + (30 if monkey else 5)
            budget = settle_s + 60 + 15 * len(run.projects) + passivation_wait_s(config)
            with Guard(client, budget) as guard:
                wait_idle(client, run.conversations, settle_s, run.failures)
                run.note("settling, then reading memory for the leak check")
                passivated()
                leak_watch.after()
                run.note("reading the journal back")
                if config.scenario == "baseline":
                    batch_sizes = journal_batch_sizes(session.home, before)
                check = StreamCheck(
                    {**r.ack, "project_id": r.turn.project_id}
                    for r in result.results
                    if r.ok and r.ack is not None
                )
                # the first project's verify, before any count is known: no project has
                # more events than the journal's highest acked seq
                guard.extend(first_verify_allowance(result.results))
                verified = collect_events(
                    client,
                    run.projects,
                    run.failures,
                    check,
                    note=run.note,
                    # its own events, read back, and the next project's verify
                    verified_count=lambda n: guard.extend(2 * n * READ_BACK_S_PER_EVENT),
                )
                after = {p: int(verified[p]["checked_events"]) for p in verified}
                committed = sum(max(0, after[p] - before.get(p, 0)) for p in after)
            if guard.fired:
                run.failures.add(
                    "journal",
                    "read_back_timeout",
                    f"settling and reading the journal back took more than {budget:g} s",
                )
            integrity = msgspec.structs.replace(
                check.result(verified, read=verified),
                unchecked_projects=len(run.projects) - len(verified),
            )
            restarts = check.types["actor.restarted"]
            crashes = check.types["actor.crashed"]
            run.note("waiting for idle conversations to be passivated")
            passivated()
            rss_end, procs_end = sampler.sample(refresh=True)
            pss_end = sampler.pss(refresh=True)
            if not session.owned:
                for project in run.projects:
                    try:
                        client.stop_project(project)
                    except RoostError as e:
                        run.failures.add("cleanup", e.code, str(e))
    except RoostError as e:
        run.failures.add("daemon", e.code, str(e))
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): no report, so keep nothing
        interrupted = True
        raise
    finally:
        if sampler.samples:
            sampler.stop()
        run.note("stopping the daemon")
        session.stop(run.failures)
        stack.close()
        if interrupted:
            shutil.rmtree(workdir, ignore_errors=True)
    baseline = None
    if config.scenario == "baseline" and result.results:
        run.note("bare Thespian + eventsourcing baseline")
        baseline = bare_baseline(
            config, run, result, batch_sizes=batch_sizes, committed=committed, workdir=workdir
        )
    elapsed = result.elapsed_s
    ok = [r for r in result.results if r.ok]
    wanted = config.concurrency if slow else config.projects * config.conversations
    started = len(result.start_ms) if slow else len(run.conversations)
    pss_peak = max(sampler.pss_peak, pss_start, pss_end)
    overhead = None
    if model is not None:
        rounds_ms = 2 * config.model_latency_ms  # an untagged turn: its two rounds' wait
        model_ms = [model.model_ms(r.turn.correlation_id) or rounds_ms for r in ok]
        overhead = overheads([r.latency_ms for r in ok], model_ms)
    report = SoakReport(
        started_at=started_at,
        elapsed_ms=round(elapsed * 1000, 3),
        total_ms=round((time.monotonic() - t0) * 1000, 3),
        scenario=config.scenario,
        config=config,
        projects=StageCounts(
            requested=config.projects,
            started=len(run.projects),
            failed=config.projects - len(run.projects),
        ),
        conversations=StageCounts(requested=wanted, started=started, failed=wanted - started),
        events=EventCounts(
            requested=len(result.results),
            sent=len(ok),
            failed=len(result.results) - len(ok),
            latency_ms=latency_stats([r.latency_ms for r in ok]),
        ),
        throughput=Throughput(
            turns_per_s=round(len(ok) / elapsed, 2) if elapsed else 0.0,
            events_per_s=round(committed / elapsed, 2) if elapsed else 0.0,
            events_committed=committed,
            per_minute=per_minute([r.finished_s for r in ok], elapsed),
        ),
        memory=Memory(
            rss_start=rss_start,
            rss_peak=max(sampler.peak, rss_start, rss_end),
            rss_end=rss_end,
            samples=sampler.samples,
            processes_start=procs_start,
            processes_peak=sampler.peak_processes,
            processes_end=procs_end,
            pss_start=pss_start,
            pss_end=pss_end,
            pss_peak=pss_peak,
            pss_per_live_conversation=per_live_conversation(pss_peak, pss_start, started),
        ),
        integrity=integrity,
        leaks=None if leak_watch is None else _leaks(leak_watch, judged=not slow),
        restarts=restarts,
        crashes=crashes,
        failures=turn_failures(run.failures, result.results, tolerate=monkey is not None),
        backpressure=Backpressure(
            overloaded=result.overloaded,
            refused_connections=result.refused,
            retries=sum(r.overloaded + r.refused for r in result.results),
            onset_inflight=result.onset_inflight,
            max_inflight=result.max_inflight,
        ),
        messages_per_turn=messages_per_turn(counted, len(ok)),
        appends_per_commit=appends_per_commit(counted),
        cpu_ms_per_turn=sampler.cpu.per_turn(len(ok)),
        counters=counted,
        overhead_ms=None if overhead is None else latency_stats(overhead),
        slow_model=None
        if model is None or overhead is None
        else _slow_model_summary(model, result, ok, overhead, started),
        chaos=None
        if monkey is None
        else ChaosSummary(
            seed=monkey.seed,
            kills=len(monkey.kills),
            by_role=monkey.by_role(),
            interrupted_turns=sum(
                1 for r in result.results if not r.ok and r.error_code in CHAOS_TOLERATED
            ),
            identification=monkey.method,
            problems=list(monkey.problems),
            fatal=monkey.fatal,
            kill_log=list(monkey.log),
        ),
        baseline=baseline,
        ratio=round(len(ok) / elapsed / baseline.turns_per_s, 3)
        if baseline is not None and baseline.turns_per_s and elapsed
        else None,
    )
    report = decide(judge_goals(report))
    if report.passed:
        shutil.rmtree(workdir, ignore_errors=True)
        return report
    return msgspec.structs.replace(report, kept=workdir)


def _leaks(watch: Watch, *, judged: bool) -> LeakCheck | None:
    """The leak check; ``slow-model``'s is not judged (no warm-up precedes its first reading)."""
    check = watch.result()
    return check if judged or check is None else msgspec.structs.replace(check, judged=False)


def _slow_model_summary(
    model: ModelServer,
    result: WorkloadResult,
    ok: list[TurnResult],
    overhead: list[float],
    started: int,
) -> SlowModelSummary:
    first = [o for r, o in zip(ok, overhead, strict=True) if r.turn.index == 0]
    later = [o for r, o in zip(ok, overhead, strict=True) if r.turn.index > 0]
    return SlowModelSummary(
        model_latency_ms=round(model.latency_s * 1000),
        live_conversations=started,
        model_requests=model.requests,
        model_peak_waiting=model.peak_waiting,
        start_conversation_ms=latency_stats(result.start_ms),
        overhead_first_turn_ms=latency_stats(first),
        overhead_later_turns_ms=latency_stats(later),
        goals=[],
        goals_met=False,
    )
