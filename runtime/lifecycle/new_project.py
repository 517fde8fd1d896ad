"""The checks of ``start_project``'s root, options and id, before the Supervisor spawns it.

Each refuses with the error a client can act on: a root that is not an absolute existing
directory or that reaches ``ROOST_HOME`` (``invalid_root_path``), options that do not
validate or name a model key variable the daemon lacks (``invalid_runtime_opt``), an id
of the wrong shape (``invalid_project_id``). Whether the id is free is the Supervisor's
state, so it checks that itself.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from runtime.errors import InvalidRootPathError, InvalidRuntimeOptError
from runtime.guard.ids import NAME_ID, check_id
from runtime.guard.workspace import root_home_conflict
from runtime.option_table import RuntimeOptions
from runtime.wire.op_args import StartProjectArgs

__all__ = ["NewProject", "check_new_project", "check_root"]


def check_root(root_arg: Any, home: str) -> str:
    """The resolved root of a new project, or :class:`InvalidRootPathError`."""
    if not isinstance(root_arg, str) or not root_arg:
        raise InvalidRootPathError("the project root must be a non-empty path", root=root_arg)
    root = os.path.realpath(root_arg)
    if not os.path.isabs(root_arg) or not os.path.isdir(root):
        raise InvalidRootPathError(
            f"project root {root_arg!r} must be an absolute path to an existing directory",
            root=root_arg,
        )
    conflict = root_home_conflict(root, home)
    if conflict is not None:
        where = "contains" if conflict == "contains_roost_home" else "lies inside"
        raise InvalidRootPathError(
            f"project root {root_arg!r} {where} the daemon's state directory ROOST_HOME "
            f"({home}), which tools must never reach; choose another root or run "
            "the daemon with another --home",
            root=root_arg,
            reason=conflict,
            roost_home=home,
        )
    return root


def _check_api_key_env(settings: RuntimeOptions) -> None:
    """Refuse a model key variable the daemon does not have: every turn would fail on it.

    The daemon's environment is fixed when it starts, so the variable cannot appear later.
    """
    name = settings.llm_api_key_env
    if settings.llm_adapter != "openai" or not name or os.environ.get(name):
        return
    raise InvalidRuntimeOptError(
        f"llm_api_key_env names {name}, which is not set in the daemon's environment, so "
        f"every model call would fail (auth_missing); export {name} and restart the daemon "
        "(`roost daemon stop`, then `roost daemon start`), or change llm_api_key_env",
        key="llm_api_key_env",
        reason="env_not_set",
        variable=name,
    )


class NewProject:
    """A ``start_project`` request's checked root, options and id."""

    def __init__(self, project_id: str, root: str, options: dict[str, Any]) -> None:
        self.project_id = project_id
        self.root = root
        self.options = options
        self.settings = RuntimeOptions.of(options)
        """The options, typed."""


def check_new_project(args: StartProjectArgs, home: str) -> NewProject:
    """The root, options and id of ``start_project`` checked (an id minted if none)."""
    from runtime.policy.options import validate_options  # noqa: PLC0415

    root = check_root(args.root, home)
    options = validate_options(args.options)
    project = NewProject(args.project_id or f"p-{secrets.token_hex(4)}", root, options)
    _check_api_key_env(project.settings)
    check_id(
        project.project_id,
        name="project id",
        shape=NAME_ID,
        reason="invalid_project_id",
        field="project_id",
    )
    return project
