"""Bounded reads of files a tool process can write: no link, no FIFO or device, no flood."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from runtime.guard.paths.safe_read import UnsafeFileError, bounded_lines, read_regular


def test_a_regular_file_is_read_whole_when_it_fits(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"12345")

    assert read_regular(str(tmp_path / "f"), 5) == b"12345"


def test_a_file_over_the_cap_is_refused_or_cut(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"123456")

    with pytest.raises(UnsafeFileError) as caught:
        read_regular(str(tmp_path / "f"), 5)
    assert caught.value.reason == "too_large"
    assert read_regular(str(tmp_path / "f"), 5, truncate=True) == b"12345"


def test_a_symlink_is_never_followed_even_to_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"secret")
    (tmp_path / "link").symlink_to(tmp_path / "target")

    with pytest.raises(UnsafeFileError) as caught:
        read_regular(str(tmp_path / "link"), 100)
    assert caught.value.reason == "symlink"


def test_a_fifo_nobody_writes_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")

    with pytest.raises(UnsafeFileError) as caught:
        read_regular(str(tmp_path / "pipe"), 100)
    assert caught.value.reason == "not_a_regular_file"


def test_a_device_that_never_ends_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsafeFileError) as caught:
        read_regular("/dev/zero", 100)
    assert caught.value.reason == "not_a_regular_file"


def test_a_name_relative_to_a_directory_descriptor_is_read_there(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"here")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_regular("f", 10, dir_fd=fd) == b"here"
    finally:
        os.close(fd)


def test_a_missing_file_is_an_ordinary_os_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular(str(tmp_path / "absent"), 10)


def test_bounded_lines_cuts_a_long_line_and_keeps_counting_after_it() -> None:
    data = b"short\n" + b"x" * 100_000 + b"\nlast"

    lines = list(bounded_lines(io.BufferedReader(io.BytesIO(data)), 10))

    assert lines == [(b"short\n", False), (b"x" * 10, True), (b"last", False)]
