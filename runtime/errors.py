"""Roost's exceptions. Every one has a stable ``code`` (SPEC.md) and keeps its values.

The tree of this module's classes, each with its ``code`` (a test holds it to the code)::

    RoostError                         internal_error
    ├── RequestError                   bad_request (a request the daemon could not serve)
    │   ├── DaemonUnreachableError     daemon_unreachable
    │   ├── BadRequestError            bad_request
    │   ├── ProjectNotFoundError       project_not_found
    │   ├── ConversationNotFoundError  conversation_not_found
    │   ├── AlreadyStartedError        already_started
    │   ├── ProjectRunningError        project_running
    │   ├── ConversationAlreadyStartedError  conversation_already_started
    │   ├── InvalidRootPathError       invalid_root_path
    │   ├── InvalidRuntimeOptError     invalid_runtime_opt  {key, reason}
    │   ├── AssetLoadFailedError       asset_load_failed
    │   ├── RequestTimeoutError        timeout
    │   └── OverloadedError            overloaded
    ├── ConfigError                    bad_config  {reason, ...} (a setting or ROOST_HOME)
    ├── JournalError                   journal_error
    │   ├── ConcurrencyError           journal_conflict (another writer owns the project)
    │   └── JournalIntegrityError      integrity_error
    └── ToolError                      (a tool call's failure; its code: ``TOOL_ERROR_CODES``)

Other layers subclass these for their own failures (``ModelError``, the CLI's ``UsageError``).
A tool failure is not raised to clients: ``run_tool`` returns ``{status: "error", reason}``.
``ToolError.reason()`` gives that dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypedDict

__all__ = [
    "REQUEST_ERROR_CODES",
    "TOOL_ERROR_CODES",
    "AlreadyStartedError",
    "AssetLoadFailedError",
    "BadRequestError",
    "ConcurrencyError",
    "ConfigError",
    "ConversationAlreadyStartedError",
    "ConversationNotFoundError",
    "DaemonUnreachableError",
    "InvalidRootPathError",
    "InvalidRuntimeOptError",
    "JournalError",
    "JournalIntegrityError",
    "OverloadedError",
    "ProjectNotFoundError",
    "ProjectRunningError",
    "RequestError",
    "RequestTimeoutError",
    "RoostError",
    "ToolError",
    "WireError",
    "error_from_wire",
    "wire_error",
]


class WireError(TypedDict):
    """An error as it crosses a process or a socket: every reply, answer and link failure."""

    code: str
    """The stable code (``project_not_found``, ``journal_error``, ...)."""
    message: str
    """One line for a person."""
    details: dict[str, Any]
    """The code's own fields (ids, limits, the reason), open by code."""


class RoostError(Exception):
    """Root of every Roost error; ``code`` is stable, ``details`` holds the values."""

    code: ClassVar[str] = "internal_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_wire(self) -> WireError:
        """Return the error as its wire shape ``{code, message, details}``."""
        return {"code": self.code, "message": self.message, "details": self.details}

    def __str__(self) -> str:
        return self.message


class RequestError(RoostError):
    """A request the daemon could not serve."""

    code: ClassVar[str] = "bad_request"

    @classmethod
    def from_details(cls, message: str, details: dict[str, object]) -> RequestError:
        """The error again from its wire ``message`` and ``details`` (:func:`error_from_wire`)."""
        return cls(message, **details)


class DaemonUnreachableError(RequestError):
    """No daemon answers on the socket."""

    code: ClassVar[str] = "daemon_unreachable"


class BadRequestError(RequestError):
    """The request is malformed: unknown operation, wrong argument types, bad frame."""

    code: ClassVar[str] = "bad_request"


class ProjectNotFoundError(RequestError):
    """No running project has that id."""

    code: ClassVar[str] = "project_not_found"


class ConversationNotFoundError(RequestError):
    """The project has no conversation with that id."""

    code: ClassVar[str] = "conversation_not_found"


class AlreadyStartedError(RequestError):
    """A project with that id is already running."""

    code: ClassVar[str] = "already_started"


class ProjectRunningError(RequestError):
    """The project runs (or its history is being deleted): what was asked needs it stopped."""

    code: ClassVar[str] = "project_running"


class ConversationAlreadyStartedError(RequestError):
    """A conversation with that id already exists in the project."""

    code: ClassVar[str] = "conversation_already_started"


class InvalidRootPathError(RequestError):
    """The project root is missing, not a directory, or not absolute after resolution."""

    code: ClassVar[str] = "invalid_root_path"


class InvalidRuntimeOptError(RequestError):
    """A runtime option is unknown or malformed; ``details`` is ``{key, reason}``."""

    code: ClassVar[str] = "invalid_runtime_opt"

    def __init__(self, message: str, *, key: str, reason: str, **details: Any) -> None:
        super().__init__(message, key=key, reason=reason, **details)
        self.key = key
        self.reason = reason

    @classmethod
    def from_details(cls, message: str, details: dict[str, object]) -> RequestError:
        """The error again from the wire: its ``key`` and ``reason`` are text ('' if absent)."""
        rest = {k: v for k, v in details.items() if k not in ("key", "reason")}
        return cls(
            message, key=str(details.get("key", "")), reason=str(details.get("reason", "")), **rest
        )


class AssetLoadFailedError(RequestError):
    """With ``strict_asset_loading``, an asset failed to parse."""

    code: ClassVar[str] = "asset_load_failed"


class RequestTimeoutError(RequestError):
    """The request (or ``wait``) did not finish in time."""

    code: ClassVar[str] = "timeout"


class OverloadedError(RequestError):
    """The daemon sheds load: too many requests in flight, or a stuck actor's mailbox is full."""

    code: ClassVar[str] = "overloaded"


class ConfigError(RoostError):
    """A setting or the state directory cannot be used as it is; ``details`` ``{reason}``."""

    code: ClassVar[str] = "bad_config"


class JournalError(RoostError):
    """The journal could not append or read."""

    code: ClassVar[str] = "journal_error"


class ConcurrencyError(JournalError):
    """Another writer appended to the project's stream first (ownership lost)."""

    code: ClassVar[str] = "journal_conflict"


class JournalIntegrityError(JournalError):
    """Stored data does not decode or does not chain."""

    code: ClassVar[str] = "integrity_error"


REQUEST_ERROR_CODES: dict[str, type[RequestError]] = {
    cls.code: cls
    for cls in (
        DaemonUnreachableError,
        BadRequestError,
        ProjectNotFoundError,
        ConversationNotFoundError,
        AlreadyStartedError,
        ProjectRunningError,
        ConversationAlreadyStartedError,
        InvalidRootPathError,
        InvalidRuntimeOptError,
        AssetLoadFailedError,
        RequestTimeoutError,
        OverloadedError,
    )
}
"""Request error codes mapped to their classes."""

TOOL_ERROR_CODES: frozenset[str] = frozenset(
    {
        "unknown_tool",
        "invalid_tool_args",
        "denied",
        "outside_root",
        "sensitive_path_denied",
        "network_denied",
        "network_endpoint_denied",
        "network_protocol_denied",
        "env_vars_not_allowed",
        "invalid_env_payload",
        "command_blocked",
        "timeout",
        "output_too_large",
        "artifact_too_large",
        "max_concurrency_reached",
        "conversation_max_concurrency_reached",
        "conversation_cancelled",
        "approval_rejected",
        "not_a_regular_file",
        "isolation_unavailable",
        "tool_crashed",
        "tool_error",
    }
)
"""Every ``reason.code`` a failed tool call can carry (``tool_error``: the tool raised)."""


class ToolError(RoostError):
    """A tool call failed; ``reason()`` is the ``{code, ...fields}`` dict of the result.

    ``ToolError("outside_root", "path escapes the root", path="../x")``.
    """

    def __init__(self, code: str, message: str, **fields: Any) -> None:
        if code not in TOOL_ERROR_CODES:
            raise ValueError(f"unknown tool error code {code!r}")
        super().__init__(message, **fields)
        self.tool_code = code

    @property
    def code(self) -> str:  # type: ignore[override]
        """The tool error code."""
        return self.tool_code

    def reason(self) -> dict[str, Any]:
        """Return ``{code, message, ...fields}``."""
        return {"code": self.tool_code, "message": self.message, **self.details}


def error_from_wire(wire: Mapping[str, Any]) -> RequestError:
    """Rebuild the client-side exception from a wire error ``{code, message, details}``."""
    code = str(wire.get("code", "bad_request"))
    message = str(wire.get("message", code))
    details = wire.get("details") or {}
    if not isinstance(details, dict):
        details = {"value": details}
    err = REQUEST_ERROR_CODES.get(code, RequestError).from_details(message, details)
    err.code = code  # type: ignore[misc]  # its class's own, or a code this client does not know
    return err


def wire_error(error: BaseException) -> WireError:
    """``error`` in its wire shape ``{code, message, details}``.

    A :class:`RoostError` keeps its code; anything else is an ``internal_error`` naming the
    exception. The one builder of the error every reply to a request carries.
    """
    if isinstance(error, RoostError):
        return error.to_wire()
    return {"code": "internal_error", "message": f"{type(error).__name__}: {error}", "details": {}}
