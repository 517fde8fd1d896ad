"""What each kind of asset's frontmatter must hold: ``input_schema``, ``argv``, ``steps``.

:data:`KIND_FIELDS` reads, for each kind, the fields only it has (a skill has none).

The checks are rule tables (:mod:`runtime.tools.rules`) in the order they apply; a broken
one is a :class:`~runtime.tools.frontmatter.FrontmatterError` with the reason code
``docs/assets.md`` tables. Every placeholder they use must be declared by the asset's
``input_schema``. :mod:`runtime.tools.asset_store` applies them while it parses an asset.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict

from runtime.errors import ToolError
from runtime.guard.shapes.schema import check_schema, validate_args
from runtime.tools.frontmatter import FrontmatterError, placeholder_names
from runtime.tools.results import WorkflowStep
from runtime.tools.rules import Check, check

__all__ = [
    "EMPTY_SCHEMA",
    "KIND_FIELDS",
    "MAX_WORKFLOW_STEPS",
    "KindFields",
    "command_argv",
    "workflow_steps",
]

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
"""The input schema of a command or workflow that declares none."""

MAX_WORKFLOW_STEPS = 50
"""Most steps a workflow may have."""

_STEP_TOOL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def _check_known(names: list[str], schema: Mapping[str, Any], where: str) -> None:
    known = schema.get("properties") or {}
    unknown = sorted({n for n in names if n not in known})
    if unknown:
        raise FrontmatterError(
            "unknown_placeholder",
            f"{where} uses {{{{{unknown[0]}}}}}, which input_schema.properties does not "
            "declare; add it there or fix the name",
        )


_ARGV_RULES = (
    Check(
        lambda fields, **_: "argv" not in fields,
        "missing_argv",
        "a command needs 'argv: [\"program\", ...]'",
    ),
    Check(
        lambda argv, **_: (
            not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv))
        ),
        "invalid_argv",
        "argv must be a non-empty JSON list of strings",
    ),
    Check(lambda argv, **_: not argv[0], "invalid_argv", "argv[0] (the program) must not be empty"),
)
"""What a command's ``argv`` must be, checked in order."""

_STEPS_RULES = (
    Check(
        lambda fields, **_: "steps" not in fields,
        "missing_steps",
        "a workflow needs 'steps: [{{\"tool\": ...}}]'",
    ),
    Check(
        lambda steps, **_: not isinstance(steps, list) or not 1 <= len(steps) <= MAX_WORKFLOW_STEPS,
        "invalid_steps",
        f"steps must be a JSON list of 1 to {MAX_WORKFLOW_STEPS} steps",
    ),
)
"""What a workflow's ``steps`` must be."""

_STEP_SHAPE = (
    Check(
        lambda step, **_: not isinstance(step, dict) or bool(set(step) - {"tool", "args"}),
        "invalid_steps",
        "{where} must be an object {{tool, args}}",
    ),
)
"""What each step must be before its keys are read."""

_STEP_RULES = (
    Check(
        lambda tool, **_: not isinstance(tool, str) or not _STEP_TOOL.match(tool),
        "invalid_steps",
        "{where}.tool must be a tool name",
    ),
    Check(
        lambda tool, **_: tool.startswith("workflow.run."),
        "invalid_steps",
        "{where} calls {tool}; workflows cannot nest",
    ),
    Check(
        lambda args, **_: not isinstance(args, dict),
        "invalid_steps",
        "{where}.args must be a JSON object",
    ),
)
"""What each step's ``tool`` and ``args`` must be, checked in order."""


def command_argv(fields: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """A command's ``argv``, checked; raise :class:`FrontmatterError` when it is not usable."""
    check(_ARGV_RULES, FrontmatterError, fields=fields, argv=fields.get("argv"))
    argv: list[str] = fields["argv"]
    for index, element in enumerate(argv):
        _check_known(placeholder_names(element, f"argv[{index}]"), schema, f"argv[{index}]")
    return list(argv)


@functools.singledispatch
def _inside(value: Any) -> Iterable[Any]:
    """The values directly inside a JSON value: none inside a string, a number, ..."""
    return ()


@_inside.register(dict)
def _(value: dict[Any, Any]) -> Iterable[Any]:
    return value.values()


@_inside.register(list)
def _(value: list[Any]) -> Iterable[Any]:
    return value


def _walk_strings(value: Any) -> list[str]:
    stack, out = [value], []
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        stack.extend(_inside(item))
    return out


def workflow_steps(fields: Mapping[str, Any], schema: Mapping[str, Any]) -> list[WorkflowStep]:
    """A workflow's ``steps``, checked; raise :class:`FrontmatterError` when they are not usable."""
    check(_STEPS_RULES, FrontmatterError, fields=fields, steps=fields.get("steps"))
    steps: list[Any] = fields["steps"]
    out: list[WorkflowStep] = []
    for index, step in enumerate(steps):
        where = f"steps[{index}]"
        check(_STEP_SHAPE, FrontmatterError, step=step, where=where)
        tool, args = step.get("tool"), step.get("args", {})
        check(_STEP_RULES, FrontmatterError, tool=tool, args=args, where=where)
        for text in _walk_strings(args):
            _check_known(placeholder_names(text, f"{where}.args"), schema, f"{where}.args")
        out.append({"tool": tool, "args": args})
    return out


def _input_schema(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    schema = fields.get("input_schema", EMPTY_SCHEMA)
    try:
        check_schema(schema)
        if schema.get("type", "object") != "object":
            raise ValueError("the top-level type must be 'object'")
        for name, sub in (schema.get("properties") or {}).items():
            if "default" in sub:
                wrapper = {"type": "object", "properties": {name: sub}}
                validate_args(wrapper, {name: sub["default"]})
    except (ValueError, ToolError) as e:
        raise FrontmatterError("invalid_input_schema", f"input_schema is not usable: {e}") from e
    return dict(schema)


class KindFields(TypedDict, total=False):
    """The fields of an asset that only some kinds have (``runtime.tools.asset_store.Asset``)."""

    input_schema: Mapping[str, Any]
    """JSON Schema of the inputs (commands and workflows)."""
    argv: list[str]
    """The argv template (commands)."""
    steps: list[WorkflowStep]
    """The steps (workflows)."""


def _command_fields(fields: Mapping[str, Any]) -> KindFields:
    schema = _input_schema(fields)
    return {"input_schema": schema, "argv": command_argv(fields, schema)}


def _workflow_fields(fields: Mapping[str, Any]) -> KindFields:
    schema = _input_schema(fields)
    return {"input_schema": schema, "steps": workflow_steps(fields, schema)}


KIND_FIELDS: dict[str, Callable[[Mapping[str, Any]], KindFields]] = {
    "skills": lambda fields: {},
    "commands": _command_fields,
    "workflows": _workflow_fields,
}
"""How each kind of asset reads its own frontmatter fields."""
