"""The ``fs.*`` tools: read, write, edit, list and search files inside the workspace.

Every open goes through :class:`runtime.guard.workspace.Workspace`, so each tool is confined
to the project root (plus ``outside_root_allowlist`` exceptions) and refuses sensitive and
protected paths. Refusals are raised as ``ToolError`` after their security signal is put
in ``ctx.signals``; an allowlist exception used is recorded the same way.

Directory traversal (``fs.list`` with a glob, ``fs.search``) walks with directory fds and
never follows a symlink: symlinks are listed as ``symlink`` and not searched. ``.git``
directories are not descended into, and ``ROOST_HOME`` is neither listed nor entered.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from events.catalog import Event
from runtime.errors import ToolError
from runtime.guard.paths.safe_read import bounded_lines
from runtime.guard.workspace import PathDecision, Workspace, exception_signal, signal_for
from runtime.tools.args import (
    BOOLEAN,
    NON_NEGATIVE,
    OPTIONAL_STRING,
    POSITIVE,
    STRING,
    bad_arg,
    read_arg,
)
from runtime.tools.base import ToolContext, ToolFn, ToolSpec
from runtime.tools.fswalk import (
    SEARCH_MAX_PATTERN,
    compile_search,
    entry_kind,
    glob_regex,
    search_file,
    walk_tree,
)
from runtime.tools.results import FsEdit, FsList, FsListEntry, FsMatch, FsRead, FsSearch, FsWrite

__all__ = [
    "LIST_MAX_ENTRIES",
    "READ_DEFAULT_LIMIT",
    "SEARCH_MAX_MATCHES",
    "SPECS",
    "TOOLS",
    "fs_edit",
    "fs_list",
    "fs_read",
    "fs_search",
    "fs_write",
]

READ_DEFAULT_LIMIT = 2000
"""Lines ``fs.read`` returns when no ``limit`` is given."""
READ_MAX_CONTENT_BYTES = 1 << 20
"""``fs.read`` stops adding lines past this much text and reports ``truncated``."""
EDIT_MAX_BYTES = 16 << 20
"""Largest file ``fs.edit`` rewrites."""
LIST_MAX_ENTRIES = 1000
"""Entries ``fs.list`` returns at most."""
SEARCH_MAX_MATCHES = 500
"""Matching lines ``fs.search`` returns at most."""


def _schema(properties: dict[str, object], required: list[str]) -> Mapping[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH = {"type": "string", "minLength": 1, "description": "A path inside the project root."}

SPECS: list[ToolSpec] = [
    ToolSpec(
        name="fs.read",
        description="Read a text file; offset and limit select lines (offset counts from 0).",
        input_schema=_schema(
            {
                "path": _PATH,
                "offset": {"type": "integer", "minimum": 0},
                "limit": {"type": "integer", "minimum": 1},
            },
            ["path"],
        ),
        read_only=True,
        path_args=("path",),
        inline=True,
    ),
    ToolSpec(
        name="fs.write",
        description="Write a text file, replacing it; missing parent directories are created.",
        input_schema=_schema({"path": _PATH, "content": {"type": "string"}}, ["path", "content"]),
        writes=True,
        path_args=("path",),
        data_args=("content",),
        inline=True,
    ),
    ToolSpec(
        name="fs.edit",
        description="Replace text in a file: old must occur exactly once unless replace_all.",
        input_schema=_schema(
            {
                "path": _PATH,
                "old": {"type": "string", "minLength": 1},
                "new": {"type": "string"},
                "replace_all": {"type": "boolean"},
            },
            ["path", "old", "new"],
        ),
        writes=True,
        path_args=("path",),
        data_args=("old", "new"),
        inline=True,
    ),
    ToolSpec(
        name="fs.list",
        description="List a directory (default the root); a glob such as **/*.py recurses.",
        input_schema=_schema({"path": _PATH, "glob": {"type": "string", "minLength": 1}}, []),
        read_only=True,
        path_args=("path",),
        inline=True,
    ),
    ToolSpec(
        name="fs.search",
        description=(
            "Find lines containing a text (or matching a regex if regex is true; RE2 syntax, "
            "no backreferences or lookaround)."
        ),
        input_schema=_schema(
            {
                "pattern": {"type": "string", "minLength": 1, "maxLength": SEARCH_MAX_PATTERN},
                "path": _PATH,
                "regex": {"type": "boolean"},
            },
            ["pattern"],
        ),
        read_only=True,
        path_args=("path",),
        data_args=("pattern",),
        inline=True,
    ),
]
"""The ``fs.*`` tool specs."""


# --- shared ----------------------------------------------------------------------------


@contextmanager
def _workspace(ctx: ToolContext, tool: str) -> Iterator[Workspace]:
    """Open a Workspace for the call; refusals raised inside record their signal."""
    try:
        with Workspace(ctx.root, ctx.options) as ws:
            yield ws
    except ToolError as err:
        _record(ctx, signal_for(err, tool, ctx.call_id))
        raise


def _checked(ctx: ToolContext, ws: Workspace, tool: str, path: str, write: bool) -> PathDecision:
    decision = ws.check_path(path, write=write)
    _record(ctx, exception_signal(decision, tool, ctx.call_id))
    return decision


def _record(ctx: ToolContext, signal: Event | None) -> None:
    """Keep the signal a refusal or an exception gives, when it gives one."""
    if signal is not None:
        ctx.signals.append(signal)


def _read_all(fd: int, limit: int) -> bytes:
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ToolError(
            "tool_error", f"the file is larger than {limit} bytes", reason="file_too_large"
        )
    return data


def _write_all(fd: int, data: bytes) -> None:
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _encode(text: str, name: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise bad_arg(name, "valid Unicode text", text[:80]) from None


# --- the tools -------------------------------------------------------------------------


def fs_read(ctx: ToolContext, args: Mapping[str, Any]) -> FsRead:
    """``fs.read``: ``{path, content, total_lines, truncated}`` for the selected lines."""
    path = read_arg(args, "path", STRING)
    offset = read_arg(args, "offset", NON_NEGATIVE, 0)
    limit = read_arg(args, "limit", POSITIVE, READ_DEFAULT_LIMIT)
    with _workspace(ctx, "fs.read") as ws:
        _checked(ctx, ws, "fs.read", path, write=False)
        fd = ws.open_for_read(path)
    chosen: list[str] = []
    size = total = 0
    truncated = False
    with os.fdopen(fd, "rb") as f:
        # Lines are read at most READ_MAX_CONTENT_BYTES at a time: a file a command made of
        # one huge line (a sparse `truncate -s 1G`) is never held whole in memory.
        for raw, cut in bounded_lines(f, READ_MAX_CONTENT_BYTES + 1):
            total += 1
            if total <= offset:
                continue
            if cut or len(chosen) >= limit or size + len(raw) > READ_MAX_CONTENT_BYTES:
                truncated = True
                continue
            line = raw.decode("utf-8", "replace")
            chosen.append(line)
            size += len(raw)
    return {"path": path, "content": "".join(chosen), "total_lines": total, "truncated": truncated}


def fs_write(ctx: ToolContext, args: Mapping[str, Any]) -> FsWrite:
    """``fs.write``: replace the file's content; ``{path, bytes_written}``."""
    path = read_arg(args, "path", STRING)
    data = _encode(read_arg(args, "content", STRING), "content")
    with _workspace(ctx, "fs.write") as ws:
        _checked(ctx, ws, "fs.write", path, write=True)
        fd = ws.open_for_write(path, make_parents=True)
    _write_all(fd, data)
    return {"path": path, "bytes_written": len(data)}


def fs_edit(ctx: ToolContext, args: Mapping[str, Any]) -> FsEdit:
    """``fs.edit``: replace ``old`` by ``new``; ``{path, replacements}``."""
    path = read_arg(args, "path", STRING)
    old, new = read_arg(args, "old", STRING), read_arg(args, "new", STRING)
    replace_all = read_arg(args, "replace_all", BOOLEAN, False)
    if not old:
        raise bad_arg("old", "a non-empty string", old)
    with _workspace(ctx, "fs.edit") as ws:
        _checked(ctx, ws, "fs.edit", path, write=True)
        text = _read_all(ws.open_for_read(path), EDIT_MAX_BYTES).decode("utf-8", "surrogateescape")
        count = text.count(old)
        if count == 0:
            raise ToolError(
                "tool_error",
                f"the text to replace does not occur in {path!r}; read the file and copy it",
                path=path,
                reason="old_not_found",
            )
        if count > 1 and not replace_all:
            raise ToolError(
                "tool_error",
                f"the text to replace occurs {count} times in {path!r}; add context to make "
                "it unique or set replace_all",
                path=path,
                reason="old_not_unique",
                count=count,
            )
        fd = ws.open_for_write(path, create=False)
    _write_all(fd, _encode(text.replace(old, new), "new"))
    return {"path": path, "replacements": count}


def _display_base(ws: Workspace, decision: PathDecision) -> tuple[str, ...]:
    """Components entries are shown under: relative to the root, or absolute outside it."""
    if decision.inside_root:
        rel = os.path.relpath(decision.resolved, ws.root)
        return () if rel == "." else tuple(rel.split("/"))
    return ("", *decision.resolved.strip("/").split("/"))


def fs_list(ctx: ToolContext, args: Mapping[str, Any]) -> FsList:
    """``fs.list``: ``{path, entries: [{path, type}], truncated}``, sorted by path."""
    path = read_arg(args, "path", STRING, ".")
    glob = read_arg(args, "glob", OPTIONAL_STRING)
    matcher = glob_regex(glob) if glob else None
    max_depth = 1 if glob is None else (None if "**" in glob else glob.count("/") + 1)
    found: list[FsListEntry] = []

    def visit(parts: tuple[str, ...], entry: os.DirEntry[str], _dir_fd: int) -> bool:
        if matcher is None or matcher.fullmatch("/".join(parts)):
            found.append({"path": "/".join((*base, *parts)), "type": entry_kind(entry)})
        return not ctx.cancelled.is_set()

    with _workspace(ctx, "fs.list") as ws:
        decision = _checked(ctx, ws, "fs.list", path, write=False)
        base = _display_base(ws, decision)
        complete = walk_tree(ws.open_dir(path), visit, max_depth, ws.hidden_dirs)
    found.sort(key=lambda e: e["path"])
    truncated = not complete or len(found) > LIST_MAX_ENTRIES
    return {"path": path, "entries": found[:LIST_MAX_ENTRIES], "truncated": truncated}


def fs_search(ctx: ToolContext, args: Mapping[str, Any]) -> FsSearch:
    """``fs.search``: ``{matches: [{path, line, text}], truncated, files_scanned, ...}``."""
    pattern = read_arg(args, "pattern", STRING)
    path = read_arg(args, "path", STRING, ".")
    matches = compile_search(pattern, read_arg(args, "regex", BOOLEAN, False))
    result: list[FsMatch] = []
    counts = {"files_scanned": 0, "skipped_sensitive": 0, "skipped_binary_or_large": 0}
    stopped = [False]

    def out_of_time() -> bool:
        return ctx.cancelled.is_set() or ctx.remaining_s() <= 0

    def scan(shown: str, fd: int) -> bool:
        found = search_file(fd, matches, out_of_time)
        if found is None:
            counts["skipped_binary_or_large"] += 1
            return True
        hits, whole = found
        counts["files_scanned"] += 1
        for number, text in hits:
            if len(result) >= SEARCH_MAX_MATCHES:
                stopped[0] = True
                return False
            result.append({"path": shown, "line": number, "text": text})
        if not whole or out_of_time():
            stopped[0] = True
            return False
        return True

    with _workspace(ctx, "fs.search") as ws:
        decision = _checked(ctx, ws, "fs.search", path, write=False)
        base = _display_base(ws, decision)

        def visit(parts: tuple[str, ...], entry: os.DirEntry[str], dir_fd: int) -> bool:
            if not entry.is_file(follow_symlinks=False):
                return True
            if ws.sensitive_pattern((*base, *parts)) is not None:
                counts["skipped_sensitive"] += 1
                return True
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
            try:
                fd = os.open(entry.name, flags, dir_fd=dir_fd)
            except OSError:
                return True
            return scan("/".join((*base, *parts)), fd)

        if os.path.isdir(decision.resolved):
            complete = walk_tree(ws.open_dir(path), visit, None, ws.hidden_dirs)
        else:
            complete = scan(path, ws.open_for_read(path))
    return {
        "pattern": pattern,
        "matches": result,
        "truncated": stopped[0] or not complete,
        "files_scanned": counts["files_scanned"],
        "skipped_sensitive": counts["skipped_sensitive"],
        "skipped_binary_or_large": counts["skipped_binary_or_large"],
    }


TOOLS: dict[str, ToolFn] = {
    "fs.read": fs_read,
    "fs.write": fs_write,
    "fs.edit": fs_edit,
    "fs.list": fs_list,
    "fs.search": fs_search,
}
"""The ``fs.*`` tool implementations by name."""
