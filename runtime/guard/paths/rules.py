"""Pure rules about path text: validation, sensitive and protected names.

Nothing here touches the filesystem; :mod:`runtime.guard.workspace` applies these rules to the
real components a path resolves to.

- :func:`validate_path_text` refuses what no file name can hold (NUL bytes, over-long
  names) with ``invalid_tool_args``.
- :class:`SensitiveRules` matches ``sensitive_path_denylist`` patterns, case-folded and
  Unicode-normalized (NFC and, stricter, NFKC), against every component and the relative
  path, with ``sensitive_path_allowlist`` as explicit exceptions.
- :func:`protected_match` names the git and ``.roost`` places tools may never write.
- :func:`under` tells whether one normalized absolute path is another or beneath it.

:mod:`runtime.guard.paths.arguments` finds the paths in a tool call's arguments.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from runtime.errors import InvalidRuntimeOptError, ToolError

__all__ = [
    "NAME_MAX",
    "PATH_MAX",
    "OutsideRootEntry",
    "SensitiveRules",
    "fold",
    "parse_outside_allowlist",
    "protected_match",
    "under",
    "validate_path_text",
]


def under(path: str, parent: str) -> bool:
    """Whether ``path`` is ``parent`` or beneath it, by text (both absolute, normalized)."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


NAME_MAX = 255
"""Longest file name component, in bytes (Linux ``NAME_MAX``)."""
PATH_MAX = 4095
"""Longest path, in bytes, not counting the terminating NUL (Linux ``PATH_MAX - 1``)."""


def _refuse(reason: str, message: str, path: str) -> ToolError:
    shown = path.replace("\0", "")  # NUL bytes are never echoed
    shown = shown if len(shown) <= 200 else shown[:200] + "..."
    return ToolError("invalid_tool_args", message, kind="invalid_type", reason=reason, path=shown)


_TEXT_RULES: tuple[tuple[str, Callable[[str], bool], str], ...] = (
    ("empty_path", lambda path: path == "", "the path is empty; name a file or directory"),
    ("nul_byte", lambda path: "\x00" in path, "the path contains a NUL byte; remove it"),
)
"""What no file name can hold, in the order it is checked: the reason and how to fix it."""

_BYTE_LIMITS: tuple[tuple[Callable[[bytes], int], int, str], ...] = (
    (len, PATH_MAX, "the path is {size} bytes; the limit is {limit}"),
    (
        lambda raw: max(len(part) for part in raw.split(b"/")),
        NAME_MAX,
        "a path component is {size} bytes; the limit is {limit}",
    ),
)
"""The sizes of a path's UTF-8 bytes that have a limit (refused with ``name_too_long``)."""


def validate_path_text(path: object) -> str:
    """Return ``path`` if it can name a file; raise ``invalid_tool_args`` otherwise.

    Reasons: ``expected_string``, ``empty_path``, ``nul_byte``, ``invalid_encoding`` (a
    lone surrogate), ``name_too_long`` (a component over 255 bytes or a path over 4095).
    """
    if not isinstance(path, str):
        raise ToolError(
            "invalid_tool_args",
            f"a path must be a string, got {type(path).__name__}",
            kind="invalid_type",
            reason="expected_string",
        )
    for reason, broken, message in _TEXT_RULES:
        if broken(path):
            raise _refuse(reason, message, path)
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise _refuse("invalid_encoding", "the path is not valid Unicode text", path) from None
    for measure, limit, message in _BYTE_LIMITS:
        size = measure(raw)
        if size > limit:
            raise _refuse("name_too_long", message.format(size=size, limit=limit), path)
    return path


def fold(text: str) -> str:
    """Case-fold ``text`` and normalize it to NFC (the form sensitive names are compared in)."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).casefold())


def _fold_compat(text: str) -> str:
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


_FOLDS: tuple[Callable[[str], str], ...] = (fold, _fold_compat)


class SensitiveRules:
    """The sensitive-path denylist and its allowlist, ready to match path components.

    A pattern without ``/`` is an ``fnmatch`` glob for one component (``.env``, ``*.pem``);
    a pattern with ``/`` matches the relative path or any tail of it that starts at a
    component (``config/secrets.yml``). Both sides are compared case-folded, once in NFC and
    once in NFKC, so ``.ENV``, a decomposed ``é`` and a fullwidth ``id_rsa`` (U+FF49 for
    the i) all match.
    An allowlist pattern exempts the component it matches, or the whole path.
    """

    def __init__(self, deny: Iterable[str], allow: Iterable[str] = ()) -> None:
        self.deny = tuple(deny)
        self.allow = tuple(allow)
        self._screens = tuple(_screen(self.deny, folder) for folder in _FOLDS)

    def match(self, parts: Sequence[str]) -> str | None:
        """Return the denylist pattern ``parts`` (path components) hits, or None."""
        parts = [p for p in parts if p not in ("", ".", "..")]
        if all(p.isascii() for p in parts):  # both folds of ASCII text are its lower case
            lowered = [p.lower() for p in parts]
            if not any(self._screened(lowered, screen) for screen in self._screens):
                return None
        for folder, screen in zip(_FOLDS, self._screens, strict=True):
            folded = [folder(p) for p in parts]
            if not self._screened(folded, screen):
                continue
            hit = self._match_folded(folded, folder)
            if hit is not None:
                return hit
        return None

    @staticmethod
    def _screened(
        folded: list[str], screen: tuple[Callable[[str], Any], Callable[[str], Any]]
    ) -> bool:
        """Whether a folded denylist pattern matches a component or a tail of ``folded``.

        When none does, :meth:`_match_folded` (which needs one of them to) returns None.
        """
        names, paths = screen
        return any(names(p) for p in folded) or any(
            paths("/".join(folded[i:])) for i in range(len(folded))
        )

    def _match_folded(self, parts: list[str], folder: Callable[[str], str]) -> str | None:
        tails = ["/".join(parts[i:]) for i in range(len(parts))]
        allow = [folder(a).strip("/") for a in self.allow]
        allow_names = [a for a in allow if "/" not in a]
        if any(fnmatch.fnmatchcase(t, a) for t in tails for a in allow if "/" in a):
            return None
        for pattern in self.deny:
            folded = folder(pattern).strip("/")
            if "/" in folded:
                hit = any(fnmatch.fnmatchcase(t, folded) for t in tails)
                if hit and not any(fnmatch.fnmatchcase(parts[-1], a) for a in allow_names):
                    return pattern
                continue
            for part in parts:
                if fnmatch.fnmatchcase(part, folded) and not any(
                    fnmatch.fnmatchcase(part, a) for a in allow_names
                ):
                    return pattern
        return None


def _never(_: str) -> None:
    return None


@functools.lru_cache(maxsize=64)
def _screen(
    deny: tuple[str, ...], folder: Callable[[str], str]
) -> tuple[Callable[[str], Any], Callable[[str], Any]]:
    """One regex for the folded component patterns, one for the path patterns of ``deny``.

    Each is the alternation of what :func:`fnmatch.fnmatchcase` compiles for every pattern
    (:func:`fnmatch.translate`, anchored at both ends): it matches a text exactly when one
    of the patterns does, in one call instead of one per pattern. Kept per list: a
    :class:`~runtime.guard.workspace.Workspace` is made per tool call and per policy
    decision, and translating the default list took ~30 µs each time.
    """
    folded = [folder(p).strip("/") for p in deny]
    screens: list[Callable[[str], Any]] = []
    for group in ([f for f in folded if "/" not in f], [f for f in folded if "/" in f]):
        if not group:
            screens.append(_never)
            continue
        either = "|".join(f"(?:{fnmatch.translate(f)})" for f in group)
        screens.append(re.compile(either).match)
    return screens[0], screens[1]


_IGNORABLE = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
"""Code points HFS+ ignores in names (git's ``is_hfs_dotgit`` list)."""
_SHORT_NAME = re.compile(r"^(git|roost)~[1-9][0-9]*$")
"""An 8.3 short name (vfat, NTFS) that stands for ``.git`` or ``.roost``."""


def _lenient(name: str) -> str:
    """A folded component as a lenient filesystem may read it.

    HFS+ ignorable code points are dropped, trailing dots and spaces removed (vfat and
    NTFS ignore them) and an 8.3 short name (``GIT~1``) read as its long name.
    """
    name = _IGNORABLE.sub("", name).rstrip(". ")
    short = _SHORT_NAME.match(name)
    return "." + short.group(1) if short else name


def protected_match(parts: Sequence[str]) -> str | None:
    """Return the protected place a write to ``parts`` would touch, or None.

    Places, with the ``pattern`` reported: ``.roost/`` (assets) at any depth; anything
    inside a ``.git`` directory (``.git/hooks/`` for hooks, also a submodule's under
    ``modules/``; ``.git/config`` for ``config`` and ``config.worktree``, also a
    submodule's; ``.git/`` for the rest: ``commondir``, ``worktrees/*/gitdir``, ``info/``,
    ``objects/``, ... all change what git runs or where it reads from); a final component
    ``.git`` (a gitfile redirects git elsewhere); and a final component ``HEAD`` (with
    ``objects/`` and ``refs/`` beside it, it makes its directory a bare repository that git
    run in there discovers, and whose ``config`` it obeys: ``core.pager``, ...).
    Compared case-folded and normalized (NFC and NFKC) like the sensitive names, and
    leniently (see :func:`_lenient`) for case-insensitive and vfat or NTFS filesystems.
    """
    kept = [p for p in parts if p not in ("", ".")]
    for folder in _FOLDS:
        place = _protected([_lenient(folder(p)) for p in kept])
        if place is not None:
            return place
    return None


def _nothing(rest: list[str]) -> bool:
    return not rest


def _anything(rest: list[str]) -> bool:
    return True


def _hooks(rest: list[str]) -> bool:
    return rest[0] == "hooks" or (rest[0] == "modules" and "hooks" in rest[1:])


def _config(rest: list[str]) -> bool:
    return rest[-1] in ("config", "config.worktree")


_PROTECTED: dict[str, tuple[tuple[Callable[[list[str]], bool], str], ...]] = {
    ".roost": ((_anything, ".roost/"),),
    ".git": (
        (_nothing, ".git"),
        (_hooks, ".git/hooks/"),
        (_config, ".git/config"),
        (_anything, ".git/"),
    ),
    "head": ((_nothing, "HEAD"),),
}
"""Per folded component: what the components after it say about the place, in order.

``head`` decides only as the final component; any ``.git`` or ``.roost`` before it has
decided already."""


def _protected(names: list[str]) -> str | None:
    for i, name in enumerate(names):
        for holds, place in _PROTECTED.get(name, ()):
            if holds(names[i + 1 :]):
                return place
    return None


class OutsideRootEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One ``outside_root_allowlist`` entry, normalized."""

    reason_code: str
    """Why the exception exists; recorded in ``security.sandbox_exception_used``."""
    path: str | None = None
    """An absolute, resolved file or directory (everything under it is covered)."""
    pattern: str | None = None
    """An ``fnmatch`` glob matched against the resolved absolute path."""

    def covers(self, resolved: str) -> bool:
        """Whether this entry lets ``resolved`` (absolute, resolved) through."""
        if self.path is not None:
            return resolved == self.path or resolved.startswith(self.path.rstrip("/") + "/")
        return self.pattern is not None and fnmatch.fnmatchcase(resolved, self.pattern)


def parse_outside_allowlist(raw: object, root: str) -> tuple[OutsideRootEntry, ...]:
    """Normalize ``outside_root_allowlist``; malformed entries raise ``invalid_entry``.

    Relative ``path`` entries are taken from ``root``; every path is resolved.
    """

    def bad(why: str) -> InvalidRuntimeOptError:
        return InvalidRuntimeOptError(
            f"outside_root_allowlist: {why}; each entry is {{path or pattern, reason_code}}",
            key="outside_root_allowlist",
            reason="invalid_entry",
        )

    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise bad(f"expected a list, got {type(raw).__name__}")
    entries = []
    for item in raw:
        if not isinstance(item, Mapping):
            raise bad(f"entry {item!r} is not an object")
        code, path, pattern = item.get("reason_code"), item.get("path"), item.get("pattern")
        if not isinstance(code, str) or not code:
            raise bad(f"entry {dict(item)!r} has no reason_code")
        if isinstance(path, str) and path and pattern is None:
            full = os.path.realpath(os.path.join(root, os.path.expanduser(path)))
            entries.append(OutsideRootEntry(reason_code=code, path=full))
        elif isinstance(pattern, str) and pattern and path is None:
            entries.append(OutsideRootEntry(reason_code=code, pattern=pattern))
        else:
            raise bad(f"entry {dict(item)!r} needs exactly one of path or pattern")
    return tuple(entries)
