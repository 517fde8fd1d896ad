"""Masking known secret values and their encodings (``runtime.guard.secrets.masking``)."""

from __future__ import annotations

import base64
import binascii
import json
import re
import string
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from runtime.guard.secrets.masking import (
    MIN_SECRET_LENGTH,
    SECRET_VALUE_MARKER,
    SecretMasker,
    encoded_forms,
)

SECRET = "s3cr3t-Value_42/x+y"
M = SECRET_VALUE_MARKER


def _wrapped(data: bytes, width: int) -> str:
    encoded = base64.b64encode(data).decode()
    return "\n".join(encoded[i : i + width] for i in range(0, len(encoded), width))


def _b64_core(data: bytes) -> str:
    """The middle of a base64 stream: no character that a neighbour byte decides."""
    return base64.b64encode(data).decode()[4:-4]


ENCODINGS = {
    "itself": lambda v: v,
    "reversed": lambda v: v[::-1],
    "hex": lambda v: binascii.hexlify(v.encode()).decode(),
    "HEX": lambda v: binascii.hexlify(v.encode()).decode().upper(),
    "hex of reversed": lambda v: binascii.hexlify(v[::-1].encode()).decode(),
    "url": lambda v: quote(v, safe=""),
    "url (python default)": quote,
    "url plus": quote_plus,
    "url lower-case escapes": lambda v: re.sub("%..", lambda m: m[0].lower(), quote(v, safe="")),
    "json": lambda v: json.dumps(v)[1:-1],
    "base64": lambda v: base64.b64encode(v.encode()).decode(),
    "base64 url-safe": lambda v: base64.urlsafe_b64encode(v.encode()).decode(),
    "base64 of reversed": lambda v: base64.b64encode(v[::-1].encode()).decode(),
}


@pytest.mark.parametrize("name", sorted(ENCODINGS))
def test_each_encoding_of_the_value_is_masked(name: str) -> None:
    text = f"before {ENCODINGS[name](SECRET)} after"

    masked, count = SecretMasker([SECRET]).mask_text(text)

    assert count == 1
    assert masked.startswith("before ") and masked.endswith(" after")
    assert M in masked


@pytest.mark.parametrize("shift", [0, 1, 2])
@pytest.mark.parametrize("width", [0, 76, 64, 10])
def test_the_value_inside_a_longer_base64_stream_is_masked_at_every_alignment(
    shift: int, width: int
) -> None:
    data = b"x" * (5 + shift) + b"TOKEN=" + SECRET.encode() + b"\nOTHER=1\n"
    text = base64.b64encode(data).decode() if width == 0 else _wrapped(data, width)

    masked, count = SecretMasker([SECRET]).mask_text(text)

    assert count == 1, (masked, text)
    assert _b64_core(b"TOKEN=" + SECRET.encode())[8:] not in "".join(masked.split())


@pytest.mark.parametrize(
    "dump",
    [
        lambda d: " ".join(f"{b:02x}" for b in d),  # od -An -tx1
        lambda d: "\n".join(binascii.hexlify(d).decode()[i : i + 60] for i in range(0, 99, 60)),
    ],
)
def test_byte_dumps_with_spaces_or_line_breaks_are_masked(dump: object) -> None:
    text = dump(b"A=" + SECRET.encode() + b"\n")  # type: ignore[operator]

    masked, count = SecretMasker([SECRET]).mask_text(text)

    assert count == 1
    assert binascii.hexlify(SECRET.encode()).decode() not in "".join(masked.split())


def test_every_occurrence_is_masked_and_counted() -> None:
    text = f"{SECRET} and {SECRET[::-1]} and {SECRET}"

    assert SecretMasker([SECRET]).mask_text(text) == (f"{M} and {M} and {M}", 3)


def test_overlapping_values_are_both_masked_whole() -> None:
    first, second = "abcdefgh12345", "gh12345xyzuvw"
    masker = SecretMasker([first, second])

    masked, count = masker.mask_text("[abcdefgh12345xyzuvw]")

    assert (masked, count) == (f"[{M}]", 1)


def test_a_value_inside_a_longer_value_is_masked_with_it() -> None:
    masker = SecretMasker(["inner-Secret9", "outer-inner-Secret9-tail"])

    assert masker.mask_text("x outer-inner-Secret9-tail y") == (f"x {M} y", 1)
    assert masker.mask_text("x inner-Secret9 y") == (f"x {M} y", 1)


def test_values_shorter_than_the_minimum_are_never_searched() -> None:
    short = "a" * (MIN_SECRET_LENGTH - 1)
    masker = SecretMasker([short, "Ab3"])

    assert not masker
    assert masker.mask_text(f"{short} Ab3 " * 3) == (f"{short} Ab3 " * 3, 0)
    assert masker.mask({"k": short}) == ({"k": short}, 0)


def test_no_encoded_form_is_shorter_than_the_minimum() -> None:
    assert all(len(form) >= MIN_SECRET_LENGTH for form in encoded_forms("Ab3dEf9h"))


def test_ordinary_text_around_a_value_is_left_alone() -> None:
    text = "the deploy finished; hex 0a0b0c and base64 aGVsbG8= are fine"

    assert SecretMasker([SECRET]).mask_text(text) == (text, 0)


def test_a_value_with_spaces_is_masked_however_the_text_wraps_it() -> None:
    phrase = "correct horse battery"
    masker = SecretMasker([phrase])

    assert masker.mask_text(f"pw: {phrase}!") == (f"pw: {M}!", 1)
    assert masker.mask_text("pw: correct\nhorse battery!") == (f"pw: {M}!", 1)


def test_multibyte_text_stays_valid_around_a_mask() -> None:
    value = "clé-secrète-ünïcode"
    text = f"é {value} ü {value[::-1]} ß"

    masked, count = SecretMasker([value]).mask_text(text)

    assert (masked, count) == (f"é {M} ü {M} ß", 2)


def test_json_like_data_is_masked_in_values_and_keys_and_kept_where_clean() -> None:
    clean = {"a": [1, "x"], "b": {"c": None}}
    data = {"clean": clean, "out": [f"-{SECRET}-", 3], SECRET: "k"}
    masker = SecretMasker([SECRET])

    masked, count = masker.mask(data)

    assert count == 2
    assert masked == {"clean": clean, "out": [f"-{M}-", 3], M: "k"}
    assert masked["clean"] is clean
    assert masker.mask(clean) == (clean, 0) and masker.mask(clean)[0] is clean


def test_an_empty_masker_returns_its_input() -> None:
    text = "x" * 100

    assert SecretMasker([]).mask_text(text)[0] is text


_TOKEN = st.text(
    alphabet=string.ascii_letters + string.digits + "-_/+=.~", min_size=12, max_size=40
)


@settings(max_examples=150, deadline=None)
@given(value=_TOKEN, prefix=st.binary(max_size=7), suffix=st.binary(max_size=7))
def test_a_generated_value_never_survives_base64_hex_or_reversal(
    value: str, prefix: bytes, suffix: bytes
) -> None:
    assume(value not in M and value[::-1] not in M)  # the marker itself holds "secret_value"
    data = prefix + value.encode() + suffix
    masker = SecretMasker([value])
    for text in (
        base64.b64encode(data).decode(),
        base64.urlsafe_b64encode(data).decode(),
        binascii.hexlify(data).decode(),
        value[::-1],
    ):
        masked, count = masker.mask_text(text)
        assert count >= 1, text
        assert value not in masked and value[::-1] not in masked
        # at most the characters a neighbour byte decides are left of the value's base64
        assert _b64_core(value.encode())[4:] not in masked


@pytest.mark.slow
def test_many_values_are_split_over_several_programs_and_all_found() -> None:
    values = [f"Val{index:04d}-{'x' * 20}-{index * 7919:08d}" for index in range(600)]
    masker = SecretMasker(values)

    assert masker.forms_count > 5000
    text = " | ".join([values[0], values[299][::-1], values[-1]])
    assert masker.mask_text(text) == (f"{M} | {M} | {M}", 3)


@pytest.mark.parametrize("before", range(5))
def test_base32_at_every_alignment_and_byte_dumps_are_masked(before: int) -> None:
    """``base32``, ``od -b``, ``od -tu1``, a ``list``, ``\\x``/``\\u`` escapes, ``xxd -i``."""
    masker = SecretMasker([SECRET])
    data = b"K" * before + b"=" + SECRET.encode() + b"\n"
    dumps = [
        base64.b32encode(data).decode(),
        " ".join(f"{b:03o}" for b in data),
        "  ".join(str(b) for b in data),
        str(list(data)),
        "".join(f"\\x{b:02x}" for b in data),
        "".join(f"\\u{b:04x}" for b in data),
        ", ".join(f"0x{b:02x}" for b in data),
    ]
    for dump in dumps:
        masked, count = masker.mask_text(dump)
        assert count >= 1 and M in masked, dump
