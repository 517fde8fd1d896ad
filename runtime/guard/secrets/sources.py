"""Where the secret values Roost masks come from: a root's sensitive files, withheld variables.

:class:`SecretSources` answers "which exact values must no tool output show?" for one
project, and hands out a :class:`~runtime.guard.secrets.masking.SecretMasker` for them:

- **Sensitive files.** Every regular file under the root whose path the
  ``sensitive_path_denylist`` matches (``.env``, ``.env.*``, ``*.pem``, ``*.key``, ...;
  ``sensitive_path_allowlist`` exceptions apply), ``.git`` not entered, symlinks neither
  followed nor read. Their values: :mod:`runtime.guard.secrets.sensitive_files`.
- **Git's credentials.** Tokens the repository's own ``.git/config`` keeps in a remote's
  URL or an ``extraheader`` (:mod:`runtime.guard.secrets.git_credentials`), read the same way.
- **Withheld environment.** A command's environment is built from nothing
  (:func:`runtime.guard.commands.controls.build_env`), so every variable of the daemon's
  own environment is withheld from tools; those whose name is sensitive
  (:func:`runtime.guard.secrets.redaction.is_sensitive_key`) or whose value looks like a token (16
  characters or more of a token's alphabet mixing three of lower case, upper case, digits
  and symbols, or a known token shape), and the one ``llm_api_key_env`` names, are masked;
  so are the same kinds of values in the ``env`` an ``mcp_servers`` entry hands its
  server (:func:`project_sources`).

The root is looked through for new or removed sensitive files at most every
:data:`RESCAN_S` seconds, at the cost of one ``stat`` per directory: a directory whose
``(mtime, ctime, inode)`` did not change keeps its last listing. A file is
read again only when its ``(device, inode, size, mtime, ctime)`` changed, through an open
that refuses symlinks (``openat2`` beneath the root where the kernel has it,
``O_NOFOLLOW`` otherwise), FIFOs and devices (``O_NONBLOCK``, then a regular-file check)
and files over :data:`MAX_FILE_BYTES`; a tool can write these files, so nothing here
reads one unbounded. The masker is compiled again only when the set of values changed.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from runtime.guard.paths import openat2
from runtime.guard.paths.rules import SensitiveRules
from runtime.guard.secrets.git_credentials import GIT_CONFIG_FILES, git_config_values
from runtime.guard.secrets.key_names import is_sensitive_key
from runtime.guard.secrets.masking import MIN_SECRET_LENGTH, SecretMasker
from runtime.guard.secrets.patterns import redact_string
from runtime.guard.secrets.sensitive_files import file_values
from runtime.option_table import RuntimeOptions

__all__ = [
    "MAX_DIRECTORIES",
    "MAX_FILE_BYTES",
    "MAX_SENSITIVE_FILES",
    "RESCAN_S",
    "SKIPPED_DIRECTORIES",
    "SecretSources",
    "environment_values",
    "project_sources",
]

MAX_FILE_BYTES = 256 * 1024
"""Largest sensitive file read; a larger one is skipped."""

MAX_DIRECTORIES = 20_000
"""Directories of a root looked at for sensitive files; deeper ones past this are not."""

MAX_SENSITIVE_FILES = 256
"""Sensitive files read per root."""

RESCAN_S = 1.0
"""Seconds between two looks for new sensitive files; known files are checked every time."""

SKIPPED_DIRECTORIES = frozenset(
    {".git", "node_modules", ".venv", "__pycache__", ".tox", ".mypy_cache", ".pytest_cache"}
)
"""Directories never looked into: git's own, and trees of installed dependencies or caches."""

_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.~]{16,}")


class _Listing(NamedTuple):
    key: tuple[int, int, int]
    files: tuple[str, ...]
    subdirs: tuple[str, ...]
    inside: bool


class _Read(NamedTuple):
    key: tuple[int, int, int, int, int]
    values: frozenset[str]


def _token_like(value: str) -> bool:
    if not _TOKEN_CHARS.fullmatch(value) or value.startswith(("/", ".")):
        return False
    classes = (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
        any(not c.isalnum() for c in value),
    )
    return sum(classes) >= 3


def environment_values(environ: Mapping[str, str], api_key_env: str | None = None) -> set[str]:
    """The values of ``environ`` that are secrets (see the module docstring)."""
    out: set[str] = set()
    for key, value in environ.items():
        if len(value) < MIN_SECRET_LENGTH:
            continue
        if (
            key == api_key_env
            or (is_sensitive_key(key) and not value.startswith("/"))
            or _token_like(value)
            or redact_string(value) is not value
        ):
            out.add(value)
    return out


class SecretSources:
    """The secret values of one project root and the daemon's environment (thread-safe)."""

    def __init__(
        self,
        root: str,
        *,
        deny: Sequence[str],
        allow: Sequence[str] = (),
        api_key_env: str | None = None,
        environ: Mapping[str, str] | None = None,
        rescan_s: float = RESCAN_S,
    ) -> None:
        self.root = os.path.realpath(root)
        self._rescan_s = rescan_s
        self._walked_at: float | None = None
        self._found: list[str] = []
        self._rules = SensitiveRules(deny, allow)
        self._by_name = not any("/" in pattern for pattern in (*deny, *allow))
        """No pattern names a path: a file's name alone decides (cached per name)."""
        self._name_matches = functools.lru_cache(maxsize=65536)(self._name_is_sensitive)
        self._env_values = frozenset(
            environment_values(os.environ if environ is None else environ, api_key_env)
        )
        self._lock = threading.Lock()
        self._listings: dict[str, _Listing] = {}
        self._reads: dict[str, _Read] = {}
        self._masker_of = functools.lru_cache(maxsize=1)(SecretMasker)
        """The masker of the values known last (compiled again only when they change)."""
        self.truncated = False
        """Whether the last look stopped at a limit (:data:`MAX_DIRECTORIES`, files)."""

    def masker(self) -> SecretMasker:
        """The masker for the values known now (files looked at again, see the module doc)."""
        with self._lock:
            values = set(self._env_values)
            for values_of_file in self._file_values():
                values |= values_of_file
            return self._masker_of(frozenset(values))

    def _file_values(self) -> Iterator[frozenset[str]]:
        now = time.monotonic()
        if self._walked_at is None or now - self._walked_at >= self._rescan_s:
            self._found = self._discover()
            self._walked_at = now
        reads: dict[str, _Read] = {}
        for rel in (*self._found, *GIT_CONFIG_FILES):
            read = self._read(rel, git_config_values if rel in GIT_CONFIG_FILES else file_values)
            if read is not None:
                reads[rel] = read
                yield read.values
        self._reads = reads

    def _discover(self) -> list[str]:
        """Relative paths of the sensitive files under the root (see the module doc)."""
        if not self._rules.deny:
            return []
        listings: dict[str, _Listing] = {}
        found: list[str] = []
        stack: list[tuple[str, bool]] = [("", False)]
        self.truncated = False
        while stack:
            if len(listings) >= MAX_DIRECTORIES:
                self.truncated = True
                break
            rel, parent_inside = stack.pop()
            path = os.path.join(self.root, rel) if rel else self.root
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                continue
            key = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            listing = self._listings.get(rel)
            if listing is None or listing.key != key:
                inside = parent_inside or (
                    bool(rel) and self._matches(tuple(rel.split("/")[:-1]), os.path.basename(rel))
                )
                listing = self._list(path, rel, key, inside)
            listings[rel] = listing
            found.extend(listing.files)
            stack.extend((sub, listing.inside) for sub in listing.subdirs)
        self._listings = listings
        if len(found) > MAX_SENSITIVE_FILES:
            self.truncated = True
        return sorted(found)[:MAX_SENSITIVE_FILES]

    def _list(self, path: str, rel: str, key: tuple[int, int, int], inside: bool) -> _Listing:
        """List one directory; ``inside``: a sensitive directory holds it (or is it)."""
        files: list[str] = []
        subdirs: list[str] = []
        parts = tuple(rel.split("/")) if rel else ()
        try:
            entries = list(os.scandir(path))
        except OSError:
            return _Listing(key, (), (), inside)
        for entry in entries:
            try:
                if entry.is_symlink():
                    continue
                child = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIPPED_DIRECTORIES:
                        subdirs.append(child)
                elif entry.is_file(follow_symlinks=False) and (
                    inside or self._matches(parts, entry.name)
                ):
                    files.append(child)
            except OSError:
                continue
        return _Listing(key, tuple(files), tuple(subdirs), inside)

    def _matches(self, parts: tuple[str, ...], name: str) -> bool:
        """Whether the entry ``name`` of the directory ``parts`` is sensitive (its dir is not)."""
        if not self._by_name:
            return self._rules.match((*parts, name)) is not None
        return self._name_matches(name)

    def _name_is_sensitive(self, name: str) -> bool:
        return self._rules.match((name,)) is not None

    def _read(self, rel: str, parse: Callable[[str], set[str]]) -> _Read | None:
        path = os.path.join(self.root, rel)
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        known = self._reads.get(rel)
        if known is not None and known.key == key:
            return known
        data = _bounded_read(self.root, rel)
        if data is None:
            return None
        return _Read(key, frozenset(parse(data.decode("utf-8", "replace"))))


def _bounded_read(root: str, rel: str) -> bytes | None:
    """At most :data:`MAX_FILE_BYTES` of a regular file beneath ``root``, no link followed."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        if openat2.available():
            base = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                resolve = openat2.RESOLVE_BENEATH | openat2.RESOLVE_NO_SYMLINKS
                fd = openat2.openat2(base, rel, flags, resolve=resolve)
            finally:
                os.close(base)
        else:
            fd = os.open(os.path.join(root, rel), flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        chunks: list[bytes] = []
        left = MAX_FILE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 65536))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return None if len(data) > MAX_FILE_BYTES else data
    except OSError:
        return None
    finally:
        os.close(fd)


def project_sources(root: str, options: Mapping[str, Any]) -> SecretSources:
    """The :class:`SecretSources` of a project with these (normalized) ``options``.

    Besides the daemon's environment, the ``env`` an ``mcp_servers`` entry gives its
    server counts: a server that echoes its own key is masked like a command.
    """
    settings = RuntimeOptions.of(options)
    environ = dict(os.environ)
    for entry in settings.mcp_servers:
        for key, value in (entry.get("env") or {}).items():
            if isinstance(key, str) and isinstance(value, str):
                environ.setdefault(f"mcp:{key}", value)
    return SecretSources(
        root,
        deny=settings.sensitive_path_denylist,
        allow=settings.sensitive_path_allowlist,
        api_key_env=settings.llm_api_key_env,
        environ=environ,
    )
