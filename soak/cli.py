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
from collections.abc import Callable, Mapping, Sequence
from types import FrameType
from typing import Any

import msgspec

from soak.config import SoakConfig
from soak.report import SoakReport
from soak.summary import render_summary
from soak.verdict import compare_reports, decide

__all__ = ["build_parser", "main", "render_summary"]

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
    ("--kills", "N", "chaos: kill or crash at least N actors (hosts, the Journal, entities)"),
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
    with open(path, "rb") as f:
        previous = msgspec.json.decode(f.read())
    if not isinstance(previous, dict):
        raise ValueError(f"{path} is not a soak report (expected a JSON object)")
    current: Mapping[str, Any] = msgspec.to_builtins(report)
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
