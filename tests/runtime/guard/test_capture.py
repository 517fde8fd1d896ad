"""An output stream's capture: what fits is kept, the rest read, dropped and marked."""

from __future__ import annotations

from runtime.guard.sandbox.proctree import Capture


def test_what_fits_is_kept_and_the_rest_marks_the_capture_truncated() -> None:
    capture = Capture(5)
    capture.feed(b"abc")
    assert (bytes(capture.data), capture.truncated) == (b"abc", False)
    capture.feed(b"de")
    assert (bytes(capture.data), capture.truncated) == (b"abcde", False)
    capture.feed(b"")
    assert (bytes(capture.data), capture.truncated) == (b"abcde", False)
    capture.feed(b"f")
    assert (bytes(capture.data), capture.truncated) == (b"abcde", True)


def test_a_chunk_larger_than_the_room_left_is_cut_at_the_cap() -> None:
    capture = Capture(4)
    capture.feed(b"ab")
    capture.feed(b"cdef")
    assert (capture.text(), capture.truncated) == ("abcd", True)


def test_a_capture_of_nothing_keeps_nothing() -> None:
    capture = Capture(0)
    capture.feed(b"x")
    assert (bytes(capture.data), capture.truncated) == (b"", True)
