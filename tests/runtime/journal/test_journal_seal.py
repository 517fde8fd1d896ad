"""The seals' files: the key, the anchors, the settings; and a daemon refusing a bad key."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from events.seal import Anchor, AnchorUnreadable, make_checkpoint, sign_anchor
from runtime.daemon import start_daemon
from runtime.errors import JournalError, RoostError
from runtime.journal.seal import AnchorStore, SealSettings, load_key
from tests.integration.conftest import daemon_env

KEY = b"k" * 32


def mode(path: Path | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_first_start_makes_a_private_key_and_later_starts_read_the_same(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    key = load_key(str(home), {})
    assert len(key) == 32
    assert (mode(home / "journal.key"), mode(home)) == (0o600, 0o700)
    assert load_key(str(home), {}) == key
    assert sorted(os.listdir(home)) == ["journal.key"]  # no temporary file left


def test_a_lost_key_is_not_replaced_while_anchors_hold_seals_made_with_it(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    load_key(str(home), {})
    AnchorStore(str(home / "anchors")).write(anchor())
    (home / "journal.key").unlink()
    lost = (
        r"^the journal key .*journal\.key is missing but .*anchors holds seals made with it; "
        r"restore the key from a backup, or move .*anchors aside to start new seals$"
    )
    with pytest.raises(JournalError, match=lost):
        load_key(str(home), {})
    assert not (home / "journal.key").exists()


def test_a_configured_key_file_is_used_and_never_created(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "roost.key"
    env = {"ROOST_JOURNAL_KEY_FILE": str(path)}
    missing = (
        r"^ROOST_JOURNAL_KEY_FILE names .*roost\.key, which does not exist; "
        r"create it with \(umask 077; head -c 32 /dev/urandom > .*roost\.key\)$"
    )
    with pytest.raises(JournalError, match=missing):
        load_key(str(tmp_path / "home"), env)
    path.parent.mkdir()
    path.write_bytes(b"s" * 40)
    path.chmod(0o600)
    assert load_key(str(tmp_path / "home"), env) == b"s" * 40
    assert not (tmp_path / "home" / "journal.key").exists()


def test_a_key_readable_by_others_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "journal.key"
    path.write_bytes(KEY)
    path.chmod(0o640)
    refused = (
        r"^the journal key .*journal\.key must be readable by its owner only \(0600\), "
        r"got 0640; fix it with chmod 600 .*journal\.key$"
    )
    with pytest.raises(JournalError, match=refused):
        load_key(str(tmp_path), {})


def test_a_short_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.key"
    path.write_bytes(b"short")
    path.chmod(0o600)
    with pytest.raises(
        JournalError, match=r"^the journal key .* must hold 32 to 4096 bytes, got 5$"
    ):
        load_key(str(tmp_path), {})


def test_a_key_behind_a_symlink_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.key"
    real.write_bytes(KEY)
    real.chmod(0o600)
    (tmp_path / "journal.key").symlink_to(real)
    with pytest.raises(JournalError, match=r"^cannot open the journal key .*journal\.key: "):
        load_key(str(tmp_path), {})


def anchor(project: str = "p1") -> Anchor:
    checkpoint = make_checkpoint(
        KEY,
        project,
        index=1,
        head_position=4,
        head_hash="a" * 64,
        prev_checkpoint="0" * 64,
        sealed_at="2026-11-22T10:00:00.000Z",
        reason="count",
    )
    unsigned = Anchor(
        project_id=project,
        checkpoint=checkpoint,
        checkpoint_seq=5,
        written_at="2026-11-22T10:00:00.001Z",
    )
    return sign_anchor(KEY, unsigned)


def test_an_anchor_is_written_privately_and_read_back_whole(tmp_path: Path) -> None:
    store = AnchorStore(str(tmp_path / "anchors"))
    assert store.read("p1") is None
    store.write(anchor())
    assert store.read("p1") == anchor()
    assert (mode(tmp_path / "anchors"), mode(store.path("p1"))) == (0o700, 0o600)
    assert os.listdir(tmp_path / "anchors") == ["p1.json"]


def test_a_project_id_that_is_no_safe_file_name_gets_a_hashed_one(tmp_path: Path) -> None:
    store = AnchorStore(str(tmp_path / "anchors"))
    path = store.path("../../etc/passwd")
    assert os.path.dirname(path) == str(tmp_path / "anchors")
    assert os.path.basename(path).startswith("_") and path.endswith(".json")
    store.write(anchor("../../etc/passwd"))
    assert store.read("../../etc/passwd") == anchor("../../etc/passwd")


def test_an_anchor_file_that_does_not_decode_is_unreadable_not_absent(tmp_path: Path) -> None:
    store = AnchorStore(str(tmp_path))
    Path(store.path("p1")).write_text("{not json")
    found = store.read("p1")
    assert isinstance(found, AnchorUnreadable)
    assert found.reason.startswith(f"{store.path('p1')} is not an anchor: JSON is malformed")


def test_seal_settings_come_from_the_environment_and_bad_values_fail_clearly() -> None:
    assert SealSettings.from_env({}) == SealSettings(every_events=256, interval_s=5.0)
    env = {"ROOST_SEAL_EVERY_EVENTS": "0", "ROOST_SEAL_INTERVAL_S": "0.5"}
    assert SealSettings.from_env(env) == SealSettings(every_events=0, interval_s=0.5)
    count = r"^ROOST_SEAL_EVERY_EVENTS must be a non-negative integer, got '2\.5'$"
    with pytest.raises(JournalError, match=count):
        SealSettings.from_env({"ROOST_SEAL_EVERY_EVENTS": "2.5"})
    interval = r"^ROOST_SEAL_INTERVAL_S must be a non-negative number, got 'soon'$"
    with pytest.raises(JournalError, match=interval):
        SealSettings.from_env({"ROOST_SEAL_INTERVAL_S": "soon"})


@pytest.mark.slow
def test_a_daemon_does_not_start_on_a_key_others_can_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "journal.key").write_bytes(KEY)
    (home / "journal.key").chmod(0o644)
    with pytest.raises(RoostError, match=r"must be readable by its owner only \(0600\), got 0644"):
        start_daemon(str(home), env=daemon_env(), timeout_s=60)
