"""The tool registry: every tool a project offers, by name, with its spec and implementation.

:meth:`ToolRegistry.for_project` gathers the built-in tool modules (``runtime.tools.fs``,
``runtime.tools.command``, ``runtime.tools.http``, ``runtime.tools.asset``; each exports
``SPECS`` and ``TOOLS``) and the tools generated from the project's assets
(``command.run.<key>``, ``workflow.run.<key>``), from its ``mcp_servers``
(``mcp.<server>.<tool>``, :mod:`runtime.tools.mcp_client.tools`) and from its ``a2a_agents``
(``a2a.<agent>.send``, :mod:`runtime.tools.a2a_client.tools`); servers and agents that could not be
listed are in :attr:`ToolRegistry.remote_errors`. A built-in module that fails to import is
left out and named in :attr:`ToolRegistry.import_errors`, so one broken module never takes
the others down; it is recorded with the asset errors (``project.assets_loaded``, type
``tool_module``), a project problem like them. A module whose ``SPECS`` and ``TOOLS`` do not
pair up (a spec without a function, a function without a spec, a ``TOOLS`` key that is not
its spec's name) is a programming error: :func:`paired` raises ``tool_spec_mismatch``.

The registry is read-only once built, and picklable (the generated tools are partials of
module functions): a project builds it once, at its start, and hands that one value to its
Policy and ToolRunner actors (also when they are restarted) and answers ``list_tools``
from it, so what is listed, what is decided and what runs are the same asset version.

``allow_tools`` / ``deny_tools`` are applied by :func:`list_rule` (an exact name or an
``fnmatch`` glob such as ``fs.*``), both for what ``list_tools`` and the model see
(:meth:`ToolRegistry.visible`) and for what the policy lets run
(:func:`runtime.policy.decisions.decide`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

import msgspec

from runtime.errors import AssetLoadFailedError, RoostError
from runtime.option_table import RuntimeOptions
from runtime.tools.asset_store import AssetCatalog, load_assets
from runtime.tools.base import LoadProblem, ToolFn, ToolSpec
from runtime.tools.results import UnknownStepTool

__all__ = ["BUILTIN_MODULES", "REMOTE_TOOL_BUILDERS", "ToolRegistry", "list_rule", "paired"]

BUILTIN_MODULES: tuple[str, ...] = (
    "runtime.tools.fs",
    "runtime.tools.command",
    "runtime.tools.http",
    "runtime.tools.asset",
)
"""Modules whose ``SPECS`` and ``TOOLS`` make up the built-in tools."""

REMOTE_TOOL_BUILDERS: tuple[tuple[str, str, str], ...] = (
    ("mcp_servers", "runtime.tools.mcp_client.tools", "mcp_tools"),
    ("a2a_agents", "runtime.tools.a2a_client.tools", "a2a_tools"),
)
"""``(option, module, function)``: the tools of remote servers and agents, built when the
option is set by ``function(root, options) -> (specs, fns, errors)``; imported only then."""


def paired(
    source: str, specs: Iterable[ToolSpec], fns: Mapping[str, ToolFn]
) -> dict[str, tuple[ToolSpec, ToolFn]]:
    """``{name: (spec, fn)}`` for the tools of ``source`` (a module, a tool builder).

    Raises ``RoostError`` (reason ``tool_spec_mismatch``) when a spec has no function, a
    function no spec, or two specs one name: a tool is never dropped without a word.
    """
    out: dict[str, tuple[ToolSpec, ToolFn]] = {}
    names: set[str] = set()
    twice: set[str] = set()
    for spec in specs:
        if spec.name in names:
            twice.add(spec.name)
        names.add(spec.name)
        fn = fns.get(spec.name)
        if fn is not None:
            out[spec.name] = (spec, fn)
    no_fn = sorted(names - set(fns))
    no_spec = sorted(set(fns) - names)
    if no_fn or no_spec or twice:
        raise RoostError(
            f"{source}: the tool specs and functions do not pair up (specs without a "
            f"function: {no_fn}, functions without a spec: {no_spec}, names declared twice: "
            f"{sorted(twice)}); each spec's name must be its function's TOOLS key",
            reason="tool_spec_mismatch",
            source=source,
            without_function=no_fn,
            without_spec=no_spec,
            declared_twice=sorted(twice),
        )
    return out


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(name == p or fnmatchcase(name, p) for p in patterns)


def list_rule(name: str, settings: RuntimeOptions) -> str | None:
    """Return the option that keeps tool ``name`` out (``deny_tools``/``allow_tools``), or None.

    ``deny_tools`` wins over ``allow_tools``; ``allow_tools: null`` allows every tool.
    Entries are exact names or ``fnmatch`` globs (``command.run.*``). ``settings`` are the
    typed options (``RuntimeOptions.of``), converted once by the caller, not per tool.
    """
    for option, keeps_out in _LIST_RULES:
        if keeps_out(name, settings):
            return option
    return None


_LIST_RULES: tuple[tuple[str, Callable[[str, RuntimeOptions], bool]], ...] = (
    ("deny_tools", lambda name, s: _matches(name, s.deny_tools)),
    (
        "allow_tools",
        lambda name, s: s.allow_tools is not None and not _matches(name, s.allow_tools),
    ),
)
"""``(option, keeps tool name out)``, in the order they are applied: deny wins over allow."""


class ToolRegistry:
    """The tools of one project: built-ins plus the tools generated from its assets."""

    def __init__(
        self,
        tools: Mapping[str, tuple[ToolSpec, ToolFn]],
        catalog: AssetCatalog | None = None,
        import_errors: Mapping[str, str] | None = None,
    ) -> None:
        self._tools = dict(tools)
        self.catalog: AssetCatalog = catalog if catalog is not None else AssetCatalog()
        """The project's asset catalog the generated tools were built from."""
        self.import_errors: dict[str, str] = dict(import_errors or {})
        """Tool modules that could not be imported, with the error (also in
        :meth:`asset_summary`'s ``errors``)."""
        self.remote_errors: list[LoadProblem] = []
        """``mcp_servers`` / ``a2a_agents`` entries or tools left out: ``{type, key, reason}``."""
        self.unavailable: dict[str, UnknownStepTool] = {}
        """Tools every call of which is refused whatever the options, with the reason:
        workflows with a step naming no tool (``{code, reason: unknown_step_tool, step,
        step_tool}``). ``list_tools`` shows it as ``unavailable``; the model is not offered them."""

    @classmethod
    def for_project(cls, root: str, options: Mapping[str, Any]) -> ToolRegistry:
        """Build the registry for the project at ``root`` with its normalized ``options``.

        With ``strict_asset_loading`` an invalid asset, or a workflow with a step that
        names no tool, raises ``AssetLoadFailedError``; a module whose specs and functions
        do not pair up raises ``tool_spec_mismatch`` (:func:`paired`).
        """
        tools: dict[str, tuple[ToolSpec, ToolFn]] = {}
        errors: dict[str, str] = {}
        asset_module: Any = None
        for module_name in BUILTIN_MODULES:
            try:
                module = importlib.import_module(module_name)
                specs: list[ToolSpec] = list(module.SPECS)
                fns: Mapping[str, ToolFn] = module.TOOLS
            except Exception as e:  # a module being written must not break the others
                errors[module_name] = f"{type(e).__name__}: {e}"
                continue
            tools.update(paired(module_name, specs, fns))
            if module_name == "runtime.tools.asset":
                asset_module = module
        strict = RuntimeOptions.of(options).strict_asset_loading
        catalog = load_assets(root, strict=strict)
        remote_errors: list[LoadProblem] = []
        for option, module_name, builder in REMOTE_TOOL_BUILDERS:
            if not options.get(option):
                continue
            try:
                build = getattr(importlib.import_module(module_name), builder)
                remote_specs, remote_fns, left_out = build(root, options)
            except Exception as e:  # like a broken built-in module: the others still load
                errors[module_name] = f"{type(e).__name__}: {e}"
                continue
            remote_errors.extend(left_out)
            for name, entry in paired(f"{module_name}.{builder}", remote_specs, remote_fns).items():
                tools.setdefault(name, entry)
        unavailable: dict[str, UnknownStepTool] = {}
        if asset_module is not None and hasattr(asset_module, "asset_tools"):
            # Last, once every other tool (MCP and A2A tools included) is known: a
            # workflow's flags are its steps' and a step naming no tool makes it unavailable.
            known = {name: spec for name, (spec, _) in tools.items()}
            generated_specs, generated_fns = asset_module.asset_tools(catalog, known)
            generated = paired("runtime.tools.asset.asset_tools", generated_specs, generated_fns)
            for name, entry in generated.items():
                tools.setdefault(name, entry)
            complete = {name: spec for name, (spec, _) in tools.items()}
            unavailable = asset_module.unavailable_workflows(catalog, complete)
        if strict and unavailable:
            name, why = sorted(unavailable.items())[0]
            key = name.removeprefix("workflow.run.")
            raise AssetLoadFailedError(
                f"workflow .roost/workflows/{key}.md cannot run (unknown_step_tool): step "
                f"{why['step']} calls {why['step_tool']!r}, which is no tool of this project; "
                "fix it or start the project without strict_asset_loading",
                type="workflows",
                key=key,
                reason="unknown_step_tool",
                path=f".roost/workflows/{key}.md",
            )
        registry = cls(tools, catalog, errors)
        registry.remote_errors = remote_errors
        registry.unavailable = unavailable
        return registry

    def get(self, name: str) -> tuple[ToolSpec, ToolFn] | None:
        """Return ``(spec, fn)`` for tool ``name``, or None when there is no such tool."""
        return self._tools.get(name)

    def specs(self) -> list[ToolSpec]:
        """Every tool's spec, sorted by name."""
        return [self._tools[name][0] for name in sorted(self._tools)]

    def visible(self, options: Mapping[str, Any]) -> list[ToolSpec]:
        """The specs ``allow_tools`` / ``deny_tools`` let through, sorted by name."""
        settings = RuntimeOptions.of(options)
        return [spec for spec in self.specs() if list_rule(spec.name, settings) is None]

    def model_tools(self, options: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The visible, available tools as the model is offered them.

        Each is ``{name, description, input_schema}``; :attr:`unavailable` tools are left
        out, since every call of them is refused.
        """
        return [
            {
                "name": spec.name,
                "description": spec.description,
                "input_schema": spec.input_schema,
            }
            for spec in self.visible(options)
            if spec.name not in self.unavailable
        ]

    def list_tools(self, options: Mapping[str, Any]) -> list[dict[str, object]]:
        """The visible tools as ``list_tools`` returns them, safety metadata included.

        An :attr:`unavailable` tool carries its refusal as ``unavailable``.
        """
        out: list[dict[str, object]] = []
        for spec in self.visible(options):
            listed: dict[str, object] = msgspec.to_builtins(spec)
            if spec.name in self.unavailable:
                listed["unavailable"] = dict(self.unavailable[spec.name])
            out.append(listed)
        return out

    def _workflow_errors(self) -> list[LoadProblem]:
        return [
            {
                "type": "workflows",
                "key": name.removeprefix("workflow.run."),
                "reason": why["reason"],
                "step": why["step"],
                "step_tool": why["step_tool"],
            }
            for name, why in sorted(self.unavailable.items())
            if name.startswith("workflow.run.")
        ]

    def asset_summary(self) -> dict[str, Any]:
        """``{generation, counts, errors}`` of the catalog, for ``project.assets_loaded``."""
        return {
            "generation": self.catalog.generation,
            "counts": self.catalog.counts(),
            "errors": [
                *self.catalog.errors(),
                *self._workflow_errors(),
                *self.remote_errors,
                *self._module_errors(),
            ],
        }

    def _module_errors(self) -> list[LoadProblem]:
        return [
            {"type": "tool_module", "key": module, "reason": f"import_failed: {error}"}
            for module, error in sorted(self.import_errors.items())
        ]
