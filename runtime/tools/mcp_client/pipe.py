"""The MCP SDK's client session over the pipes of a server Roost started itself.

The SDK's ``stdio_client`` spawns the server on its own; Roost starts it through the one
launcher (:class:`runtime.guard.sandbox.server_process.ServerProcess`) and connects the SDK's
``ClientSession`` to its stdin and stdout here. The framing is the stdio transport's:
one JSON-RPC message per line, UTF-8, parsed with the SDK's own message types
(``jsonrpc_message_adapter``; a line that does not parse reaches the session as the
exception, as in the SDK). A line longer than :data:`MAX_LINE_BYTES` ends the connection,
so a server cannot grow the runner's memory without bound.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["MAX_LINE_BYTES", "pipe_streams"]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest message line accepted from a server (bytes)."""

_CHUNK = 65536


def _parse(line: bytes) -> Any:
    import mcp_types  # noqa: PLC0415  (the SDK loads on first use)
    from mcp.shared.message import SessionMessage  # noqa: PLC0415

    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as e:
        return e
    return SessionMessage(message)


@asynccontextmanager
async def pipe_streams(stdin_fd: int, stdout_fd: int) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` for ``ClientSession`` over a server's pipes.

    The descriptors stay the caller's: they are set non-blocking here and closed by it
    (after this context has ended, so no task still waits on them).
    """
    from mcp.shared.message import SessionMessage  # noqa: PLC0415

    os.set_blocking(stdin_fd, False)
    os.set_blocking(stdout_fd, False)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        async with read_writer:
            buffer = bytearray()
            while True:
                await anyio.wait_readable(stdout_fd)
                try:
                    chunk = os.read(stdout_fd, _CHUNK)
                except BlockingIOError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[: end + 1]
                    if line.strip():
                        await read_writer.send(_parse(line))
                if len(buffer) > MAX_LINE_BYTES:
                    await read_writer.send(
                        ValueError(f"the server sent a line over {MAX_LINE_BYTES} bytes")
                    )
                    return

    async def writer() -> None:
        async with write_reader:
            async for message in write_reader:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                data = memoryview((text + "\n").encode("utf-8"))
                while data:
                    await anyio.wait_writable(stdin_fd)
                    try:
                        data = data[os.write(stdin_fd, data) :]
                    except BlockingIOError:
                        continue
                    except OSError:
                        await read_writer.aclose()  # the session sees the connection end
                        return

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            tasks.cancel_scope.cancel()
