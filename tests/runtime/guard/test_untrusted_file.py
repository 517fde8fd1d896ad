"""Reading a file a tool could have touched (``guard.untrusted_file``)."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

import pytest

from runtime.guard.untrusted_file import UntrustedFileError, read_untrusted_file


def test_a_small_regular_file_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "n").write_bytes(b"2\n")
    assert read_untrusted_file(str(tmp_path / "n"), max_bytes=16) == b"2\n"


def test_a_symlink_is_never_followed(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"999\n")
    (tmp_path / "n").symlink_to(tmp_path / "target")
    with pytest.raises(OSError) as caught:
        read_untrusted_file(str(tmp_path / "n"), max_bytes=16)
    assert caught.value.errno == errno.ELOOP


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "n")
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            read_untrusted_file(str(tmp_path / "n"), max_bytes=16)
        except BaseException as e:
            outcome.append(e)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "the read blocked on a FIFO"
    [error] = outcome
    assert isinstance(error, UntrustedFileError) and error.reason == "not_a_regular_file"


def test_a_device_is_refused() -> None:
    with pytest.raises(UntrustedFileError) as caught:
        read_untrusted_file("/dev/zero", max_bytes=16)
    assert caught.value.reason == "not_a_regular_file"


def test_a_file_over_the_limit_is_refused_after_reading_only_the_limit(tmp_path: Path) -> None:
    with open(tmp_path / "n", "wb") as f:
        f.truncate(64 * 1024 * 1024)
    with pytest.raises(UntrustedFileError) as caught:
        read_untrusted_file(str(tmp_path / "n"), max_bytes=16)
    assert caught.value.reason == "too_large"
