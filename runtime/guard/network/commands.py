"""Network commands in shell text: which operands of ``curl``, ``wget``, ``nc``, ... are targets.

:func:`command_operands` reads the tokens of one shell line and yields the operands of
every network command found in command position (at the start, after ``;``, ``&&``,
``|``, ``(`` and after prefixes such as ``sudo``, ``env VAR=x``, ``timeout 10``), skipping
the values of options that are not targets (``curl -o FILE``) and keeping those that are
(``curl -x PROXY``, ``--resolve host:port:ADDRESS``). Fails closed: a word it cannot place
is kept as a target, so the policy judges it.

Commands that speak one protocol get its scheme (``ssh host`` is ``ssh://host``, ``ftp
host`` is ``ftp://host``), so ``network_allowed_schemes`` applies to them. Copy commands
(``scp``, ``rsync``) and ``git`` name a remote as ``[user@]host:path`` (a colon before any
slash); only such operands are targets there, local paths and remote names (``origin``)
are not.
"""

from __future__ import annotations

import functools
import ipaddress
import itertools
import re
from collections.abc import Callable, Iterator

import msgspec

__all__ = ["command_operands"]


def _as_given(token: str) -> str:
    return token


class _Family(msgspec.Struct, frozen=True):
    """How a family of network commands takes its operands."""

    value_options: frozenset[str]
    """Options whose value is not a target (``-o FILE``); short ones without the dash."""
    target_options: frozenset[str]
    """Options whose value is a target (``-x PROXY``, ``--url URL``)."""
    all_operands: bool
    """Every operand is a target (``curl a b``); else only the first (``nc HOST PORT``)."""
    skip_method: bool = False
    """A leading upper-case HTTP method operand is not a target (httpie)."""
    operand: Callable[[str], str | None] = _as_given
    """An operand as a target: as given, with the one scheme the command speaks (``ssh``:
    ``user@host`` → ``ssh://user@host``), or only a ``[user@]host:path`` remote (``scp``,
    ``rsync``: ``None`` for a local path)."""
    option_value: Callable[[str], str] = _as_given
    """A target option's value as a target (``ssh -J``: with the ``ssh`` scheme)."""


def _ssh_url(token: str) -> str:
    return _with_scheme("ssh", token)


def _ftp_url(token: str) -> str:
    return _with_scheme("ftp", token)


def _ssh_remote(token: str) -> str | None:
    return _remote("ssh", token)


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
    _opts("b c D E e F I i L l m O o P p Q R S W w B"),
    _opts("J"),
    all_operands=False,
    operand=_ssh_url,
    option_value=_ssh_url,
)
_SFTP = _Family(
    _opts("B b c D F i l o P R S s"),
    _opts("J"),
    all_operands=False,
    operand=_ssh_url,
    option_value=_ssh_url,
)
_NETCAT = _Family(_opts("p s w i q e c o O I T V X"), _opts("x"), all_operands=False)
_PLAIN = _Family(_opts("c i I s t w W m p Q"), frozenset(), all_operands=False)
_FTP = _Family(frozenset(), frozenset(), all_operands=False, operand=_ftp_url)
_SCP = _Family(
    _opts("c D F i l o P S X"),
    _opts("J"),
    all_operands=True,
    operand=_ssh_remote,
    option_value=_ssh_url,
)
_RSYNC = _Family(
    _opts(
        "e B f M T --rsh --rsync-path --exclude --include --exclude-from --include-from"
        " --files-from --filter --log-file --temp-dir --compare-dest --copy-dest --link-dest"
        " --backup-dir --suffix --chmod --chown --port --password-file --partial-dir --timeout"
        " --bwlimit --max-size --min-size --out-format --block-size --skip-compress"
    ),
    frozenset(),
    all_operands=True,
    operand=_ssh_remote,
    option_value=_ssh_url,
)

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
    "sftp": _SFTP,
    "mosh": _SSH,
    "nc": _NETCAT,
    "ncat": _NETCAT,
    "netcat": _NETCAT,
    "telnet": _PLAIN,
    "ping": _PLAIN,
    "ping6": _PLAIN,
    "traceroute": _PLAIN,
    "ftp": _FTP,
    "scp": _SCP,
    "rsync": _RSYNC,
}
"""Network commands whose operands are targets."""

_GIT_OPTIONS = _opts("-C -c --git-dir --work-tree --namespace --exec-path --config-env")
"""``git`` options before the subcommand that take a separate value."""
_GIT_VALUES = _opts(
    "-c -o -b -u -j -s -X --origin --branch --upload-pack --receive-pack --exec --depth --deepen"
    " --shallow-since --shallow-exclude --reference --reference-if-able --separate-git-dir"
    " --template --config --filter --jobs --negotiation-tip --refmap --strategy"
    " --strategy-option --server-option --push-option --sort --name --bundle-uri"
)
"""Options of ``git`` subcommands that take a separate value that is no remote."""
_GIT_REMOTE_OPTIONS = _opts("--repo --remote")
"""Options of ``git`` subcommands whose value is a remote (``push --repo``, ``archive``)."""
_GIT_FIRST = frozenset({"fetch", "pull", "push", "ls-remote", "archive"})
"""``git`` subcommands whose first operand is a remote (later ones are refspecs)."""

_PREFIXES = _opts(
    "sudo doas env exec nohup time nice command builtin xargs then do else ! { stdbuf"
    " timeout watch strace proxychains proxychains4 torsocks busybox"
)
"""Words after which the next word is still in command position."""

_SEPARATOR = re.compile(r"[;&|()<>]+")
_PREFIX_ARGUMENT = re.compile(r"-.*|[A-Za-z_][A-Za-z0-9_]*=.*|[0-9.]+[smhd]?")
_METHOD = re.compile(r"[A-Z]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_REMOTE = re.compile(r"([^:/\[]*\[[^\]/]*\]|[^:/\[]+):(.*)", re.S)
"""``host:path`` with no slash before the colon that ends the host; a ``[`` before that
colon opens a bracketed host (IPv6), which its first ``]`` and a colon must end."""


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
        if _ASSIGNMENT.match(token):  # `VAR=x curl HOST`: still in command position
            continue
        name = token.rsplit("/", 1)[-1]
        if name in _PREFIXES:
            after_prefix = True
            continue
        if after_prefix and _PREFIX_ARGUMENT.fullmatch(token):
            continue
        at_command = after_prefix = False
        reader = _READERS.get(name)
        if reader is not None:
            operands, index = reader(tokens, index)
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
                value = value.split(":", 2)[-1] if option in _REMAPS else value
                targets.append(family.option_value(value))
            continue
        if family.skip_method and positional == 0 and _METHOD.fullmatch(token):
            continue
        if family.all_operands or positional == 0:
            target = family.operand(token)
            if target is not None:
                targets.append(target)
        positional += 1
    return targets, index


def _git_operands(tokens: list[str], index: int) -> tuple[list[str], int]:
    """The remotes of one ``git`` command (``clone``, ``fetch``, ``remote add`` ...)."""
    words: list[str] = []
    remotes: list[str] = []
    subcommand: str | None = None
    while index < len(tokens) and not _SEPARATOR.fullmatch(tokens[index]):
        token = tokens[index]
        index += 1
        if token.startswith("-") and len(token) > 1:
            name, equals, value = token.partition("=")
            takes = _GIT_OPTIONS if subcommand is None else _GIT_VALUES | _GIT_REMOTE_OPTIONS
            if not equals and name in takes and index < len(tokens):
                value, index = tokens[index], index + 1
            if subcommand is not None and name in _GIT_REMOTE_OPTIONS and value:
                remotes.append(value)
            continue
        if subcommand is None:
            subcommand = token
        else:
            words.append(token)
    remotes += _GIT_REMOTE_WORDS.get(subcommand, _no_words)(words)
    found = [_remote("ssh", word) for word in remotes]
    return [target for target in found if target is not None], index


def _no_words(words: list[str]) -> list[str]:
    return []


def _remote_add_url(words: list[str]) -> list[str]:
    """``git remote add|set-url NAME URL``: the words after the name (no remote by itself)."""
    if words[:1] in (["add"], ["set-url"]):
        return words[2:]
    return []


def _submodule_add_url(words: list[str]) -> list[str]:
    """``git submodule add URL [PATH]``: the URL."""
    if words[:1] == ["add"]:
        return words[1:2]
    return []


def _config_urls(words: list[str]) -> list[str]:
    """``git config remote.origin.url URL``: the values of URL keys."""
    return [value for key, value in itertools.pairwise(words) if _is_url_key(key)]


_GIT_REMOTE_WORDS: dict[str | None, Callable[[list[str]], list[str]]] = {
    "clone": lambda words: words,
    **dict.fromkeys(_GIT_FIRST, lambda words: words[:1]),
    "remote": _remote_add_url,
    "submodule": _submodule_add_url,
    "config": _config_urls,
}
"""The words of each ``git`` subcommand that name remotes (``clone``: all, ``fetch``: the first)."""


def _is_url_key(key: str) -> bool:
    """A ``git config`` key that holds a remote's URL (``remote.origin.url``)."""
    return key.lower().endswith((".url", ".pushurl"))


def _with_scheme(scheme: str, token: str) -> str:
    """``token`` as a ``scheme`` URL: ``[user@]host[:rest]`` → ``scheme://[user@]host/rest``."""
    if "://" in token:
        return token
    user, at, host = token.rpartition("@")
    if _is_ipv6(host):  # ssh takes a bare IPv6 address
        return f"{scheme}://{user}{at}[{host}]"
    return _remote(scheme, token) or f"{scheme}://{token}"


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text.partition("%")[0])
    except ValueError:
        return False
    return True


def _remote(scheme: str, token: str) -> str | None:
    """A ``[user@]host:path`` remote as a URL (``host::module`` is rsync's); else None.

    As ``scp`` and ``git`` read it: a remote has a colon before any slash (an IPv6 host
    in brackets); ``./a:b`` and ``/srv/a:b`` are local paths. A token with ``://`` is a
    URL already.
    """
    if "://" in token:
        return token
    remote = _REMOTE.match(token)
    if remote is None:
        return None
    host, path = remote.groups()
    if path.startswith(":"):  # rsync daemon: host::module
        return f"rsync://{host}/{path[1:].lstrip('/')}"
    return f"{scheme}://{host}/{path.lstrip('/')}" if path else f"{scheme}://{host}"


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


_READERS: dict[str, Callable[[list[str], int], tuple[list[str], int]]] = {
    name: functools.partial(_operands, family) for name, family in _FAMILIES.items()
} | {"git": _git_operands}
"""How each network command's targets are read from the tokens after its name."""
