"""What the built-in tools return: one ``TypedDict`` per JSON shape.

A tool's result is a plain dict (it is encoded into ``tool.completed`` and sent to the
model as it is); these types only say, for mypy and for a reader, which keys it has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

__all__ = [
    "AssetCommandOutput",
    "AssetDetail",
    "AssetList",
    "AssetSearch",
    "AssetSummary",
    "CommandOutput",
    "FsEdit",
    "FsList",
    "FsListEntry",
    "FsMatch",
    "FsRead",
    "FsSearch",
    "FsWrite",
    "HttpFetch",
    "HttpRedirect",
    "UnknownStepTool",
    "WorkflowPlan",
    "WorkflowStep",
]


class FsRead(TypedDict):
    """What ``fs.read`` returns."""

    path: str
    """The path as given."""
    content: str
    """The selected lines, joined."""
    total_lines: int
    """Lines in the file."""
    truncated: bool
    """Lines past ``limit`` or the byte cap were left out."""


class FsWrite(TypedDict):
    """What ``fs.write`` returns."""

    path: str
    """The path as given."""
    bytes_written: int
    """Bytes the file now holds."""


class FsEdit(TypedDict):
    """What ``fs.edit`` returns."""

    path: str
    """The path as given."""
    replacements: int
    """Occurrences of ``old`` replaced."""


class FsListEntry(TypedDict):
    """One ``fs.list`` entry."""

    path: str
    """Relative to the root, or absolute outside it."""
    type: str
    """``file``, ``dir``, ``symlink`` or ``other``."""


class FsList(TypedDict):
    """What ``fs.list`` returns."""

    path: str
    """The directory as given."""
    entries: list[FsListEntry]
    """At most ``LIST_MAX_ENTRIES``, sorted by path."""
    truncated: bool
    """Entries were left out."""


class FsMatch(TypedDict):
    """One matching line of ``fs.search``."""

    path: str
    """The file, shown as ``fs.list`` shows it."""
    line: int
    """1-based line number."""
    text: str
    """The line."""


class FsSearch(TypedDict):
    """What ``fs.search`` returns."""

    pattern: str
    """The pattern as given."""
    matches: list[FsMatch]
    """At most ``SEARCH_MAX_MATCHES``."""
    truncated: bool
    """The search stopped early (match cap, timeout, cancel)."""
    files_scanned: int
    """Files searched."""
    skipped_sensitive: int
    """Files skipped as sensitive."""
    skipped_binary_or_large: int
    """Files skipped as binary or too large."""


class HttpRedirect(TypedDict):
    """One redirect ``http.fetch`` followed."""

    url: str
    """The URL that answered with a redirect."""
    status_code: int
    """Its status (301, 302, 303, 307 or 308)."""
    location: str
    """The absolute URL it pointed to."""


class HttpFetch(TypedDict):
    """What ``http.fetch`` returns."""

    status_code: int
    """The final response's status."""
    headers: dict[str, str]
    """Its headers, names lower-cased, repeats joined with ``, ``."""
    body: str
    """Its body, decoded as UTF-8 (bad bytes replaced); empty for ``HEAD``."""
    url: str
    """The URL that answered last."""
    redirects: list[HttpRedirect]
    """The redirects followed, in order."""


class CommandOutput(TypedDict):
    """What ``command.run`` returns (an asset command returns the same)."""

    exit_code: int
    """The process's exit status."""
    stdout: str
    """Its standard output, trimmed to fit the output caps."""
    stderr: str
    """Its standard error, trimmed the same way."""
    stdout_truncated: bool
    """``stdout`` was cut (by the sandbox or to fit)."""
    stderr_truncated: bool
    """``stderr`` was cut."""
    duration_ms: int
    """Wall time of the run."""
    killed_by: NotRequired[str]
    """The limit that killed the process, when one did."""


class AssetCommandOutput(CommandOutput):
    """What a command asset's tool (``command.run.<key>``) returns: the argv it ran too."""

    argv: list[str]
    """The rendered argv."""


class AssetSummary(TypedDict):
    """One asset as ``asset.list`` and ``asset.search`` show it."""

    key: str
    """The asset's key."""
    description: str
    """Its description."""
    valid: bool
    """Whether it parsed."""
    reason: NotRequired[str | None]
    """Why it is invalid (invalid assets only)."""
    tool: NotRequired[str]
    """The tool generated from it (valid commands and workflows only)."""


class AssetList(TypedDict):
    """What ``asset.list`` returns."""

    type: str
    """The type listed."""
    generation: int
    """The catalog's load generation."""
    count: int
    """Assets listed."""
    assets: list[AssetSummary]
    """The assets of the type, sorted by key."""


class AssetSearch(TypedDict):
    """What ``asset.search`` returns."""

    type: str
    """The type searched."""
    query: str
    """The query as given."""
    count: int
    """Assets found."""
    assets: list[AssetSummary]
    """Key matches first, then the others."""


class WorkflowStep(TypedDict):
    """One step of a workflow asset (its ``steps`` front matter, checked)."""

    tool: str
    """The tool the step calls."""
    args: dict[str, object]
    """Its arguments, ``{{name}}`` placeholders not yet rendered."""


class AssetDetail(TypedDict):
    """What ``asset.get`` returns: the whole asset, or the preview of an invalid one."""

    type: str
    """The asset's type."""
    key: str
    """Its key."""
    valid: bool
    """Whether it parsed."""
    reason: NotRequired[str | None]
    """Why it is invalid (invalid assets only)."""
    detail: NotRequired[str | None]
    """What is wrong and where (invalid assets only)."""
    description: NotRequired[str]
    """Its description (valid assets only)."""
    path: str
    """The file, relative to the project root."""
    body: str
    """The Markdown body (an invalid asset's first characters)."""
    input_schema: NotRequired[Mapping[str, Any]]
    """JSON Schema of the inputs (commands and workflows)."""
    argv: NotRequired[list[str]]
    """The argv template (commands)."""
    steps: NotRequired[list[WorkflowStep]]
    """The steps (workflows)."""
    tool: NotRequired[str]
    """The tool generated from it (valid commands and workflows only)."""


class WorkflowPlan(TypedDict):
    """What a ``workflow.run.<key>`` tool returns: the plan the ToolRunner then runs."""

    workflow: str
    """The workflow's key."""
    steps: list[WorkflowStep]
    """Its steps, arguments rendered."""


class UnknownStepTool(TypedDict):
    """Why a workflow is unavailable: a step names no tool of the project."""

    code: str
    """Always ``denied``."""
    reason: str
    """Always ``unknown_step_tool``."""
    step: int
    """The first such step (0-based)."""
    step_tool: str
    """The tool it names."""
