"""What every actor shares (``actors.base``): whether it profiles itself."""

from __future__ import annotations

from actors.process import profiling_wanted


def test_profiling_follows_the_profile_dir_and_the_listed_kinds() -> None:
    assert not profiling_wanted("conversation", {})
    assert not profiling_wanted("conversation", {"ROOST_PROFILE_KINDS": "conversation"})
    assert profiling_wanted("journal", {"ROOST_PROFILE_DIR": "/x"})
    only = {"ROOST_PROFILE_DIR": "/x", "ROOST_PROFILE_KINDS": "conversation,journal"}
    assert profiling_wanted("journal", only)
    assert not profiling_wanted("project", only)
