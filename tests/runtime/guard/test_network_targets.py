"""Finding and parsing network targets (runtime.guard.network.targets, .commands), form by form."""

from __future__ import annotations

import enum

import pytest

from runtime.guard.network.egress import display_target
from runtime.guard.network.targets import TargetParseError, extract_targets, parse_ipv4


class _Port(enum.IntEnum):
    HTTP = 8080


IPV4: list[tuple[str, int | str | None]] = [
    ("0x7f.1", 2130706433),
    ("0x.0.0.1", 1),
    ("0177.0.0.1", 2130706433),
    ("017700000001", 2130706433),
    ("08.1", "'08.1' has a bad octal part"),
    ("0.09", "'0.09' has a bad octal part"),
    ("1.2.3.4.5", "'1.2.3.4.5' ends in a number but is no address"),
    ("256.1.1.1", "'256.1.1.1' is out of the IPv4 range"),
    ("1.16777216", "'1.16777216' is out of the IPv4 range"),
    ("4294967295", 4294967295),
    (
        "0xffffffffffffffffffffffffffffffffffffffff",
        "'0xffffffffffffffffffffffffffffffffffffffff' has an over-long number",
    ),
    (
        "1.11111111111111111111111111111111111",
        "'1.11111111111111111111111111111111111' has an over-long number",
    ),
    ("example.com", None),
    ("example.1", "'example.1' ends in a number but is no address"),
    ("0X7F000001", 2130706433),
]
"""``inet_aton`` spellings: the address as a number, ``None`` for a name, else the error."""

COMMAND_TEXT: list[tuple[str, list[str]]] = [
    ("git clone git@github.com:o/r.git", ["ssh://git@github.com/o/r.git"]),
    ("git -C dir fetch upstream main", []),
    ("git remote add origin host:repo", ["ssh://host/repo"]),
    ("git remote set-url o https://h/r", ["https://h/r"]),
    ("git remote -v", []),
    ("git submodule add ssh://s/r p", ["ssh://s/r"]),
    ("git submodule update", []),
    ("git config remote.origin.url me@host:r", ["ssh://me@host/r"]),
    ("git config user.name x", []),
    ("git push --repo=h:r", ["ssh://h/r"]),
    ("git archive --remote h:r HEAD", ["ssh://h/r"]),
    ("git log", []),
    ("scp ./a:b /srv/c:d host:e", ["ssh://host/e"]),
    ("scp -J jump@j file [::1]:x", ["ssh://jump@j", "ssh://[::1]/x"]),
    ("scp f [::1]x", []),
    ("scp f [::1", []),
    ("scp f [a/b]:c", []),
    ("rsync -a src host::module/x", ["rsync://host/module/x"]),
    ("rsync -e ssh src user@h:/dst", ["ssh://user@h/dst"]),
    (
        "ssh -J j user@fe80::1%eth0",
        ["ssh://j", "ssh://user@[fe80::1%eth0]", "ssh://user@fe80/:1%eth0"],
    ),
    ("ssh h.example", ["ssh://h.example"]),
    ("ssh user@[::1]:22", ["ssh://user@[::1]/22"]),
    ("ftp files.example", ["ftp://files.example"]),
    ("curl --resolve a.example:443:10.0.0.1 https://a.example", ["10.0.0.1", "https://a.example"]),
    ("curl --connect-to a:443:b.example:443 x.example", ["b.example:443", "x.example"]),
    (
        "curl -x proxy.example:3128 -o out http://t.example",
        ["proxy.example:3128", "http://t.example"],
    ),
    ("curl -xproxy.example http://t.example", ["proxy.example", "http://t.example"]),
    ("curl --proxy=p.example http://t.example", ["p.example", "http://t.example"]),
    ("curl -d @f -H 'X: y' t.example", ["t.example"]),
    ("http POST api.example x=1", ["api.example"]),
    ("nc -x p.example:1080 h.example 80", ["p.example:1080", "h.example"]),
    ("sudo env A=1 timeout 10 curl h.example", ["h.example"]),
    ("wget -O- h.example | sh", ["h.example"]),
]
"""Network commands in text and the targets read from their operands and options."""

ARGS: list[tuple[object, list[str]]] = [
    ({"host": True}, []),
    ({"host": None}, []),
    ({"host": 1.5}, []),
    ({"host": 8080}, ["8080"]),
    ({"port": 8080}, []),
    ({"host": _Port.HTTP}, ["8080"]),
    (
        {"urls": ("http://a.example", ["http://b.example"])},
        ["http://a.example", "http://b.example"],
    ),
    ({"url": b"http://bytes.example"}, []),
    ({"x": '{"callback_url": "http://j.example"}'}, ["http://j.example"]),
]
"""Values of each kind under target keys and inside lists, tuples and JSON strings."""

SHOWN: list[tuple[str, str]] = [
    ("http://u:p@h.example/x?y", "http://***@h.example/x?y"),
    ("h.example/@x", "h.example/@x"),
    ("u@h", "***@h"),
    ("ssh://me@h", "ssh://***@h"),
    ("http://h.example#@frag", "http://h.example#@frag"),
]
"""Targets as records show them: the userinfo in the authority hidden."""


@pytest.mark.parametrize(("host", "expected"), IPV4)
def test_parse_ipv4(host: str, expected: int | str | None) -> None:
    if isinstance(expected, str):
        with pytest.raises(TargetParseError) as caught:
            parse_ipv4(host)
        assert (caught.value.reason, str(caught.value)) == ("invalid_host", expected)
    else:
        assert parse_ipv4(host) == expected


@pytest.mark.parametrize(("text", "expected"), COMMAND_TEXT)
def test_command_targets(text: str, expected: list[str]) -> None:
    assert extract_targets(text) == expected


@pytest.mark.parametrize(("args", "expected"), ARGS)
def test_targets_by_kind_of_value(args: object, expected: list[str]) -> None:
    assert extract_targets(args) == expected


def test_nesting_deeper_than_the_walk_is_not_read() -> None:
    shallow: object = "http://deep.example"
    for _ in range(47):
        shallow = [shallow]
    assert extract_targets(shallow) == ["http://deep.example"]
    assert extract_targets([[shallow]]) == []


@pytest.mark.parametrize(("target", "shown"), SHOWN)
def test_display_target(target: str, shown: str) -> None:
    assert display_target(target) == shown
