"""What a freezer cgroup writes and reads on cgroup v1 and v2 (on a stand-in directory)."""

from __future__ import annotations

from pathlib import Path

from runtime.guard.sandbox.freezer import FreezerCgroup


def test_v1_freezes_through_freezer_state_and_reads_it_back(tmp_path: Path) -> None:
    group = FreezerCgroup(str(tmp_path), "v1")
    (tmp_path / "freezer.state").write_text("THAWED\n")
    assert not group.frozen()
    assert group.freeze(0.05)
    assert (tmp_path / "freezer.state").read_text() == "FROZEN"
    assert group.frozen()


def test_v2_freezes_through_cgroup_freeze_and_reads_cgroup_events(tmp_path: Path) -> None:
    group = FreezerCgroup(str(tmp_path), "v2")
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    assert not group.frozen()
    assert not group.freeze(0.05)  # the kernel never said frozen
    assert (tmp_path / "cgroup.freeze").read_text() == "1"
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 1\n")
    assert group.frozen()
    assert group.freeze(0.05)


def test_a_freezer_whose_files_are_gone_is_not_frozen(tmp_path: Path) -> None:
    for version in ("v1", "v2"):
        group = FreezerCgroup(str(tmp_path / "gone"), version)
        assert not group.frozen()
        assert not group.freeze(0.05)
