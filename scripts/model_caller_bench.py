"""Many slow model calls at once: the model caller's event loop against blocking calls on threads.

Run ``python scripts/model_caller_bench.py [--calls 1000] [--latency-ms 2000] [--workers 64]``.
A loopback OpenAI-compatible server in a child process (asyncio, keep-alive) answers every
request ``--latency-ms`` after it arrives. The same ``--calls`` calls, all submitted at once,
then go through the resilient OpenAI adapter two ways, one after the other:

- ``caller``: one :class:`runtime.llm.caller.ModelCaller` (one loop thread, one pool);
- ``threads``: ``adapter.complete`` (blocking) on a thread pool of ``--workers`` threads,
  the "bounded pool" a host would need without the async path.

For each it prints the wall time until the last call ended, the process's CPU time per
call, the threads it added, and how many calls failed.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import resource
import subprocess
import sys
import threading
import time

from runtime.llm.adapters import make_adapter
from runtime.llm.base import ModelAdapter, ModelRequest
from runtime.llm.caller import ModelCaller, ModelOutcome, complete_now

BODY = (
    b'data: {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}'
    b"\n\ndata: [DONE]\n\n"
)


async def serve(latency_s: float) -> None:
    """Answer each POST ``latency_s`` after it came; print the port; serve until stdin ends."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                await asyncio.sleep(latency_s)
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
                    + BODY
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.close()


def cpu_s() -> float:
    """Return the CPU time of this process so far (user and system), in seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_caller(
    adapter: ModelAdapter, requests: list[ModelRequest]
) -> tuple[list[ModelOutcome], int]:
    """Submit every request to one model caller; return the outcomes and the threads added."""
    outcomes: list[ModelOutcome] = []
    finished = threading.Condition()
    before = threading.active_count()

    def done(outcome: ModelOutcome) -> None:
        with finished:
            outcomes.append(outcome)
            finished.notify_all()

    with ModelCaller() as caller:
        for request in requests:
            caller.submit(adapter, request, done)
        with finished:
            finished.wait_for(lambda: len(outcomes) == len(requests))
        added = threading.active_count() - before
    return outcomes, added


def run_threads(
    adapter: ModelAdapter, requests: list[ModelRequest], workers: int
) -> tuple[list[ModelOutcome], int]:
    """Run every request blocking on ``workers`` threads; return the outcomes, threads added."""
    before = threading.active_count()
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(complete_now, adapter, request) for request in requests]
        outcomes = [future.result() for future in futures]
        added = threading.active_count() - before
    return outcomes, added


def main() -> None:
    """Start the server, run both ways, print a line for each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--latency-ms", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.latency_ms / 1000))
        return
    with subprocess.Popen(
        [sys.executable, __file__, "--serve", "--latency-ms", str(args.latency_ms)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as server:
        assert server.stdin is not None and server.stdout is not None
        port = int(server.stdout.readline())
        options = {
            "llm_adapter": "openai",
            "llm_base_url": f"http://127.0.0.1:{port}/v1",
            "llm_model": "m",
        }
        adapter = make_adapter(options)
        requests = [
            ModelRequest(messages=[{"role": "user", "content": f"m{n}"}], timeout_s=600.0)
            for n in range(args.calls)
        ]
        print(f"{args.calls} calls at once, the model answers after {args.latency_ms} ms")
        for name in ("caller", f"threads ({args.workers} workers)"):
            started, cpu = time.monotonic(), cpu_s()
            if name == "caller":
                outcomes, added = run_caller(adapter, requests)
            else:
                outcomes, added = run_threads(adapter, requests, args.workers)
            wall, cpu = time.monotonic() - started, cpu_s() - cpu
            failed = sum(1 for outcome in outcomes if not outcome.ok)
            print(
                f"{name:22} wall {wall:6.2f} s  cpu/call {cpu / args.calls * 1000:6.2f} ms  "
                f"threads added {added:4}  failed {failed}"
            )
        server.stdin.close()
        server.wait(30)


if __name__ == "__main__":
    main()
