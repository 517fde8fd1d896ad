"""Where masked values come from (``runtime.guard.secrets.sources``): files and environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.guard.secrets.masking import SECRET_VALUE_MARKER
from runtime.guard.secrets.sensitive_files import file_values
from runtime.guard.secrets.sources import (
    MAX_FILE_BYTES,
    SecretSources,
    environment_values,
    project_sources,
)
from runtime.option_table import RuntimeOptions
from runtime.policy.options import validate_options

DENY = RuntimeOptions().sensitive_path_denylist
M = SECRET_VALUE_MARKER


def sources(root: Path, **env: str) -> SecretSources:
    return SecretSources(str(root), deny=DENY, environ=env, rescan_s=0)


def test_dotenv_lines_give_their_values_without_quotes_or_comments() -> None:
    text = (
        "# a comment\n"
        'export API_TOKEN="Ab3dEf9hIj"  # the token\n'
        "SERVICE_ACCESS='Zy8xWv7uTs'\n"
        "PLAIN=Qr5sTu7vWx # note\n"
        "yaml_key: Mn4oPq6rSt\n"
    )

    assert file_values(text) == {"Ab3dEf9hIj", "Zy8xWv7uTs", "Qr5sTu7vWx", "Mn4oPq6rSt"}


def test_ordinary_and_short_values_count_only_under_a_sensitive_key() -> None:
    text = "NODE_ENV=production\nPORT=80808080\nPIN=4711\nDB_PASSWORD=correcthorse\n"

    assert file_values(text) == {"correcthorse"}


def test_a_json_document_gives_its_strings() -> None:
    text = '{"web": {"client_secret": "Sup3rS3cr3t", "name": "myapplication"}, "n": 5}'

    assert file_values(text) == {"Sup3rS3cr3t"}


def test_a_pem_key_gives_its_body_lines_and_the_whole_body() -> None:
    text = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
        "QyNTUxOQAAACBh\n"
        "-----END OPENSSH PRIVATE KEY-----\n"
    )
    first = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"

    assert file_values(text) == {first, "QyNTUxOQAAACBh", first + "QyNTUxOQAAACBh"}


def test_a_bare_token_line_is_a_value() -> None:
    assert file_values("  xoxp-1234-abcd-EFGH  \n\n") == {"xoxp-1234-abcd-EFGH"}


def test_withheld_environment_values_that_look_secret_are_known() -> None:
    env = {
        "MY_PASSWORD": "hunter2hunter2",
        "DEPLOY_KEY_FROM_CI": "AbcDef1234567890xyz",
        "SOMETHING": "ZxC9vB8nM7aS6dF5gH4j",  # a token by its look alone
        "MODEL_KEY": "onlylettersbutnamed",  # named by llm_api_key_env
        "GIT_COMMIT": "a" * 40,  # lower-case hex: a commit, not a token
        "LS_COLORS": "rs=0:di=01;34:ln=01;36:mh=00",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/root/some/where/long",
        "LANG": "C.UTF-8",
    }

    assert environment_values(env, "MODEL_KEY") == {
        "hunter2hunter2",
        "AbcDef1234567890xyz",
        "ZxC9vB8nM7aS6dF5gH4j",
        "onlylettersbutnamed",
    }


def test_sensitive_files_anywhere_under_the_root_are_read_and_git_is_not(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text("A=Top1Secret1\n")
    (tmp_path / "svc" / "deep").mkdir(parents=True)
    (tmp_path / "svc" / "deep" / ".env.local").write_text("B=Top2Secret2\n")
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "server.key").write_text("Top3Secret3\n")
    (tmp_path / "notes.txt").write_text("C=NotSecret42\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / ".env").write_text("D=InGitDir99\n")

    masker = sources(tmp_path).masker()

    assert masker.values == {"Top1Secret1", "Top2Secret2", "Top3Secret3"}


def test_an_allowlisted_sensitive_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("A=Top1Secret1\n")
    (tmp_path / ".env.example").write_text("A=Placeholder1\n")

    found = SecretSources(str(tmp_path), deny=DENY, allow=[".env.example"], environ={}, rescan_s=0)

    assert found.masker().values == {"Top1Secret1"}


def test_a_changed_added_or_removed_file_changes_the_values(tmp_path: Path) -> None:
    found = sources(tmp_path)
    assert not found.masker()

    (tmp_path / ".env").write_text("A=First1Value\n")
    assert found.masker().values == {"First1Value"}
    (tmp_path / ".env").write_text("A=Second2Value\n")
    assert found.masker().values == {"Second2Value"}
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "id_rsa").write_text("Third3Value\n")
    assert found.masker().values == {"Second2Value", "Third3Value"}
    (tmp_path / ".env").unlink()
    assert found.masker().values == {"Third3Value"}


def test_the_masker_is_reused_while_nothing_changed(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("A=First1Value\n")
    found = sources(tmp_path, API_TOKEN="Env1Token1Value")

    first = found.masker()

    assert found.masker() is first
    assert first.values == {"First1Value", "Env1Token1Value"}


def test_symlinks_fifos_and_huge_files_are_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("Outside1Value\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / ".env").symlink_to(outside)
    os.mkfifo(root / ".env.pipe")
    (root / ".env.big").write_text("A=Big1Value1\n" + "#" * MAX_FILE_BYTES)
    (root / "linked").symlink_to(tmp_path, target_is_directory=True)

    assert not sources(root).masker()  # and the FIFO did not block the read


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_an_unreadable_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("A=Hidden1Value\n")
    (tmp_path / ".env").chmod(0)

    assert not sources(tmp_path).masker()


def test_the_masker_masks_what_the_files_hold(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("SERVICE_ACCESS=Ac9xYz8wVu7t\n")

    masked, count = sources(tmp_path).masker().mask_text("got: t7uVw8zYx9cA")

    assert (masked, count) == (f"got: {M}", 1)


def test_every_file_of_a_sensitive_directory_is_read(tmp_path: Path) -> None:
    (tmp_path / "secrets" / "prod").mkdir(parents=True)
    (tmp_path / "secrets" / "prod" / "db.txt").write_text("Db1Password1\n")
    (tmp_path / "config" / "app").mkdir(parents=True)
    (tmp_path / "config" / "app" / "creds.yml").write_text("token: Yml1Token1\n")
    (tmp_path / "config" / "other.yml").write_text("token: NotRead123\n")

    found = SecretSources(str(tmp_path), deny=["secrets", "app/creds.yml"], environ={}, rescan_s=0)

    assert found.masker().values == {"Db1Password1", "Yml1Token1"}


def test_new_files_are_looked_for_once_a_rescan_period_and_known_ones_every_time(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text("A=First1Value\n")
    found = SecretSources(str(tmp_path), deny=DENY, environ={}, rescan_s=3600)
    assert found.masker().values == {"First1Value"}

    (tmp_path / ".env").write_text("A=Second2Value\n")
    (tmp_path / "id_rsa").write_text("Third3Value\n")

    assert found.masker().values == {"Second2Value"}  # the new file waits for the rescan


def test_dependency_trees_are_not_looked_into(tmp_path: Path) -> None:
    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    (tmp_path / "node_modules" / "pkg" / ".env").write_text("A=Vendored1Value\n")
    (tmp_path / ".env").write_text("A=Project1Value\n")

    assert sources(tmp_path).masker().values == {"Project1Value"}


def test_a_projects_sources_know_the_env_its_mcp_servers_are_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = validate_options(
        {
            "mcp_servers": [
                {"name": "fx", "command": ["srv"], "env": {"API_TOKEN": "Mcp1Token1Value"}}
            ],
            "llm_api_key_env": "ROOST_TEST_MODEL_KEY",
        }
    )
    monkeypatch.setenv("ROOST_TEST_MODEL_KEY", "modelkeyletters")

    values = project_sources(str(tmp_path), options).masker().values

    assert {"Mcp1Token1Value", "modelkeyletters"} <= values
