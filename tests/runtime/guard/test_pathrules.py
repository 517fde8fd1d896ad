"""Pure path rules: text validation, sensitive and protected names, path extraction."""

from __future__ import annotations

import fnmatch
import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import InvalidRuntimeOptError, ToolError
from runtime.guard.paths.arguments import extract_paths
from runtime.guard.paths.rules import (
    SensitiveRules,
    _fold_compat,
    fold,
    parse_outside_allowlist,
    protected_match,
    validate_path_text,
)

DEFAULT_DENY = [".env", ".env.*", "*.pem", "*.key", "id_rsa", "id_ed25519"]


def _reason(exc: pytest.ExceptionInfo[ToolError]) -> tuple[str, object, object]:
    return exc.value.code, exc.value.details.get("kind"), exc.value.details.get("reason")


# --- validate_path_text ----------------------------------------------------------------


def test_a_nul_byte_is_refused_as_invalid_tool_args():
    with pytest.raises(ToolError) as exc:
        validate_path_text("notes.txt\x00.png")
    assert _reason(exc) == ("invalid_tool_args", "invalid_type", "nul_byte")


def test_a_component_longer_than_255_bytes_is_refused():
    with pytest.raises(ToolError) as exc:
        validate_path_text("dir/" + "x" * 256)
    assert _reason(exc) == ("invalid_tool_args", "invalid_type", "name_too_long")


def test_a_component_of_exactly_255_bytes_is_accepted():
    assert validate_path_text("x" * 255) == "x" * 255


def test_multibyte_characters_count_in_bytes_for_the_component_limit():
    with pytest.raises(ToolError) as exc:
        validate_path_text("é" * 128)  # 256 bytes in UTF-8
    assert _reason(exc) == ("invalid_tool_args", "invalid_type", "name_too_long")


def test_a_path_longer_than_4095_bytes_is_refused():
    with pytest.raises(ToolError) as exc:
        validate_path_text("/".join(["d" * 200] * 21))
    assert _reason(exc) == ("invalid_tool_args", "invalid_type", "name_too_long")


def test_a_non_string_path_is_refused():
    with pytest.raises(ToolError) as exc:
        validate_path_text(["a"])
    assert _reason(exc) == ("invalid_tool_args", "invalid_type", "expected_string")


def test_an_empty_path_is_refused():
    with pytest.raises(ToolError) as exc:
        validate_path_text("")
    assert _reason(exc) == ("invalid_tool_args", "invalid_type", "empty_path")


# --- SensitiveRules --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "pattern"),
    [
        ([".env"], ".env"),
        ([".ENV"], ".env"),
        (["app", ".Env.Local"], ".env.*"),
        (["ID_RSA"], "id_rsa"),
        (["home", "\uff49d_rsa"], "id_rsa"),  # fullwidth i, folded by NFKC
        (["certs", "server.PEM"], "*.pem"),
        (["keys.key", "readme.md"], "*.key"),  # a directory component counts too
    ],
)
def test_the_default_denylist_matches_case_and_unicode_variants(parts, pattern):
    assert SensitiveRules(DEFAULT_DENY).match(parts) == pattern


def test_composed_and_decomposed_names_both_match_a_pattern_with_an_accent():
    rules = SensitiveRules(["secrét.txt"])
    composed = unicodedata.normalize("NFC", "secrét.txt")
    decomposed = unicodedata.normalize("NFD", "secrét.txt")
    assert composed != decomposed
    assert rules.match([composed]) == "secrét.txt"
    assert rules.match([decomposed]) == "secrét.txt"


def test_a_decomposed_pattern_matches_a_composed_name():
    rules = SensitiveRules([unicodedata.normalize("NFD", "clé.txt")])
    assert rules.match([unicodedata.normalize("NFC", "CLÉ.txt")]) is not None


def test_ordinary_names_do_not_match_the_default_denylist():
    rules = SensitiveRules(DEFAULT_DENY)
    assert rules.match(["src", "environment.py"]) is None
    assert rules.match(["docs", "keys.md"]) is None


def test_an_allowlist_entry_exempts_only_the_component_it_names():
    rules = SensitiveRules(DEFAULT_DENY, [".env.example"])
    assert rules.match(["app", ".env.example"]) is None
    assert rules.match(["app", ".env.local"]) == ".env.*"
    assert rules.match([".env.example", "server.pem"]) == "*.pem"


def test_a_pattern_with_a_slash_matches_any_tail_of_the_relative_path():
    rules = SensitiveRules(["config/secrets.yml"])
    assert rules.match(["app", "config", "secrets.yml"]) == "config/secrets.yml"
    assert rules.match(["config", "other.yml"]) is None


def test_a_path_allowlist_entry_exempts_a_whole_path():
    rules = SensitiveRules(DEFAULT_DENY, ["fixtures/*.pem"])
    assert rules.match(["tests", "fixtures", "cert.pem"]) is None
    assert rules.match(["certs", "cert.pem"]) == "*.pem"


def test_dot_and_dotdot_components_never_match():
    assert SensitiveRules(["*"]).match(["..", "."]) is None


_NAME_CHARS = st.sampled_from([*"aeEnvVkpK._-*", "é", "e\u0301", "\uff49", "ß", "İ"])
_NAMES = st.lists(_NAME_CHARS, min_size=1, max_size=6).map("".join)
_PATTERNS = st.one_of(
    st.sampled_from([*DEFAULT_DENY, "config/*.yml", "*/.ENV", "SECRÉT*", "\uff49d_rsa", "ss*"]),
    _NAMES,
    st.builds("/".join, st.lists(_NAMES, min_size=2, max_size=3)),
)


@settings(max_examples=300, deadline=None)
@given(
    deny=st.lists(_PATTERNS, max_size=6),
    allow=st.lists(_PATTERNS, max_size=2),
    parts=st.lists(st.one_of(_NAMES, st.sampled_from(["id_rsa", ".env", "config"])), max_size=4),
)
def test_the_screened_match_finds_what_the_pattern_by_pattern_match_finds(deny, allow, parts):
    # match() first screens the components with one regex per fold and skips the
    # pattern-by-pattern comparison when nothing can hit: the answer must not change.
    rules = SensitiveRules(deny, allow)
    kept = [p for p in parts if p not in ("", ".", "..")]
    expected = None
    for folder in (fold, _fold_compat):
        if kept and expected is None:
            expected = rules._match_folded([folder(p) for p in kept], folder)
    assert rules.match(parts) == expected


# --- protected_match -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parts", "place"),
    [
        ([".git", "hooks", "pre-commit"], ".git/hooks/"),
        ([".git", "hooks"], ".git/hooks/"),
        ([".GIT", "Hooks", "post-checkout"], ".git/hooks/"),
        ([".git", "config"], ".git/config"),
        ([".git", "modules", "lib", "hooks", "pre-push"], ".git/hooks/"),
        ([".git", "modules", "lib", "config"], ".git/config"),
        (["vendor", "lib", ".git", "config"], ".git/config"),
        ([".roost", "skills", "x.md"], ".roost/"),
        ([".roost"], ".roost/"),
        (["sub", ".git"], ".git"),
        # everything else inside a .git directory: what git runs, where it reads from
        ([".git", "commondir"], ".git/"),
        ([".git", "worktrees", "wt", "gitdir"], ".git/"),
        ([".git", "worktrees", "wt", "commondir"], ".git/"),
        ([".git", "modules", "lib", "commondir"], ".git/"),
        ([".git", "config.lock"], ".git/"),
        ([".git", "info", "attributes"], ".git/"),
        ([".git", "objects", "ab", "cdef"], ".git/"),
        ([".git", "HEAD"], ".git/"),
        (["vendor", "lib", ".git", "commondir"], ".git/"),
        ([".git", "worktrees", "wt", "config.worktree"], ".git/config"),
        # spellings: case, "." and "..", Unicode, lenient filesystems
        ([".GIT", "commondir"], ".git/"),
        ([".git", ".", "commondir"], ".git/"),
        (["sub", "..", ".git", "commondir"], ".git/"),
        (["\uff0e\uff47\uff49\uff54", "commondir"], ".git/"),
        (["\uff0egit"], ".git"),
        ([".g\u200cit", "commondir"], ".git/"),
        ([".git\ufeff", "commondir"], ".git/"),
        ([".git.", "commondir"], ".git/"),
        ([".git ", "commondir"], ".git/"),
        (["GIT~1", "commondir"], ".git/"),
        (["git~2"], ".git"),
        (["ROOST~1", "skills", "x.md"], ".roost/"),
        ([".Roost.", "commands", "x.md"], ".roost/"),
        # a HEAD file makes its directory a bare repository git would discover
        (["src", "HEAD"], "HEAD"),
        (["HEAD"], "HEAD"),
        (["src", "head"], "HEAD"),
        (["src", "HEAD."], "HEAD"),
        (["src", "\uff28EAD"], "HEAD"),
    ],
)
def test_protected_places_are_recognised(parts, place):
    assert protected_match(parts) == place


@pytest.mark.parametrize(
    "parts",
    [
        [".github", "workflows", "ci.yml"],
        [".gitignore"],
        [".gitattributes"],
        [".gitmodules"],
        ["git", "commondir"],
        ["git~0"],
        ["src", ".git-blame-ignore-revs"],
        ["docs", "git.md"],
        ["HEAD", "notes.txt"],
        ["src", "HEADER.md"],
        ["src", "ahead"],
        ["src", "config"],
        ["hooks", "pre-commit"],
        [".roostrc"],
    ],
)
def test_ordinary_places_are_not_protected(parts):
    assert protected_match(parts) is None


# --- parse_outside_allowlist ------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        {"path": "/x", "reason_code": "r"},
        [{"path": "/x"}],
        [{"reason_code": "r"}],
        [{"path": "/x", "pattern": "/y/*", "reason_code": "r"}],
        [{"path": "", "reason_code": "r"}],
        [{"path": "/x", "reason_code": ""}],
        ["/x"],
    ],
)
def test_malformed_outside_root_entries_fail_with_invalid_entry(raw, tmp_path):
    with pytest.raises(InvalidRuntimeOptError) as exc:
        parse_outside_allowlist(raw, str(tmp_path))
    assert (exc.value.key, exc.value.reason) == ("outside_root_allowlist", "invalid_entry")


def test_a_relative_outside_root_entry_is_resolved_from_the_root(tmp_path):
    (tmp_path / "root").mkdir()
    (entry,) = parse_outside_allowlist(
        [{"path": "../shared", "reason_code": "shared"}], str(tmp_path / "root")
    )
    assert entry.path == str(tmp_path / "shared")
    assert entry.covers(str(tmp_path / "shared" / "a" / "b.txt"))
    assert not entry.covers(str(tmp_path / "shared-other" / "b.txt"))


# --- extract_paths ---------------------------------------------------------------------


def test_paths_are_found_under_path_keys_at_any_depth():
    args = {"a": {"b": [{"path": "x.txt"}, {"cwd": "/tmp/w"}]}, "Target": "t", "dest_": "d"}
    assert extract_paths(args) == ["x.txt", "/tmp/w", "t", "d"]


def test_lists_under_a_path_key_are_paths():
    assert extract_paths({"paths": ["a", ["b", "c"]], "files": "f"}) == ["a", "b", "c", "f"]


def test_paths_inside_json_encoded_strings_are_found():
    inner = json.dumps({"nested": {"file": "../../etc/passwd"}})
    assert extract_paths({"payload": json.dumps({"args": inner})}) == ["../../etc/passwd"]


def test_a_json_array_under_a_path_key_yields_its_elements():
    found = extract_paths({"path": json.dumps(["a.txt", "/etc/shadow"])})
    assert "a.txt" in found and "/etc/shadow" in found


def test_key_value_text_is_searched_in_any_string():
    args = {"command": "tool --cwd='/srv/x' run path=../../etc/passwd, dest=\"out dir\""}
    assert extract_paths(args) == ["/srv/x", "../../etc/passwd", "out dir"]


def test_key_value_text_does_not_match_inside_longer_words():
    assert extract_paths({"note": "xpath=a mypath=b"}) == []


def test_file_urls_are_paths():
    assert extract_paths({"url": "file:///etc/pass%77d"}) == ["/etc/passwd"]


def test_values_of_other_keys_are_not_paths():
    assert extract_paths({"content": "hello", "url": "https://example.com", "n": 3}) == []


def test_duplicates_are_reported_once_in_first_seen_order():
    assert extract_paths([{"path": "b"}, {"path": "a"}, {"file": "b"}]) == ["b", "a"]


def test_pathological_nesting_is_cut_off_without_error():
    deep: object = {"path": "deep.txt"}
    for _ in range(200):
        deep = {"x": deep}
    assert extract_paths(deep) == []


def test_invalid_json_that_looks_like_json_is_treated_as_text():
    assert extract_paths({"path": "[draft].md"}) == ["[draft].md"]


@pytest.mark.slow
@settings(max_examples=100)
@given(st.recursive(st.text(max_size=8), lambda c: st.lists(c) | st.dictionaries(st.text(), c)))
def test_extraction_never_fails_on_arbitrary_json_like_values(value):
    assert isinstance(extract_paths(value), list)


def test_rules_built_again_from_the_same_lists_reuse_their_compiled_screens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a Workspace (so a SensitiveRules) is made per tool call and per policy decision
    deny = (".reuse-test", "*.reuse-pem", "config/reuse-secrets.yml")
    first = SensitiveRules(deny)
    translated: list[str] = []
    translate = fnmatch.translate
    monkeypatch.setattr(fnmatch, "translate", lambda p: translated.append(p) or translate(p))

    again = SensitiveRules(list(deny), ["ok.reuse-pem"])

    assert translated == []
    assert again._screens == first._screens
    assert again.match(["config", "reuse-secrets.yml"]) == "config/reuse-secrets.yml"
    assert again.match(["a", "b.txt"]) is None
    translated.clear()
    SensitiveRules(("*.other-key",))
    assert "*.other-key" in translated  # a new list is translated
