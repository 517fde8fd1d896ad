"""Network commands in shell text: which operands of ``curl``, ``wget``, ``nc``, ... are targets.

:func:`command_operands` reads the tokens of one shell line and yields the operands of
every network command found in command position (at the start, after ``;``, ``&&``,
``|``, ``(`` and after prefixes such as ``sudo``, ``env VAR=x``, ``timeout 10``), skipping
the values of options that are not targets (``curl -o FILE``) and keeping those that are
(``curl -x PROXY``, ``--resolve host:port:ADDRESS``). Fails closed: a word it cannot place
is kept as a target, so the policy judges it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

__all__ = ["command_operands"]


class _Family(msgspec.Struct, frozen=True):
    """How a family of network commands takes its operands."""

    value_options: frozenset[str]
    """Options whose value is not a target (``-o FILE``); short ones without the dash."""
    target_options: frozenset[str]
    """Options whose value is a target (``-x PROXY``, ``--url URL``)."""
    all_operands: bool
    """Every operand is a target (``curl a b``); else only the first (``nc HOST PORT``)."""
    scheme: str | None = None
    """Scheme to put in front of a ``user@host`` operand (``ssh``)."""
    skip_method: bool = False
    """A leading upper-case HTTP method operand is not a target (httpie)."""


def _opts(text: str) -> frozenset[str]:
    return frozenset(text.split())


_CURL = _Family(
    _opts(
        "o H d X u A e b c F T w m r K E C Y y z D P t U Q --output --header --data --data-raw"
        " --data-binary --data-urlencode --data-ascii --json --request --user --user-agent"
        " --referer --cookie --cookie-jar --form --form-string --upload-file --write-out"
        " --max-time --connect-timeout --range --config --cert --key --cacert --capath"
        " --continue-at --retry --retry-delay --retry-max-time --max-redirs --limit-rate"
        " --output-dir --dump-header --proxy-user --interface --noproxy --dns-servers --trace"
        " --trace-ascii --stderr --time-cond --speed-limit --speed-time --max-filesize"
        " --netrc-file --oauth2-bearer --pinnedpubkey --cert-type --key-type --pass --ciphers"
        " --local-port --unix-socket --abstract-unix-socket --variable --url-query --aws-sigv4"
        " --mail-from --mail-rcpt --quote --expect100-timeout --tls-max"
    ),
    _opts(
        "x --proxy --preproxy --url --socks4 --socks4a --socks5 --socks5-hostname --resolve"
        " --connect-to"
    ),
    all_operands=True,
)
_WGET = _Family(
    _opts(
        "O o a P U e i t T w Q l A R D I X --output-document --output-file --append-output"
        " --directory-prefix --user-agent --execute --input-file --tries --timeout --wait"
        " --quota --level --accept --reject --domains --header --post-data --post-file"
        " --method --body-data --body-file --user --password --http-user --http-password"
        " --bind-address --load-cookies --save-cookies --referer --ca-certificate"
        " --certificate --private-key --dns-timeout --connect-timeout --read-timeout"
        " --limit-rate --include-directories --exclude-directories --exclude-domains"
        " --proxy-user --proxy-password --default-page --progress --secure-protocol"
    ),
    _opts("B --base"),
    all_operands=True,
)
_HTTPIE = _Family(
    _opts("a A o --auth --auth-type --output --session --session-read-only --verify --cert"),
    _opts("--proxy"),
    all_operands=False,
    skip_method=True,
)
_SSH = _Family(
    _opts("b c D E e F I i L l m O o p Q R S W w B"),
    _opts("J"),
    all_operands=False,
    scheme="ssh",
)
_NETCAT = _Family(_opts("p s w i q e c o O I T V X"), _opts("x"), all_operands=False)
_PLAIN = _Family(_opts("c i I s t w W m p Q"), frozenset(), all_operands=False)
_FTP = _Family(frozenset(), frozenset(), all_operands=False, scheme="ftp")

_FAMILIES: dict[str, _Family] = {
    "curl": _CURL,
    "wget": _WGET,
    "aria2c": _Family(frozenset(), frozenset(), all_operands=True),
    "lynx": _Family(frozenset(), frozenset(), all_operands=True),
    "w3m": _Family(frozenset(), frozenset(), all_operands=True),
    "http": _HTTPIE,
    "https": _HTTPIE,
    "xh": _HTTPIE,
    "xhs": _HTTPIE,
    "ssh": _SSH,
    "sftp": _SSH,
    "mosh": _SSH,
    "nc": _NETCAT,
    "ncat": _NETCAT,
    "netcat": _NETCAT,
    "telnet": _PLAIN,
    "ping": _PLAIN,
    "ping6": _PLAIN,
    "traceroute": _PLAIN,
    "ftp": _FTP,
}
"""Network commands whose operands are targets."""

_PREFIXES = _opts(
    "sudo doas env exec nohup time nice command builtin xargs then do else ! { stdbuf"
    " timeout watch strace proxychains proxychains4 torsocks busybox"
)
"""Words after which the next word is still in command position."""

_SEPARATOR = re.compile(r"[;&|()<>]+")
_PREFIX_ARGUMENT = re.compile(r"-.*|[A-Za-z_][A-Za-z0-9_]*=.*|[0-9.]+[smhd]?")
_METHOD = re.compile(r"[A-Z]+")


def command_operands(tokens: list[str]) -> Iterator[str]:
    """Yield the target operands of the network commands in one line's ``tokens``."""
    at_command = True
    after_prefix = False
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if _SEPARATOR.fullmatch(token):
            at_command, after_prefix = True, False
            continue
        if not at_command:
            continue
        name = token.rsplit("/", 1)[-1]
        if name in _PREFIXES:
            after_prefix = True
            continue
        if after_prefix and _PREFIX_ARGUMENT.fullmatch(token):
            continue
        at_command = after_prefix = False
        family = _FAMILIES.get(name)
        if family is not None:
            operands, index = _operands(family, tokens, index)
            yield from operands


def _operands(family: _Family, tokens: list[str], index: int) -> tuple[list[str], int]:
    """Collect one command's targets from ``tokens[index:]``; return them and the end."""
    targets: list[str] = []
    positional = 0
    while index < len(tokens) and not _SEPARATOR.fullmatch(tokens[index]):
        token = tokens[index]
        index += 1
        if token.startswith("-") and len(token) > 1:
            option, value, index = _option(family, tokens, token, index)
            if value is not None and option in family.target_options:
                targets.append(value.split(":", 2)[-1] if option in _REMAPS else value)
            continue
        if family.skip_method and positional == 0 and _METHOD.fullmatch(token):
            continue
        if family.all_operands or positional == 0:
            if family.scheme is not None and "@" in token and "://" not in token:
                token = f"{family.scheme}://{token}"
            targets.append(token)
        positional += 1
    return targets, index


_REMAPS = frozenset({"--resolve", "--connect-to"})
"""Options whose value is ``host:port:address``; the address part is the target."""


def _option(
    family: _Family, tokens: list[str], token: str, index: int
) -> tuple[str, str | None, int]:
    """Read one option; return its name, its value (if it takes one) and the next index."""
    takes = family.value_options | family.target_options
    if token.startswith("--"):
        name, equals, value = token.partition("=")
        if equals:
            return name, value, index
        if name in takes and index < len(tokens):
            return name, tokens[index], index + 1
        return name, None, index
    for position, letter in enumerate(token[1:], start=1):
        if letter in takes:
            attached = token[position + 1 :]
            if attached:
                return letter, attached, index
            if index < len(tokens):
                return letter, tokens[index], index + 1
            return letter, None, index
    return token, None, index
