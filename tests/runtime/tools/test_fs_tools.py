"""The fs.* tools: behaviour, caps, and confinement with its security signals."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from events.catalog import (
    SecuritySandboxExceptionUsed,
    SecuritySandboxViolation,
    SecuritySensitivePathDenied,
)
from runtime.errors import ToolError
from runtime.guard.home.roost_home import protect as protect_state_home
from runtime.guard.paths import openat2
from runtime.tools.base import ToolContext
from runtime.tools.fs import (
    LIST_MAX_ENTRIES,
    SEARCH_MAX_MATCHES,
    SPECS,
    TOOLS,
)
from runtime.tools.fswalk import search_file


@pytest.fixture(params=["openat2", "walk"])
def mode(request, monkeypatch) -> str:
    if request.param == "openat2" and not openat2.available():
        pytest.skip("openat2 is not available on this kernel")
    if request.param == "walk":
        monkeypatch.setenv("ROOST_FORCE_NO_OPENAT2", "1")
    else:
        monkeypatch.delenv("ROOST_FORCE_NO_OPENAT2", raising=False)
    return str(request.param)


@pytest.fixture
def root(tmp_path: Path, mode: str) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("outside secret\n")
    return root


def ctx_for(root: Path, **options: Any) -> ToolContext:
    return ToolContext(root=str(root), options=options, call_id="call-1")


def run(ctx: ToolContext, name: str, **args: Any) -> dict[str, Any]:
    return TOOLS[name](ctx, args)


def fail(ctx: ToolContext, name: str, **args: Any) -> ToolError:
    with pytest.raises(ToolError) as exc:
        TOOLS[name](ctx, args)
    return exc.value


# --- specs ---------------------------------------------------------------------------


def test_every_spec_has_an_implementation_and_a_closed_object_schema():
    assert [s.name for s in SPECS] == list(TOOLS)
    for spec in SPECS:
        assert spec.input_schema["type"] == "object"
        assert spec.input_schema["additionalProperties"] is False


def test_safety_metadata_marks_writers_and_readers():
    flags = {s.name: (s.read_only, s.writes) for s in SPECS}
    assert flags == {
        "fs.read": (True, False),
        "fs.write": (False, True),
        "fs.edit": (False, True),
        "fs.list": (True, False),
        "fs.search": (True, False),
    }


# --- fs.read -------------------------------------------------------------------------


def test_read_returns_the_whole_file_with_its_line_count(root):
    (root / "f.txt").write_text("one\ntwo\nthree")
    assert run(ctx_for(root), "fs.read", path="f.txt") == {
        "path": "f.txt",
        "content": "one\ntwo\nthree",
        "total_lines": 3,
        "truncated": False,
    }


def test_read_selects_lines_with_offset_and_limit(root):
    (root / "f.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    result = run(ctx_for(root), "fs.read", path="f.txt", offset=2, limit=3)
    assert result["content"] == "line 2\nline 3\nline 4\n"
    assert (result["total_lines"], result["truncated"]) == (10, True)


def test_read_past_the_end_returns_nothing(root):
    (root / "f.txt").write_text("a\nb\n")
    result = run(ctx_for(root), "fs.read", path="f.txt", offset=5)
    assert (result["content"], result["total_lines"], result["truncated"]) == ("", 2, False)


def test_read_replaces_invalid_utf8(root):
    (root / "f.bin").write_bytes(b"ok\xff\n")
    assert run(ctx_for(root), "fs.read", path="f.bin")["content"] == "ok\ufffd\n"


def test_read_rejects_a_negative_offset(root):
    (root / "f.txt").write_text("a")
    err = fail(ctx_for(root), "fs.read", path="f.txt", offset=-1)
    assert (err.code, err.details["kind"], err.details["arg"]) == (
        "invalid_tool_args",
        "invalid_type",
        "offset",
    )


def test_read_of_a_missing_file_fails_with_not_found(root):
    err = fail(ctx_for(root), "fs.read", path="missing.txt")
    assert (err.code, err.details["reason"]) == ("tool_error", "not_found")


def test_read_outside_the_root_fails_and_records_a_sandbox_violation(root):
    ctx = ctx_for(root)
    err = fail(ctx, "fs.read", path="../outside/secret.txt")
    assert (err.code, err.details["reason"]) == ("outside_root", "dotdot")
    assert ctx.signals == [
        SecuritySandboxViolation(
            tool="fs.read", path="../outside/secret.txt", reason="dotdot", call_id="call-1"
        )
    ]


def test_read_of_a_sensitive_file_fails_and_records_the_denial(root):
    (root / ".env").write_text("TOKEN=x")
    ctx = ctx_for(root)
    err = fail(ctx, "fs.read", path=".env")
    assert (err.code, err.details["pattern"]) == ("sensitive_path_denied", ".env")
    assert ctx.signals == [
        SecuritySensitivePathDenied(
            tool="fs.read", path=".env", reason="sensitive_path", call_id="call-1"
        )
    ]


def test_read_through_an_allowlist_exception_records_its_reason_code(root, tmp_path):
    outside = tmp_path / "outside"
    ctx = ctx_for(root, outside_root_allowlist=[{"path": str(outside), "reason_code": "ci"}])
    result = run(ctx, "fs.read", path=str(outside / "secret.txt"))
    assert result["content"] == "outside secret\n"
    assert ctx.signals == [
        SecuritySandboxExceptionUsed(
            reason_code="ci",
            path=str(outside / "secret.txt"),
            tool="fs.read",
            call_id="call-1",
        )
    ]


def test_read_of_a_fifo_fails_without_blocking(root):
    os.mkfifo(root / "pipe")
    err = fail(ctx_for(root), "fs.read", path="pipe")
    assert (err.code, err.details["reason"]) == ("not_a_regular_file", "fifo")


# --- fs.write ------------------------------------------------------------------------


def test_write_creates_the_file_and_its_parents(root):
    result = run(ctx_for(root), "fs.write", path="a/b/c.txt", content="héllo")
    assert result == {"path": "a/b/c.txt", "bytes_written": 6}
    assert (root / "a" / "b" / "c.txt").read_text() == "héllo"


def test_write_replaces_existing_content(root):
    (root / "f.txt").write_text("a much longer original text")
    run(ctx_for(root), "fs.write", path="f.txt", content="short")
    assert (root / "f.txt").read_text() == "short"


def test_write_to_a_git_hook_is_refused_and_recorded(root):
    (root / ".git" / "hooks").mkdir(parents=True)
    ctx = ctx_for(root)
    err = fail(ctx, "fs.write", path=".git/hooks/pre-commit", content="#!/bin/sh\n")
    assert (err.code, err.details["reason"]) == ("sensitive_path_denied", "protected_path")
    assert ctx.signals == [
        SecuritySensitivePathDenied(
            tool="fs.write",
            path=".git/hooks/pre-commit",
            reason="protected_path",
            call_id="call-1",
        )
    ]
    assert not (root / ".git" / "hooks" / "pre-commit").exists()


def test_write_through_a_symlink_to_outside_changes_nothing_outside(root, tmp_path):
    (root / "link").symlink_to(tmp_path / "outside")
    err = fail(ctx_for(root), "fs.write", path="link/secret.txt", content="pwned")
    assert (err.code, err.details["reason"]) == ("outside_root", "symlink_escape")
    assert (tmp_path / "outside" / "secret.txt").read_text() == "outside secret\n"


def test_write_with_make_parents_never_creates_directories_outside(root, tmp_path):
    err = fail(ctx_for(root), "fs.write", path="../outside/new/dir/x.txt", content="x")
    assert (err.code, err.details["reason"]) == ("outside_root", "dotdot")
    assert sorted(os.listdir(tmp_path / "outside")) == ["secret.txt"]


def test_write_of_a_lone_surrogate_is_invalid(root):
    err = fail(ctx_for(root), "fs.write", path="f.txt", content="\ud800")
    assert (err.code, err.details["arg"]) == ("invalid_tool_args", "content")


# --- fs.edit -------------------------------------------------------------------------


def test_edit_replaces_a_unique_occurrence(root):
    (root / "f.py").write_text("x = 1\ny = 2\n")
    result = run(ctx_for(root), "fs.edit", path="f.py", old="y = 2", new="y = 3")
    assert result == {"path": "f.py", "replacements": 1}
    assert (root / "f.py").read_text() == "x = 1\ny = 3\n"


def test_edit_refuses_an_ambiguous_old_text_and_leaves_the_file(root):
    (root / "f.py").write_text("a\na\n")
    err = fail(ctx_for(root), "fs.edit", path="f.py", old="a", new="b")
    assert (err.code, err.details["reason"], err.details["count"]) == (
        "tool_error",
        "old_not_unique",
        2,
    )
    assert (root / "f.py").read_text() == "a\na\n"


def test_edit_with_replace_all_replaces_every_occurrence(root):
    (root / "f.py").write_text("a\na\n")
    result = run(ctx_for(root), "fs.edit", path="f.py", old="a", new="b", replace_all=True)
    assert result["replacements"] == 2
    assert (root / "f.py").read_text() == "b\nb\n"


def test_edit_fails_when_the_old_text_is_absent(root):
    (root / "f.py").write_text("a\n")
    err = fail(ctx_for(root), "fs.edit", path="f.py", old="zzz", new="b")
    assert (err.code, err.details["reason"]) == ("tool_error", "old_not_found")


def test_edit_keeps_bytes_that_are_not_utf8(root):
    (root / "f.bin").write_bytes(b"\xff keep \xfe\nname\n")
    run(ctx_for(root), "fs.edit", path="f.bin", old="name", new="NAME")
    assert (root / "f.bin").read_bytes() == b"\xff keep \xfe\nNAME\n"


def test_edit_of_roost_assets_is_refused(root):
    (root / ".roost" / "skills").mkdir(parents=True)
    (root / ".roost" / "skills" / "x.md").write_text("skill")
    err = fail(ctx_for(root), "fs.edit", path=".roost/skills/x.md", old="skill", new="evil")
    assert (err.code, err.details["reason"]) == ("sensitive_path_denied", "protected_path")
    assert (root / ".roost" / "skills" / "x.md").read_text() == "skill"


def test_edit_of_a_hard_link_to_an_outside_file_is_refused(root, tmp_path):
    os.link(tmp_path / "outside" / "secret.txt", root / "hard.txt")
    err = fail(ctx_for(root), "fs.edit", path="hard.txt", old="secret", new="pwned")
    assert (err.code, err.details["reason"]) == ("outside_root", "hard_link")
    assert (tmp_path / "outside" / "secret.txt").read_text() == "outside secret\n"


# --- fs.list -------------------------------------------------------------------------


def test_list_shows_the_root_sorted_with_types(root):
    (root / "b.txt").write_text("b")
    (root / "a").mkdir()
    (root / "a" / "inner.txt").write_text("i")
    (root / "c").symlink_to("a")
    result = run(ctx_for(root), "fs.list")
    assert result == {
        "path": ".",
        "entries": [
            {"path": "a", "type": "dir"},
            {"path": "b.txt", "type": "file"},
            {"path": "c", "type": "symlink"},
        ],
        "truncated": False,
    }


def test_list_of_a_subdirectory_gives_paths_relative_to_the_root(root):
    (root / "pkg").mkdir()
    (root / "pkg" / "m.py").write_text("")
    assert run(ctx_for(root), "fs.list", path="pkg")["entries"] == [
        {"path": "pkg/m.py", "type": "file"}
    ]


def test_a_simple_glob_matches_one_level(root):
    (root / "top.py").write_text("")
    (root / "notes.md").write_text("")
    (root / "pkg").mkdir()
    (root / "pkg" / "deep.py").write_text("")
    entries = run(ctx_for(root), "fs.list", glob="*.py")["entries"]
    assert entries == [{"path": "top.py", "type": "file"}]


def test_a_double_star_glob_recurses_but_not_through_symlinks_or_git(root, tmp_path):
    (root / "top.py").write_text("")
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "sub" / "deep.py").write_text("")
    (root / ".git").mkdir()
    (root / ".git" / "hook.py").write_text("")
    (tmp_path / "outside" / "evil.py").write_text("")
    (root / "out").symlink_to(tmp_path / "outside")
    entries = run(ctx_for(root), "fs.list", glob="**/*.py")["entries"]
    assert [e["path"] for e in entries] == ["pkg/sub/deep.py", "top.py"]


def test_a_glob_that_would_backtrack_is_matched_in_linear_time(root):
    # With re, [^/]*a[^/]*a...b\Z on a 200-character name backtracks for hours.
    (root / ("a" * 200)).write_text("")
    (root / ("a" * 199 + "b")).write_text("")
    entries = run(ctx_for(root), "fs.list", glob="*a*a*a*a*a*a*a*a*a*a*b")["entries"]
    assert entries == [{"path": "a" * 199 + "b", "type": "file"}]


def test_glob_brackets_and_punctuation_match_literally_or_as_classes(root):
    for name in ("a b+c.txt", "x1.txt", "x2.txt", "y1.txt"):
        (root / name).write_text("")
    assert [e["path"] for e in run(ctx_for(root), "fs.list", glob="a b+c.*")["entries"]] == [
        "a b+c.txt"
    ]
    assert [e["path"] for e in run(ctx_for(root), "fs.list", glob="[!y]?.txt")["entries"]] == [
        "x1.txt",
        "x2.txt",
    ]


def test_a_glob_re2_refuses_is_an_invalid_argument_with_the_reason(root):
    err = fail(ctx_for(root), "fs.list", glob="[z-a]*")
    assert (err.code, err.details["kind"], err.details["arg"], err.details["reason"]) == (
        "invalid_tool_args",
        "invalid_type",
        "glob",
        "invalid_regex",
    )
    assert err.message.startswith("argument 'glob' must be a valid glob, got '[z-a]*': ")


def test_list_is_capped_and_says_so(root):
    for i in range(LIST_MAX_ENTRIES + 5):
        (root / f"f{i:05}").write_text("")
    result = run(ctx_for(root), "fs.list")
    assert (len(result["entries"]), result["truncated"]) == (LIST_MAX_ENTRIES, True)
    assert result["entries"][0] == {"path": "f00000", "type": "file"}


def test_list_outside_the_root_is_refused(root):
    ctx = ctx_for(root)
    err = fail(ctx, "fs.list", path="..")
    assert (err.code, err.details["reason"]) == ("outside_root", "dotdot")
    assert len(ctx.signals) == 1


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A ROOST_HOME beside the root, holding text a search would find, protected."""
    path = tmp_path / "state" / "roost"
    (path / "logs").mkdir(parents=True)
    (path / "logs" / "daemon.log").write_text('{"event": "daemon_started", "needle": 1}\n')
    (path / "roost.pid").write_text("needle\n")
    (tmp_path / "state" / "other.txt").write_text("needle\n")
    protect_state_home(str(path))
    yield path
    protect_state_home(None)


def test_list_and_search_skip_roost_home_under_an_allowlisted_directory(root, home, tmp_path):
    ctx = ctx_for(root, outside_root_allowlist=[{"path": "/", "reason_code": "everything"}])
    state = str(tmp_path / "state")
    listed = run(ctx, "fs.list", path=state, glob="**")
    assert listed["entries"] == [{"path": state + "/other.txt", "type": "file"}]
    found = run(ctx, "fs.search", pattern="needle", path=state)
    assert [m["path"] for m in found["matches"]] == [state + "/other.txt"]
    error = fail(ctx, "fs.list", path=str(home))
    assert (error.code, error.details["reason"], error.details["pattern"]) == (
        "sensitive_path_denied",
        "protected_path",
        "ROOST_HOME",
    )
    assert ctx.signals[-1] == SecuritySensitivePathDenied(
        tool="fs.list", path=str(home), reason="protected_path", call_id="call-1"
    )


def test_list_of_a_file_is_not_a_directory(root):
    (root / "f.txt").write_text("")
    err = fail(ctx_for(root), "fs.list", path="f.txt")
    assert (err.code, err.details["reason"]) == ("tool_error", "not_a_directory")


# --- fs.search -----------------------------------------------------------------------


def test_search_finds_plain_text_with_line_numbers(root):
    (root / "a.py").write_text("import os\nprint('hi')\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "b.py").write_text("x = 1\nprint(x)\n")
    result = run(ctx_for(root), "fs.search", pattern="print(")
    assert result["matches"] == [
        {"path": "a.py", "line": 2, "text": "print('hi')"},
        {"path": "pkg/b.py", "line": 2, "text": "print(x)"},
    ]
    assert (result["truncated"], result["files_scanned"]) == (False, 2)


def test_plain_search_treats_regex_characters_literally(root):
    (root / "a.txt").write_text("a.c\nabc\n")
    matches = run(ctx_for(root), "fs.search", pattern="a.c")["matches"]
    assert [m["line"] for m in matches] == [1]


def test_regex_search_uses_the_regex(root):
    (root / "a.txt").write_text("a.c\nabc\nxyz\n")
    matches = run(ctx_for(root), "fs.search", pattern=r"^a.c$", regex=True)["matches"]
    assert [m["line"] for m in matches] == [1, 2]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(unclosed", "invalid_regex"),
        (r"(\w+)\1", "unsupported_regex"),
        (r"(?P<w>x)(?P=w)", "unsupported_regex"),
        ("foo(?=bar)", "unsupported_regex"),
        ("(?<!x)foo", "unsupported_regex"),
        ("x{1001}", "regex_too_complex"),
        (".{1000}", "regex_too_complex"),
        ("a" * 1001, "pattern_too_long"),
    ],
)
def test_invalid_or_unsupported_regexes_are_refused(root, pattern, reason):
    err = fail(ctx_for(root), "fs.search", pattern=pattern, regex=True)
    assert (err.code, err.details) == (
        "invalid_tool_args",
        {"kind": "invalid_type", "reason": reason},
    )


@pytest.mark.parametrize(
    ("pattern", "lines"),
    [
        (r"(?:a|a)+$", [2]),
        (r"(a+)+$", [2]),
        (r"(a|aa)+$", [2]),
        (r"(.*a){20}", [1, 2]),
    ],
)
def test_catastrophic_regexes_search_long_lines_correctly(root, pattern, lines):
    (root / "long.txt").write_text("a" * 50_000 + "!\n" + "a" * 50_000 + "\nshort\n")
    result = run(ctx_for(root), "fs.search", pattern=pattern, regex=True)
    assert [m["line"] for m in result["matches"]] == lines
    assert (result["truncated"], result["files_scanned"]) == (False, 1)


def test_search_skips_binary_files(root):
    (root / "blob.bin").write_bytes(b"\0needle")
    (root / "text.txt").write_text("needle\n")
    result = run(ctx_for(root), "fs.search", pattern="needle")
    assert [m["path"] for m in result["matches"]] == ["text.txt"]
    assert result["skipped_binary_or_large"] == 1


def test_search_skips_sensitive_files_and_counts_them(root):
    (root / ".env").write_text("API=needle\n")
    (root / "keys").mkdir()
    (root / "keys" / "id_rsa").write_text("needle\n")
    (root / "ok.txt").write_text("needle\n")
    result = run(ctx_for(root), "fs.search", pattern="needle")
    assert [m["path"] for m in result["matches"]] == ["ok.txt"]
    assert result["skipped_sensitive"] == 2


def test_search_never_follows_symlinks_out_of_the_root(root, tmp_path):
    (root / "out").symlink_to(tmp_path / "outside")
    (root / "leak.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    result = run(ctx_for(root), "fs.search", pattern="secret")
    assert (result["matches"], result["files_scanned"]) == ([], 0)


def test_search_is_capped_and_says_so(root):
    (root / "many.txt").write_text("hit\n" * (SEARCH_MAX_MATCHES + 10))
    result = run(ctx_for(root), "fs.search", pattern="hit")
    assert (len(result["matches"]), result["truncated"]) == (SEARCH_MAX_MATCHES, True)


def test_search_of_a_single_file(root):
    (root / "one.txt").write_text("zz\nneedle\n")
    (root / "two.txt").write_text("needle\n")
    result = run(ctx_for(root), "fs.search", pattern="needle", path="one.txt")
    assert result["matches"] == [{"path": "one.txt", "line": 2, "text": "needle"}]


def test_search_of_a_sensitive_file_by_name_is_refused(root):
    (root / "server.pem").write_text("needle\n")
    err = fail(ctx_for(root), "fs.search", pattern="needle", path="server.pem")
    assert (err.code, err.details["reason"]) == ("sensitive_path_denied", "sensitive_path")


def test_search_outside_the_root_is_refused(root):
    err = fail(ctx_for(root), "fs.search", pattern="secret", path="../outside")
    assert (err.code, err.details["reason"]) == ("outside_root", "dotdot")


def test_search_stops_when_the_call_is_cancelled(root):
    for i in range(3):
        (root / f"f{i}.txt").write_text("needle\n")
    ctx = ctx_for(root)
    ctx.cancelled.set()
    result = run(ctx, "fs.search", pattern="needle")
    assert (len(result["matches"]), result["truncated"]) == (0, True)


def test_a_file_search_stops_at_the_next_line_once_told_to(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("hit\n" * 10)
    asked: list[int] = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3

    found = search_file(os.open(path, os.O_RDONLY), lambda line: line == "hit", stop)
    assert found == ([(1, "hit"), (2, "hit"), (3, "hit")], False)
    assert search_file(os.open(path, os.O_RDONLY), lambda line: True, lambda: False) == (
        [(n, "hit") for n in range(1, 11)],
        True,
    )
