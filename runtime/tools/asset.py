"""The asset tools and the tools generated from command and workflow assets.

``asset.list``, ``asset.search`` and ``asset.get`` read the project's catalog
(:func:`catalog_for`, cached per root); :func:`asset_tools` makes ``command.run.<key>``
(renders the argv, one placeholder per element, and runs it through ``command.run``) and
``workflow.run.<key>`` (runs nothing: returns the plan the ToolRunner runs) from the valid
assets, each keeping the asset version it was built from. ``docs/assets.md`` says what
each does; :mod:`runtime.tools.results` declares what each returns.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Mapping
from typing import Any, Literal

from runtime.errors import ToolError
from runtime.guard.shapes.schema import validate_args
from runtime.tools.asset_store import (
    ASSET_TYPES,
    MAX_ASSETS_PER_TYPE,
    PREVIEW_CHARS,
    Asset,
    AssetCatalog,
    load_assets,
    open_dir,
    render_argv,
    render_step_args,
    resolve_inputs,
)
from runtime.tools.base import ToolContext, ToolFn, ToolSpec
from runtime.tools.results import (
    AssetCommandOutput,
    AssetDetail,
    AssetList,
    AssetSearch,
    AssetSummary,
    UnknownStepTool,
    WorkflowPlan,
)

__all__ = [
    "SPECS",
    "TOOLS",
    "asset_get",
    "asset_list",
    "asset_search",
    "asset_tools",
    "catalog_for",
    "tool_name",
    "unavailable_workflows",
]

_TYPE = {"type": "string", "enum": list(ASSET_TYPES), "description": "The kind of asset."}

SPECS: list[ToolSpec] = [
    ToolSpec(
        name="asset.list",
        description="List the project's skills, commands or workflows, with their validity.",
        input_schema={
            "type": "object",
            "properties": {"type": _TYPE},
            "required": ["type"],
            "additionalProperties": False,
        },
        read_only=True,
        path_args=(),
        inline=True,
        kind="asset",
    ),
    ToolSpec(
        name="asset.search",
        description=(
            "Find assets of one type whose key, description or text contains the query "
            "(case-insensitive); key matches first."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "type": _TYPE,
                "query": {"type": "string", "minLength": 1, "maxLength": 200},
            },
            "required": ["type", "query"],
            "additionalProperties": False,
        },
        read_only=True,
        path_args=(),
        inline=True,
        kind="asset",
    ),
    ToolSpec(
        name="asset.get",
        description="Read one asset: its description, text and, for commands and workflows, "
        "its inputs and template.",
        input_schema={
            "type": "object",
            "properties": {
                "type": _TYPE,
                "key": {"type": "string", "minLength": 1, "maxLength": 255},
            },
            "required": ["type", "key"],
            "additionalProperties": False,
        },
        read_only=True,
        path_args=(),
        inline=True,
        kind="asset",
    ),
]
"""The ``asset.*`` specs."""

_SCHEMAS = {spec.name: spec.input_schema for spec in SPECS}

# --- the cached catalog ------------------------------------------------------------------

_LOCK = threading.Lock()
_CACHE: dict[str, tuple[tuple[Any, ...], AssetCatalog]] = {}


def _entry(name: str, dir_fd: int) -> tuple[Any, ...]:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return (name, None)
    return (name, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns)


def _fingerprint(root: str) -> tuple[Any, ...]:
    """Identity and mtime of ``.roost``, its type directories and their files.

    Walked by descriptor with ``O_NOFOLLOW`` as :func:`load_assets` does: a ``.roost`` or a
    type directory replaced by a symlink is fingerprinted as the link, never listed
    through it; at most :data:`MAX_ASSETS_PER_TYPE` + 1 entries of a directory count.
    """
    parts: list[Any] = []
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return (("root", None),)
    try:
        parts.append(_entry(".roost", root_fd))
        roost_fd = open_dir(".roost", root_fd)
    finally:
        os.close(root_fd)
    if roost_fd is None:
        return tuple(parts)
    try:
        for kind in ASSET_TYPES:
            parts.append((kind, *_entry(kind, roost_fd)))
            type_fd = open_dir(kind, roost_fd)
            if type_fd is None:
                continue
            try:
                with os.scandir(type_fd) as entries:
                    for count, entry in enumerate(entries):
                        if count > MAX_ASSETS_PER_TYPE:
                            parts.append((kind, "more"))
                            break
                        info = entry.stat(follow_symlinks=False)
                        parts.append(
                            (kind, entry.name, info.st_ino, info.st_size, info.st_mtime_ns)
                        )
            except OSError:
                parts.append((kind, "unlistable"))
            finally:
                os.close(type_fd)
    finally:
        os.close(roost_fd)
    return tuple(sorted(parts, key=repr))


def catalog_for(root: str) -> AssetCatalog:
    """Return the project's catalog, reloaded when a file or directory under ``.roost`` changed.

    The cache is keyed by root and by every entry's inode, size and ``mtime_ns``; each
    reload increments the catalog's ``generation``.
    """
    fingerprint = _fingerprint(root)
    with _LOCK:
        cached = _CACHE.get(root)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        generation = cached[1].generation + 1 if cached is not None else 1
        catalog = load_assets(root, generation=generation)
        _CACHE[root] = (fingerprint, catalog)
        return catalog


# --- asset.list / search / get ------------------------------------------------------------


_RUN_PREFIX = {"commands": "command.run.", "workflows": "workflow.run."}
"""The generated tool name's prefix for each asset type that runs."""

_KindField = Literal["input_schema", "argv", "steps"]
_KIND_FIELDS: tuple[_KindField, ...] = ("input_schema", "argv", "steps")
"""The fields only some asset types have; ``asset.get`` shows those an asset has."""


def tool_name(asset: Asset) -> str | None:
    """Return the generated tool's name for a valid command or workflow, else None."""
    if not asset.valid or asset.type == "skills":
        return None
    return _RUN_PREFIX[asset.type] + asset.key


def _runnable(catalog: AssetCatalog, type: str) -> list[tuple[Asset, str]]:
    """The valid assets of ``type`` (commands or workflows), each with its tool's name."""
    return [(a, n) for a in catalog.assets if a.type == type and (n := tool_name(a)) is not None]


def _summary(asset: Asset) -> AssetSummary:
    out: AssetSummary = {"key": asset.key, "description": asset.description, "valid": asset.valid}
    if not asset.valid:
        out["reason"] = asset.reason
    name = tool_name(asset)
    if name is not None:
        out["tool"] = name
    return out


def asset_list(ctx: ToolContext, args: Mapping[str, Any]) -> AssetList:
    """List the assets of ``args["type"]``: ``{type, generation, count, assets}``."""
    validate_args(_SCHEMAS["asset.list"], args)
    catalog = catalog_for(ctx.root)
    assets = [_summary(a) for a in catalog.of_type(args["type"])]
    return {
        "type": args["type"],
        "generation": catalog.generation,
        "count": len(assets),
        "assets": assets,
    }


def asset_search(ctx: ToolContext, args: Mapping[str, Any]) -> AssetSearch:
    """Search one type's assets for ``query``: ``{type, query, count, assets}``."""
    validate_args(_SCHEMAS["asset.search"], args)
    found = [_summary(a) for a in catalog_for(ctx.root).search(args["type"], args["query"])]
    return {"type": args["type"], "query": args["query"], "count": len(found), "assets": found}


def asset_get(ctx: ToolContext, args: Mapping[str, Any]) -> AssetDetail:
    """Return one asset, or the preview of an invalid one; unknown → ``asset_not_found``."""
    validate_args(_SCHEMAS["asset.get"], args)
    kind, key = args["type"], args["key"]
    asset = catalog_for(ctx.root).get(kind, key)
    if asset is None:
        raise ToolError(
            "tool_error",
            f"no {kind} asset named {key!r}; asset.list {{type: {kind!r}}} shows the keys",
            reason="asset_not_found",
            type=kind,
            key=key,
        )
    if not asset.valid:
        return {
            "type": asset.type,
            "key": asset.key,
            "valid": asset.valid,
            "reason": asset.reason,
            "detail": asset.detail,
            "path": asset.path,
            "body": asset.body[:PREVIEW_CHARS],
        }
    out: AssetDetail = {
        "type": asset.type,
        "key": asset.key,
        "valid": asset.valid,
        "description": asset.description,
        "path": asset.path,
        "body": asset.body,
    }
    for field in _KIND_FIELDS:
        if getattr(asset, field) is not None:
            out[field] = getattr(asset, field)
    name = tool_name(asset)
    if name is not None:
        out["tool"] = name
    return out


TOOLS: dict[str, ToolFn] = {
    "asset.list": asset_list,
    "asset.search": asset_search,
    "asset.get": asset_get,
}
"""The ``asset.*`` implementations by name."""


# --- generated tools ----------------------------------------------------------------------


def _run_command_asset(
    asset: Asset, ctx: ToolContext, args: Mapping[str, Any]
) -> AssetCommandOutput:
    from runtime.tools.command import command_run  # noqa: PLC0415

    argv = render_argv(asset, args)
    result = command_run(ctx, {"command": argv}, tool=tool_name(asset) or "command.run")
    return {**result, "argv": argv}


def _plan_workflow(asset: Asset, ctx: ToolContext, args: Mapping[str, Any]) -> WorkflowPlan:
    inputs = resolve_inputs(asset, args)
    return {
        "workflow": asset.key,
        "steps": [
            {"tool": step["tool"], "args": render_step_args(step["args"], inputs)}
            for step in asset.steps or []
        ],
    }


def _command_fn(asset: Asset) -> ToolFn:
    # A partial of a module function, not a closure: the registry is pickled into the
    # Policy and ToolRunner actors' set-up messages (one registry per project).
    return functools.partial(_run_command_asset, asset)


def _workflow_fn(asset: Asset) -> ToolFn:
    return functools.partial(_plan_workflow, asset)


def _workflow_spec(asset: Asset, name: str, known: Mapping[str, ToolSpec]) -> ToolSpec:
    specs = [known.get(step["tool"]) for step in asset.steps or []]
    return ToolSpec(
        name=name,
        description=asset.description or f"Run the {asset.key} workflow.",
        input_schema=dict(asset.input_schema or {}),
        read_only=all(s is not None and s.read_only for s in specs),
        writes=any(s is None or s.writes for s in specs),
        network_capable=any(s is None or s.network_capable for s in specs),
        runs_commands=any(s is None or s.runs_commands for s in specs),
        kind="workflow",
    )


def unavailable_workflows(
    catalog: AssetCatalog, known: Mapping[str, ToolSpec]
) -> dict[str, UnknownStepTool]:
    """``{workflow.run.<key>: reason}`` for each valid workflow with a step no tool in ``known`` is.

    ``known`` is the complete registry (built-ins, asset commands, MCP tools). The reason
    is ``{code: denied, reason: unknown_step_tool, step, step_tool}`` for the first such
    step: the policy refuses the workflow with it before any step runs, and the listing
    shows it.
    """
    out: dict[str, UnknownStepTool] = {}
    for asset, name in _runnable(catalog, "workflows"):
        for index, step in enumerate(asset.steps or []):
            if step["tool"] not in known:
                out[name] = {
                    "code": "denied",
                    "reason": "unknown_step_tool",
                    "step": index,
                    "step_tool": step["tool"],
                }
                break
    return out


def asset_tools(
    catalog: AssetCatalog, known: Mapping[str, ToolSpec] | None = None
) -> tuple[list[ToolSpec], dict[str, ToolFn]]:
    """Build ``command.run.<key>`` and ``workflow.run.<key>`` for the catalog's valid assets.

    ``known`` maps the other tools' names to their specs (the registry passes every other
    tool, MCP tools included); a workflow's safety flags are the union of its steps'. A
    step whose tool is not known counts as the most sensitive tool there is (writes, runs
    commands, reaches the network, never read-only); :func:`unavailable_workflows` names
    such workflows so the policy refuses them. Generated command tools count as known for
    the workflows built with them.
    """
    specs: list[ToolSpec] = []
    fns: dict[str, ToolFn] = {}
    lookup: dict[str, ToolSpec] = dict(known or {})
    for asset, name in _runnable(catalog, "commands"):
        spec = ToolSpec(
            name=name,
            description=asset.description or f"Run the {asset.key} command.",
            input_schema=dict(asset.input_schema or {}),
            runs_commands=True,
            kills_on_cancel=True,
        )
        specs.append(spec)
        lookup[name] = spec
        fns[name] = _command_fn(asset)
    for asset, name in _runnable(catalog, "workflows"):
        specs.append(_workflow_spec(asset, name, lookup))
        fns[name] = _workflow_fn(asset)
    return specs, fns
