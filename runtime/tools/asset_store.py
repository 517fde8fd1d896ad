"""Project assets: skills, commands and workflows read from ``ROOT/.roost/<type>/*.md``.

Each asset is a Markdown file with an optional frontmatter block (the grammar is in
:mod:`runtime.tools.frontmatter` and ``docs/assets.md``; there is no YAML dependency). Loading is
plain code: :func:`load_assets` returns a frozen :class:`AssetCatalog`; an asset that does
not parse stays in the catalog as an invalid entry (``valid=False``) carrying a reason
code, or, with ``strict=True``, fails the load with ``AssetLoadFailedError``.

Loading never follows a symlink out of the root: ``.roost`` and the type directories are
opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to their parent's fd (a symlinked
directory is skipped), each file with ``O_NOFOLLOW`` (a symlinked file is invalid with
reason ``symlink`` and is not read), and files over :data:`MAX_ASSET_BYTES` are not parsed.

The reason codes of invalid assets are tabled in ``docs/assets.md`` ("Invalid assets").

A catalog is bounded as a whole too (a tool process may have filled ``.roost``): see
:data:`MAX_ASSETS_PER_TYPE` and :data:`MAX_CATALOG_BYTES`.

Templating (:func:`render_argv`, :func:`render_step_args`) substitutes ``{{name}}``
placeholders inside one string at a time: an input never splits into several argv
elements and is never read by a shell.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from runtime.errors import AssetLoadFailedError
from runtime.guard.shapes.schema import validate_args
from runtime.tools.asset_kinds import EMPTY_SCHEMA, KIND_FIELDS, MAX_WORKFLOW_STEPS
from runtime.tools.base import LoadProblem
from runtime.tools.frontmatter import (
    FrontmatterError,
    parse_frontmatter,
    render_text,
    render_value,
)
from runtime.tools.results import WorkflowStep

__all__ = [
    "ASSET_TYPES",
    "KEY_PATTERN",
    "MAX_ASSETS_PER_TYPE",
    "MAX_ASSET_BYTES",
    "MAX_CATALOG_BYTES",
    "MAX_WORKFLOW_STEPS",
    "PREVIEW_CHARS",
    "Asset",
    "AssetCatalog",
    "AssetType",
    "FrontmatterError",
    "load_assets",
    "open_dir",
    "parse_asset",
    "render_argv",
    "render_step_args",
    "resolve_inputs",
]

AssetType = Literal["skills", "commands", "workflows"]
"""The three kinds of asset, named like their directories."""

ASSET_TYPES: tuple[AssetType, ...] = ("commands", "skills", "workflows")
"""Every asset type, in catalog order."""

KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
"""What a file stem must look like to be an asset key."""

MAX_ASSET_BYTES = 256 * 1024
"""Largest asset file that is parsed; a larger one is invalid with ``too_large``."""

MAX_ASSETS_PER_TYPE = 500
"""Most files of one type that are loaded; the rest are one invalid ``too_many_assets`` entry."""

MAX_CATALOG_BYTES = 16 * 1024 * 1024
"""Most bytes of asset files read for one catalog; files past it are invalid ``too_large``."""

PREVIEW_CHARS = 2000
"""Characters of an invalid asset's text kept as its preview body."""


class Asset(msgspec.Struct, frozen=True, kw_only=True):
    """One asset file, parsed (``valid``) or not (``reason`` says why)."""

    type: AssetType
    """``skills``, ``commands`` or ``workflows``."""
    key: str
    """The file stem, e.g. ``git-log`` for ``git-log.md``."""
    description: str = ""
    """From the frontmatter, else the first line of the body without leading ``#``."""
    body: str = ""
    """The Markdown after the frontmatter; for an invalid asset, the first 2000 characters."""
    valid: bool = True
    """Whether the asset parsed."""
    reason: str | None = None
    """Why the asset is invalid (a reason code), or None."""
    detail: str | None = None
    """A sentence saying what is wrong and where, for invalid assets."""
    input_schema: Mapping[str, Any] | None = None
    """JSON Schema of the inputs (commands and workflows)."""
    argv: list[str] | None = None
    """The argv template (commands)."""
    steps: list[WorkflowStep] | None = None
    """The steps (workflows)."""
    path: str = ""
    """The file, relative to the project root."""


class AssetCatalog(msgspec.Struct, frozen=True, kw_only=True):
    """Every asset of a project at one point in time, sorted by type then key."""

    assets: list[Asset] = []
    """The assets, valid and invalid."""
    generation: int = 1
    """Monotonic load generation (``project.assets_loaded``/``_reloaded``)."""

    def counts(self) -> dict[str, int]:
        """Count the valid assets per type; every type is present."""
        counts: dict[str, int] = dict.fromkeys(ASSET_TYPES, 0)
        for asset in self.assets:
            counts[asset.type] += asset.valid
        return counts

    def errors(self) -> list[LoadProblem]:
        """Invalid assets as ``{type, key, reason}``, in catalog order."""
        return [
            {"type": a.type, "key": a.key, "reason": a.reason} for a in self.assets if not a.valid
        ]

    def get(self, type: str, key: str) -> Asset | None:
        """Return the asset of that type and key, valid or not, or None."""
        for asset in self.assets:
            if asset.type == type and asset.key == key:
                return asset
        return None

    def of_type(self, type: str) -> list[Asset]:
        """Return the assets of one type, sorted by key."""
        return [a for a in self.assets if a.type == type]

    def search(self, type: str, query: str) -> list[Asset]:
        """Assets whose key, description or body contains ``query`` (case-insensitive).

        Key matches come first, then the others; each group is sorted by key.
        """
        needle = query.casefold()
        found = [
            a
            for a in self.of_type(type)
            if needle in a.key.casefold()
            or needle in a.description.casefold()
            or needle in a.body.casefold()
        ]
        return sorted(found, key=lambda a: (needle not in a.key.casefold(), a.key))


# --- per-kind rules ---------------------------------------------------------------------


def _first_line(body: str) -> str:
    for line in body.split("\n"):
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return stripped[:200]
    return ""


def parse_asset(type: AssetType, key: str, text: str, path: str) -> Asset:
    """Parse one asset's text; raise :class:`FrontmatterError` when it is invalid."""
    fields, body = parse_frontmatter(text)
    description = fields.get("description", "")
    if not isinstance(description, str):
        raise FrontmatterError("invalid_description", "description must be a string")
    return Asset(
        type=type,
        key=key,
        description=description.strip() or _first_line(body),
        body=body,
        path=path,
        **KIND_FIELDS[type](fields),
    )


# --- loading ----------------------------------------------------------------------------


def _printable(name: str) -> str:
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(c if c.isprintable() else "\ufffd" for c in text)[:128]


def open_dir(name: str, parent_fd: int) -> int | None:
    """The directory ``name`` under ``parent_fd``, opened without following a symlink, or None."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except OSError:  # missing, a symlink (ELOOP), not a directory, unreadable: skipped
        return None


def _read(name: str, dir_fd: int) -> tuple[bytes | None, str | None, str]:
    """Read one file: ``(data, None, "")`` or ``(prefix_or_None, reason, detail)``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None, "symlink", "the asset file is a symlink; symlinks are not followed"
        return None, "unreadable", f"the asset file cannot be opened: {e.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not_a_regular_file", "the asset is not a regular file"
        data = os.read(fd, MAX_ASSET_BYTES + 1)
        while len(data) <= MAX_ASSET_BYTES and (chunk := os.read(fd, MAX_ASSET_BYTES + 1)):
            data += chunk
    except OSError as e:
        return None, "unreadable", f"the asset file cannot be read: {e.strerror}"
    finally:
        os.close(fd)
    if len(data) > MAX_ASSET_BYTES:
        return data[: PREVIEW_CHARS * 4], "too_large", f"larger than {MAX_ASSET_BYTES} bytes"
    return data, None, ""


def _load_file(type: AssetType, name: str, dir_fd: int, budget: list[int]) -> Asset:
    stem = name[: -len(".md")]
    key, path = _printable(stem), f".roost/{type}/{_printable(name)}"
    data: bytes | None
    reason: str | None
    if budget[0] <= 0:
        data, reason = None, "too_large"
        detail = f"the catalog's files already hold {MAX_CATALOG_BYTES} bytes"
    else:
        data, reason, detail = _read(name, dir_fd)
        budget[0] -= len(data or b"")
    preview = (data or b"").decode("utf-8", "replace").removeprefix("\ufeff")[:PREVIEW_CHARS]
    if reason is None and not KEY_PATTERN.match(stem):
        reason = "invalid_key"
        detail = f"the file name must be KEY.md with KEY matching {KEY_PATTERN.pattern}"
    if reason is None:
        try:
            text = (data or b"").decode("utf-8").removeprefix("\ufeff")
            return parse_asset(type, key, text, path)
        except UnicodeDecodeError as e:
            reason, detail = "invalid_encoding", f"the file is not UTF-8 ({e.reason})"
        except FrontmatterError as e:
            reason, detail = e.reason, e.detail
    return Asset(
        type=type, key=key, body=preview, valid=False, reason=reason, detail=detail, path=path
    )


def _too_many(type: AssetType, extra: int) -> Asset:
    return Asset(
        type=type,
        key=f"+{extra}",
        valid=False,
        reason="too_many_assets",
        detail=f"{extra} more {type} files than the {MAX_ASSETS_PER_TYPE} loaded were left out",
        path=f".roost/{type}/",
    )


def load_assets(root: str, *, strict: bool = False, generation: int = 1) -> AssetCatalog:
    """Load every asset under ``root/.roost``; a missing ``.roost`` gives an empty catalog.

    With ``strict``, the first invalid asset (catalog order) raises
    ``AssetLoadFailedError(message, type=, key=, reason=, path=)``. ``OSError`` when the
    root itself cannot be opened as a directory (callers check it first).
    """
    assets: list[Asset] = []
    budget = [MAX_CATALOG_BYTES]
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        roost_fd = open_dir(".roost", root_fd)
    finally:
        os.close(root_fd)
    if roost_fd is not None:
        try:
            for type in ASSET_TYPES:
                type_fd = open_dir(type, roost_fd)
                if type_fd is None:
                    continue
                try:
                    names = sorted(
                        e.name
                        for e in os.scandir(type_fd)
                        if e.name.endswith(".md") and not e.name.startswith(".")
                    )
                    extra = names[MAX_ASSETS_PER_TYPE:]
                    names = names[:MAX_ASSETS_PER_TYPE]
                    assets.extend(_load_file(type, name, type_fd, budget) for name in names)
                    if extra:
                        assets.append(_too_many(type, len(extra)))
                finally:
                    os.close(type_fd)
        finally:
            os.close(roost_fd)
    assets.sort(key=lambda a: (a.type, a.key))
    catalog = AssetCatalog(assets=assets, generation=generation)
    if strict:
        for asset in assets:
            if not asset.valid:
                raise AssetLoadFailedError(
                    f"asset {asset.path} is invalid ({asset.reason}): {asset.detail}; fix it "
                    "or start the project without strict_asset_loading",
                    type=asset.type,
                    key=asset.key,
                    reason=asset.reason,
                    path=asset.path,
                )
    return catalog


# --- templating -------------------------------------------------------------------------


def resolve_inputs(asset: Asset, inputs: Mapping[str, object]) -> dict[str, object]:
    """Validate ``inputs`` against the asset's input schema; add declared defaults.

    Raises ``ToolError("invalid_tool_args", kind=...)`` (see :mod:`runtime.guard.shapes.schema`).
    """
    schema = asset.input_schema or EMPTY_SCHEMA
    validate_args(schema, inputs)
    resolved: dict[str, object] = dict(inputs)
    for name, sub in (schema.get("properties") or {}).items():
        if name not in resolved and isinstance(sub, dict) and "default" in sub:
            resolved[name] = sub["default"]
    return resolved


def render_argv(asset: Asset, inputs: Mapping[str, object]) -> list[str]:
    """Return the command's argv with each ``{{name}}`` replaced inside its own element.

    Non-string inputs are written as compact JSON (``5``, ``true``). Raises
    ``ToolError("invalid_tool_args", ...)`` for inputs the schema refuses or that are missing.
    """
    if asset.type != "commands" or not asset.valid or asset.argv is None:
        raise ValueError(f"asset {asset.type}/{asset.key} is not a valid command")
    resolved = resolve_inputs(asset, inputs)
    return [render_text(element, resolved) for element in asset.argv]


def render_step_args(
    step_args: Mapping[str, object], inputs: Mapping[str, object]
) -> dict[str, object]:
    """Return a workflow step's arguments with the placeholders in string values replaced.

    A string that is exactly one placeholder takes the input's value with its type
    (``"{{limit}}"`` → ``5``); placeholders inside longer strings are substituted as text.
    Keys are not templated. Raises ``ToolError`` for a missing input.
    """
    rendered: dict[str, object] = render_value(step_args, inputs)
    return rendered
