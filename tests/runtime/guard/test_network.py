"""Tests for the network egress policy: parsing, judging, extraction and resolution."""

from __future__ import annotations

import ipaddress
import json
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from events.catalog import SecurityNetworkDenied
from runtime.errors import ToolError
from runtime.guard.network.egress import (
    NetworkDeniedError,
    NetworkPolicy,
    TargetDecision,
    check_args,
    denial_error,
    extract_targets,
    first_denial,
    judge_target,
    normalize_allowlist_entry,
    resolve_and_check,
    signal_for,
)
from runtime.guard.network.targets import TargetParseError, parse_ipv4, parse_target

ALLOW: dict[str, Any] = {"network_egress_policy": "allow"}
DENY: dict[str, Any] = {"network_egress_policy": "deny"}
EXAMPLE: dict[str, Any] = {"network_allowlist": ["example.com"]}
OK = None
DENIED = "network_denied"
ENDPOINT = "network_endpoint_denied"
PROTOCOL = "network_protocol_denied"


def allow_with(*entries: str) -> dict[str, Any]:
    return {"network_egress_policy": "allow", "network_allowlist": list(entries)}


def deny_with(*entries: str, schemes: list[str] | None = None) -> dict[str, Any]:
    options: dict[str, Any] = {"network_egress_policy": "deny", "network_allowlist": list(entries)}
    if schemes is not None:
        options["network_allowed_schemes"] = schemes
    return options


CASES: list[tuple[str, dict[str, Any], str | None, str | None]] = [
    # allowlist suffix matching, case, trailing dots
    ("https://api.example.com/v1", EXAMPLE, OK, None),
    ("https://example.com", EXAMPLE, OK, None),
    ("https://deep.api.example.com:8443/x?y=1", EXAMPLE, OK, None),
    ("https://badexample.com", EXAMPLE, DENIED, "not_allowlisted"),
    ("https://example.com.evil.net/", EXAMPLE, DENIED, "not_allowlisted"),
    ("https://com/", EXAMPLE, DENIED, "not_allowlisted"),
    ("https://EXAMPLE.COM./x", EXAMPLE, OK, None),
    ("HTTPS://Api.Example.Com", EXAMPLE, OK, None),
    ("https://example.com../", EXAMPLE, DENIED, "invalid_host"),
    ("api.example.com:443", EXAMPLE, OK, None),
    ("evil.example:443", EXAMPLE, DENIED, "not_allowlisted"),
    ("//evil.example/x", EXAMPLE, DENIED, "not_allowlisted"),
    ("https://example.com", DENY, DENIED, "not_allowlisted"),
    ("https://example.com", {}, DENIED, "not_allowlisted"),
    ("https://anything.example.org", ALLOW, OK, None),
    # egress allow with an allowlist: only the allowlist passes
    ("https://api.example.com/x", allow_with("example.com"), OK, None),
    ("https://evil.example/x", allow_with("example.com"), DENIED, "not_allowlisted"),
    ("https://example.com.evil.net/", allow_with("example.com"), DENIED, "not_allowlisted"),
    ("http://8.8.8.8/", allow_with("example.com"), DENIED, "not_allowlisted"),
    ("http://8.8.8.8/", allow_with("8.8.0.0/16"), OK, None),
    ("https://anything.example.org", allow_with("127.0.0.1"), DENIED, "not_allowlisted"),
    ("ftp://example.com/x", allow_with("example.com"), PROTOCOL, "scheme_not_allowed"),
    ("ssh://example.com", ALLOW, PROTOCOL, "scheme_not_allowed"),
    ("https://api.example.com", deny_with("*.example.com"), OK, None),
    ("https://example.com", deny_with(".example.com"), OK, None),
    # userinfo, fragment and backslash tricks
    ("http://example.com@evil.example/", EXAMPLE, DENIED, "not_allowlisted"),
    ("http://example.com:pw@evil.example/", EXAMPLE, DENIED, "not_allowlisted"),
    ("http://a@example.com@evil.example/", EXAMPLE, DENIED, "not_allowlisted"),
    ("http://evil.example#@example.com", EXAMPLE, DENIED, "not_allowlisted"),
    ("http://evil.example?@example.com", EXAMPLE, DENIED, "not_allowlisted"),
    ("http://example.com\\@evil.example/", EXAMPLE, DENIED, "invalid_host"),
    ("http:\\\\evil.example\\x", EXAMPLE, DENIED, "invalid_host"),
    ("http:evil.example", EXAMPLE, DENIED, "not_allowlisted"),
    ("http:///evil.example/", EXAMPLE, DENIED, "not_allowlisted"),
    ("http://ex\tample.com/", EXAMPLE, DENIED, "invalid_host"),
    ("http://exa mple.com/", EXAMPLE, DENIED, "invalid_host"),
    ("http://-bad-.example.com/", EXAMPLE, DENIED, "invalid_host"),
    ("http://example.com:99999/", EXAMPLE, DENIED, "invalid_port"),
    ("http://example.com:8o/", EXAMPLE, DENIED, "invalid_port"),
    # schemes
    ("ftp://example.com/file", EXAMPLE, PROTOCOL, "scheme_not_allowed"),
    ("file:///etc/passwd", ALLOW, PROTOCOL, "scheme_not_allowed"),
    ("gopher://example.com:70/", EXAMPLE, PROTOCOL, "scheme_not_allowed"),
    ("FTP://example.com/", deny_with("example.com", schemes=["ftp"]), OK, None),
    ("https://example.com/", deny_with("example.com", schemes=["ftp"]), PROTOCOL, None),
    # IDNA
    ("bücher.example", deny_with("xn--bcher-kva.example"), OK, None),
    ("xn--bcher-kva.example", deny_with("bücher.example"), OK, None),
    ("https://BÜCHER.example/", deny_with("xn--bcher-kva.example"), OK, None),
    ("https://shop.bücher.example./", deny_with("bücher.example"), OK, None),
    ("https://buecher.example/", deny_with("bücher.example"), DENIED, "not_allowlisted"),
    ("https://\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com/", EXAMPLE, OK, None),
    ("https://example\u3002com/", EXAMPLE, OK, None),
    # loopback in every spelling (egress allow: still refused)
    ("http://127.0.0.1/", ALLOW, ENDPOINT, "loopback"),
    ("127.1", ALLOW, ENDPOINT, "loopback"),
    ("http://2130706433/", ALLOW, ENDPOINT, "loopback"),
    ("http://0x7f.0.0.1/", ALLOW, ENDPOINT, "loopback"),
    ("http://0x7f000001/", ALLOW, ENDPOINT, "loopback"),
    ("http://0177.0.0.1/", ALLOW, ENDPOINT, "loopback"),
    ("http://017700000001/", ALLOW, ENDPOINT, "loopback"),
    ("http://127.000.000.001/", ALLOW, ENDPOINT, "loopback"),
    ("http://127.0.1/", ALLOW, ENDPOINT, "loopback"),
    ("http://127.0.0.%31/", ALLOW, ENDPOINT, "loopback"),
    ("http://\uff11\uff12\uff17.\uff10.\uff10.\uff11/", ALLOW, ENDPOINT, "loopback"),
    ("http://[::1]:8080/", ALLOW, ENDPOINT, "loopback"),
    ("[::1]", ALLOW, ENDPOINT, "loopback"),
    ("::1", ALLOW, ENDPOINT, "loopback"),
    ("http://[::ffff:127.0.0.1]/", ALLOW, ENDPOINT, "loopback"),
    ("http://[0:0:0:0:0:ffff:7f00:1]/", ALLOW, ENDPOINT, "loopback"),
    ("http://[::ffff:7f00:1]/", ALLOW, ENDPOINT, "loopback"),
    ("http://[64:ff9b::7f00:1]/", ALLOW, ENDPOINT, "loopback"),
    ("http://[2002:7f00:1::]/", ALLOW, ENDPOINT, "loopback"),
    ("http://localhost:8080/", ALLOW, ENDPOINT, "localhost"),
    ("http://LOCALHOST./", ALLOW, ENDPOINT, "localhost"),
    ("http://api.localhost/", ALLOW, ENDPOINT, "localhost"),
    # unspecified, link-local, private, multicast, reserved
    ("http://0.0.0.0/", ALLOW, ENDPOINT, "unspecified"),
    ("http://0/", ALLOW, ENDPOINT, "unspecified"),
    ("http://[::]/", ALLOW, ENDPOINT, "unspecified"),
    ("http://169.254.169.254/latest/meta-data/", ALLOW, ENDPOINT, "link_local"),
    ("http://[fe80::1%25eth0]/", ALLOW, ENDPOINT, "link_local"),
    ("http://metadata.google.internal/", ALLOW, ENDPOINT, "metadata"),
    ("http://10.1.2.3/", ALLOW, ENDPOINT, "private"),
    ("http://012.1.2.3/", ALLOW, ENDPOINT, "private"),
    ("http://172.16.0.1/", ALLOW, ENDPOINT, "private"),
    ("http://172.31.255.255/", ALLOW, ENDPOINT, "private"),
    ("http://172.32.0.1/", ALLOW, OK, None),
    ("http://192.168.1.1/", ALLOW, ENDPOINT, "private"),
    ("http://100.64.0.1/", ALLOW, ENDPOINT, "private"),
    ("http://[fc00::1]/", ALLOW, ENDPOINT, "private"),
    ("http://[fd12:3456::1]/", ALLOW, ENDPOINT, "private"),
    ("http://[::ffff:10.0.0.1]/", ALLOW, ENDPOINT, "private"),
    ("http://224.0.0.1/", ALLOW, ENDPOINT, "multicast"),
    ("http://[ff02::1]/", ALLOW, ENDPOINT, "multicast"),
    ("http://255.255.255.255/", ALLOW, ENDPOINT, "reserved"),
    ("http://240.0.0.1/", ALLOW, ENDPOINT, "reserved"),
    ("http://[2001:db8::1]/", ALLOW, ENDPOINT, "reserved"),
    ("http://8.8.8.8/", ALLOW, OK, None),
    ("http://[2606:4700:4700::1111]/", ALLOW, OK, None),
    ("http://8.8.8.8/", DENY, DENIED, "not_allowlisted"),
    ("http://0x08080808/", deny_with("8.8.8.8"), OK, None),
    # special endpoints named exactly by the allowlist
    ("http://127.0.0.1:8080/", deny_with("127.0.0.1"), OK, None),
    ("http://127.1/", allow_with("127.0.0.1"), OK, None),
    ("http://[::ffff:127.0.0.1]/", allow_with("127.0.0.1"), OK, None),
    ("http://127.0.0.2/", allow_with("127.0.0.1"), ENDPOINT, "loopback"),
    ("http://[::1]/", allow_with("[::1]"), OK, None),
    ("http://10.0.0.5/", deny_with("10.0.0.5"), OK, None),
    ("http://10.0.0.77/", deny_with("10.0.0.0/24"), OK, None),
    ("http://10.0.1.77/", deny_with("10.0.0.0/24"), ENDPOINT, "private"),
    ("http://localhost/", allow_with("localhost"), OK, None),
    ("http://api.localhost/", allow_with("localhost"), ENDPOINT, "localhost"),
    ("http://127.0.0.1/", allow_with("localhost"), ENDPOINT, "loopback"),
    # numbers that are no address
    ("http://256.1.1.1/", ALLOW, DENIED, "invalid_host"),
    ("http://1.2.3.4.5/", ALLOW, DENIED, "invalid_host"),
    ("http://08.0.0.1/", ALLOW, DENIED, "invalid_host"),
    ("http://4294967296/", ALLOW, DENIED, "invalid_host"),
    ("http://example.123/", ALLOW, DENIED, "invalid_host"),
    ("http://[::1/", ALLOW, DENIED, "invalid_host"),
    ("http://[::1]x/", ALLOW, DENIED, "invalid_host"),
    ("http:///", ALLOW, DENIED, "invalid_host"),
]


@pytest.mark.parametrize(("target", "options", "code", "reason"), CASES)
def test_each_target_gets_its_exact_verdict(
    target: str, options: dict[str, Any], code: str | None, reason: str | None
) -> None:
    decision = judge_target(NetworkPolicy.from_options(options), target)
    assert (decision.allowed, decision.code) == (code is None, code)
    if reason is not None or code is None:
        assert decision.reason == reason


def test_the_table_has_at_least_forty_cases_of_each_kind_in_total() -> None:
    codes = {code for _, _, code, _ in CASES}
    assert len(CASES) >= 40
    assert codes == {OK, DENIED, ENDPOINT, PROTOCOL}


def test_userinfo_is_not_mistaken_for_the_host() -> None:
    decision = judge_target(NetworkPolicy.from_options(EXAMPLE), "http://example.com@evil.example/")
    assert (decision.host, decision.port, decision.scheme) == ("evil.example", 80, "http")


def test_a_bare_host_with_a_port_keeps_its_port_and_has_no_scheme() -> None:
    decision = judge_target(NetworkPolicy.from_options(EXAMPLE), "api.example.com:8443")
    assert (decision.host, decision.port, decision.scheme) == ("api.example.com", 8443, None)


def test_parse_target_splits_scheme_host_port_and_path() -> None:
    parsed = parse_target("HTTPS://user:pw@Bücher.Example.:8443/a/b?q=1#frag")
    assert parsed.scheme == "https"
    assert parsed.userinfo == "user:pw"
    assert (parsed.host, parsed.is_ip) == ("xn--bcher-kva.example", False)
    assert (parsed.port, parsed.explicit_port) == (8443, True)
    assert parsed.path == "/a/b?q=1"


def test_parse_ipv4_refuses_a_bad_octal_part() -> None:
    with pytest.raises(TargetParseError, match=r"bad octal part") as info:
        parse_ipv4("09.1.1.1")
    assert info.value.reason == "invalid_host"


def test_parse_ipv4_returns_none_for_a_name() -> None:
    assert parse_ipv4("1.2.3.example") is None


def _spell(number: int, parts: int, radixes: list[str]) -> str:
    """Write ``number`` the inet_aton way in ``parts`` parts with the given radixes."""
    values = [(number >> 24) & 0xFF, (number >> 16) & 0xFF, (number >> 8) & 0xFF, number & 0xFF]
    head, last = values[: parts - 1], number & ((1 << (8 * (5 - parts))) - 1)
    rendered = []
    for value, radix in zip([*head, last], radixes, strict=False):
        if radix == "hex":
            rendered.append(hex(value))
        elif radix == "oct" and value:
            rendered.append("0" + format(value, "o"))
        else:
            rendered.append(str(value))
    return ".".join(rendered)


@settings(max_examples=150, deadline=None)
@given(
    number=st.integers(min_value=0, max_value=2**32 - 1),
    parts=st.integers(min_value=1, max_value=4),
    radixes=st.lists(st.sampled_from(["dec", "hex", "oct"]), min_size=4, max_size=4),
)
def test_every_inet_aton_spelling_parses_to_the_same_address(
    number: int, parts: int, radixes: list[str]
) -> None:
    assert parse_ipv4(_spell(number, parts, radixes)) == number


@settings(max_examples=100, deadline=None)
@given(
    low=st.integers(min_value=0, max_value=2**24 - 1),
    parts=st.integers(min_value=1, max_value=4),
    radixes=st.lists(st.sampled_from(["dec", "hex", "oct"]), min_size=4, max_size=4),
)
def test_every_spelling_of_a_loopback_address_is_refused_under_egress_allow(
    low: int, parts: int, radixes: list[str]
) -> None:
    target = f"http://{_spell((127 << 24) | low, parts, radixes)}/"
    decision = judge_target(NetworkPolicy.from_options(ALLOW), target)
    assert (decision.code, decision.reason) == (ENDPOINT, "loopback")


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=80))
def test_judging_any_text_returns_a_decision_with_a_known_code(text: str) -> None:
    decision = judge_target(NetworkPolicy.from_options(ALLOW), text)
    assert decision.code in {None, DENIED, ENDPOINT, PROTOCOL}
    assert decision.allowed is (decision.code is None)


# --- policy options ---------------------------------------------------------------------


def test_policy_from_options_normalizes_entries_and_schemes() -> None:
    policy = NetworkPolicy.from_options(
        {
            "network_egress_policy": "allow",
            "network_allowlist": ["Bücher.Example.", "*.Corp.Example", "0x7f.1", "10.0.0.0/8"],
            "network_allowed_schemes": ["HTTPS", "http", "https"],
        }
    )
    assert policy.egress == "allow"
    assert policy.names == frozenset({"xn--bcher-kva.example"})
    assert policy.domains == frozenset({"corp.example"})
    assert policy.addresses == frozenset({"127.0.0.1"})
    assert policy.networks == ("10.0.0.0/8",)
    assert policy.allowed_schemes == ("http", "https")


def test_policy_defaults_are_deny_with_http_and_https() -> None:
    policy = NetworkPolicy.from_options({})
    assert (policy.egress, policy.allowed_schemes, policy.names) == (
        "deny",
        ("http", "https"),
        frozenset(),
    )


def test_under_egress_allow_an_allowlist_of_only_malformed_entries_allows_nothing() -> None:
    policy = NetworkPolicy.from_options(allow_with("exa mple.com", "a\\b"))
    assert (policy.restricted, policy.names) == (True, frozenset())
    decision = judge_target(policy, "https://public.example/")
    assert (decision.code, decision.reason) == (DENIED, "not_allowlisted")


def test_under_egress_allow_an_empty_allowlist_restricts_nothing() -> None:
    assert NetworkPolicy.from_options(allow_with()).restricted is False
    assert judge_target(NetworkPolicy.from_options(allow_with()), "https://any.example").allowed


def test_an_unknown_egress_value_fails_closed_to_deny() -> None:
    assert NetworkPolicy.from_options({"network_egress_policy": "yes"}).egress == "deny"


def test_malformed_allowlist_entries_are_ignored_not_widened() -> None:
    policy = NetworkPolicy.from_options({"network_allowlist": ["exa mple.com", 7, "ok.example"]})
    assert policy.names == frozenset({"ok.example"})


def test_normalize_allowlist_entry_refuses_a_non_host() -> None:
    with pytest.raises(ValueError, match=r"^network_allowlist entry 'a\\\\b':"):
        normalize_allowlist_entry("a\\b")


def test_normalize_allowlist_entry_drops_scheme_and_port() -> None:
    assert normalize_allowlist_entry("https://API.example.com:8443/x") == "api.example.com"


# --- extraction ---------------------------------------------------------------------------


def test_targets_are_found_under_url_keys_at_any_depth_case_insensitively() -> None:
    args = {
        "a": [{"b": {"URL": "https://one.example/x"}}],
        "Endpoint": "two.example",
        "config": {"baseUrl": "https://three.example", "callback_url": "four.example:8080"},
        "server": {"Address": "10.0.0.1"},
        "host": 2130706433,
    }
    assert extract_targets(args) == [
        "https://one.example/x",
        "two.example",
        "https://three.example",
        "four.example:8080",
        "10.0.0.1",
        "2130706433",
    ]


def test_keys_that_merely_end_in_host_letters_are_not_target_keys() -> None:
    assert extract_targets({"ghost": "boo", "posturi": "x", "name": "example"}) == []


def test_targets_are_found_inside_json_encoded_strings_even_twice_encoded() -> None:
    inner = json.dumps({"endpoint": "inner.example"})
    args = {"payload": json.dumps({"wrapper": [{"data": inner}], "uri": "https://outer.example"})}
    assert extract_targets(args) == ["inner.example", "https://outer.example"]


def test_targets_in_opaque_text_are_found_in_order_and_deduplicated() -> None:
    text = (
        "curl -sSL -o out.txt -H 'Accept: x' https://a.example/p && wget http://b.example;"
        " host=evil.example:443; git clone git@github.com:org/repo.git; echo ftp://c.example/f;"
        " connect 192.168.0.10:5432 then https://a.example/p"
    )
    assert extract_targets({"command": text}) == [
        "https://a.example/p",
        "http://b.example",
        "evil.example:443",
        "ssh://git@github.com/org/repo.git",
        "ftp://c.example/f",
        "192.168.0.10:5432",
    ]


def test_operands_of_network_commands_are_targets_even_without_a_scheme() -> None:
    text = "\n".join(
        [
            "curl 0x7f000001",
            "sudo timeout 5 wget -O page.html intranet",
            "nc -w 3 10.0.0.7 6379",
            "ssh -p 2222 deploy@build.example",
            "http POST api.example/x a=1",
            "curl -x proxy.example:3128 --resolve a.example:443:127.0.0.1 -d x=1 a.example",
            "cat /dev/tcp/10.1.1.1/80",
            "wget --tries 3 \\",
            "  10.9.9.9",
        ]
    )
    assert extract_targets(text) == [
        "0x7f000001",
        "intranet",
        "10.0.0.7",
        "ssh://deploy@build.example",
        "api.example/x",
        "proxy.example:3128",
        "127.0.0.1",
        "a.example",
        "10.1.1.1:80",
        "10.9.9.9",
    ]


REMOTE_COMMANDS: list[tuple[str, list[str]]] = [
    # one-protocol commands carry their scheme, so network_allowed_schemes applies
    ("ssh build.example", ["ssh://build.example"]),
    (
        "ssh -p 2222 -J jump.example deploy@build.example ls -la",
        [
            "ssh://jump.example",
            "ssh://deploy@build.example",
        ],
    ),
    ("ssh fe80::1", ["ssh://[fe80::1]"]),
    ("sftp files.example:dir", ["ssh://files.example/dir"]),
    # sftp's own options: -p preserves (takes no value), -P is the port
    ("sftp -p evil.example", ["ssh://evil.example"]),
    ("sftp -P 2222 -b batch me@files.example", ["ssh://me@files.example"]),
    ("ssh -P tag build.example", ["ssh://build.example"]),
    ("mosh me@box.example", ["ssh://me@box.example"]),
    ("ftp files.example", ["ftp://files.example"]),
    # copy commands: only [user@]host:path operands are remotes
    ("scp build.example:out.tgz .", ["ssh://build.example/out.tgz"]),
    ("scp -P 2222 -i key a.txt me@build.example:/tmp/", ["ssh://me@build.example/tmp/"]),
    ("scp '[::1]:f' .", ["ssh://[::1]/f"]),
    ("scp ./a:b /srv/c:d e", []),
    ("rsync -av --exclude a:b src/ build.example:/srv/", ["ssh://build.example/srv/"]),
    ("rsync mirror.example::pub/x .", ["rsync://mirror.example/pub/x"]),
    ("rsync -a src/ dst/", []),
    # git: the remote operands, never remote names, refspecs or local paths
    ("git clone --depth 1 code.example:team/repo", ["ssh://code.example/team/repo"]),
    ("git -C sub -c a.b=c fetch code.example:r main:main", ["ssh://code.example/r"]),
    ("git push -o ci.skip origin HEAD:refs/for/main", []),
    ("git push --repo=code.example:r", ["ssh://code.example/r"]),
    ("git archive --remote code.example:r HEAD", ["ssh://code.example/r"]),
    ("git remote add -t main origin code.example:r", ["ssh://code.example/r"]),
    ("git remote set-url origin code.example:r", ["ssh://code.example/r"]),
    ("git submodule add code.example:lib lib", ["ssh://code.example/lib"]),
    ("git config remote.origin.url code.example:r", ["ssh://code.example/r"]),
    ("git clone ../local /tmp/x:y/z && git pull && git log --format=%H:%s", []),
    # no network command, no target
    ('python3 -c "print(1)"', []),
    ("ls a:b; grep -n x file.py:12; python3 -m http.server 8000", []),
    ("echo build.example:443", []),
]


@pytest.mark.parametrize(("text", "targets"), REMOTE_COMMANDS)
def test_remotes_of_ssh_copy_and_git_commands_are_targets(text: str, targets: list[str]) -> None:
    assert extract_targets({"command": text}) == targets


def test_proxies_are_targets_and_no_proxy_lists_are_not() -> None:
    text = (
        "https_proxy=proxy-a.example:8080 HTTP_PROXY=proxy-b.example curl http://ok.example/;"
        " wget -e all_proxy=proxy-c.example -O f https://ok.example/f;"
        " pip install --proxy proxy-d.example:3128 r; git -c http.proxy=proxy-e.example clone x;"
        " no_proxy=localhost,127.0.0.1 make"
    )
    assert extract_targets({"command": text}) == [
        "proxy-a.example:8080",
        "proxy-b.example",
        "http://ok.example/",
        "proxy-c.example",
        "https://ok.example/f",
        "proxy-d.example:3128",
        "proxy-e.example",
    ]
    env = {"HTTPS_PROXY": "proxy-f.example:1", "No_Proxy": "internal.example"}
    assert extract_targets({"env": env}) == ["proxy-f.example:1"]


def test_the_word_after_a_url_given_to_a_key_is_not_its_value() -> None:
    text = "tool --url https://a.example build; ALL_PROXY=socks5://b.example:1080 make"
    assert extract_targets({"command": text}) == ["https://a.example", "socks5://b.example:1080"]


def test_a_network_command_after_variable_assignments_is_in_command_position() -> None:
    text = "A=1 B='two words' nc c.example 80; X=1 env Y=2 curl d.example"
    assert extract_targets({"command": text}) == ["c.example", "d.example"]


def test_network_command_words_in_prose_are_not_commands() -> None:
    assert extract_targets("we use curl to fetch pages and nc for sockets") == []


def test_targets_are_found_in_lists_and_tuples_of_strings() -> None:
    assert extract_targets(["see https://x.example", ("host=y.example",)]) == [
        "https://x.example",
        "y.example",
    ]


def test_check_args_judges_every_target_and_first_denial_picks_the_first_refusal() -> None:
    policy = NetworkPolicy.from_options(allow_with())
    decisions = check_args(policy, {"cmd": "curl https://ok.example http://169.254.169.254/"})
    assert [d.allowed for d in decisions] == [True, False]
    denial = first_denial(decisions)
    assert denial is not None
    assert (denial.target, denial.code, denial.reason) == (
        "http://169.254.169.254/",
        ENDPOINT,
        "link_local",
    )


def test_first_denial_is_none_when_everything_is_allowed() -> None:
    policy = NetworkPolicy.from_options(EXAMPLE)
    assert first_denial(check_args(policy, {"url": "https://example.com"})) is None


# --- resolution ---------------------------------------------------------------------------


def resolver_for(*answers: str) -> Any:
    def resolve(host: str, port: int) -> list[str]:
        return list(answers)

    return resolve


def test_resolution_to_a_public_address_returns_every_address_deduplicated() -> None:
    policy = NetworkPolicy.from_options(EXAMPLE)
    resolver = resolver_for("93.184.216.34", "2606:2800:220:1::1", "93.184.216.34")
    assert resolve_and_check(policy, "api.example.com", 443, resolver=resolver) == [
        "93.184.216.34",
        "2606:2800:220:1::1",
    ]


def test_a_name_allowed_by_domain_that_resolves_to_loopback_is_refused() -> None:
    policy = NetworkPolicy.from_options(EXAMPLE)
    with pytest.raises(NetworkDeniedError) as info:
        resolve_and_check(policy, "rebind.example.com", 80, resolver=resolver_for("127.0.0.1"))
    assert info.value.reason() | {"message": ""} == {
        "code": ENDPOINT,
        "message": "",
        "target": "rebind.example.com:80",
        "host": "rebind.example.com",
        "reason": "resolved_loopback",
        "address": "127.0.0.1",
    }


def test_one_private_answer_among_public_ones_refuses_the_name() -> None:
    policy = NetworkPolicy.from_options(ALLOW)
    with pytest.raises(NetworkDeniedError) as info:
        resolve_and_check(policy, "mixed.example", 80, resolver=resolver_for("8.8.8.8", "10.0.0.1"))
    assert info.value.decision.reason == "resolved_private"


def test_a_mapped_or_scoped_answer_is_judged_by_its_real_address() -> None:
    policy = NetworkPolicy.from_options(ALLOW)
    for answer, reason in (
        ("::ffff:10.0.0.1", "resolved_private"),
        ("fe80::1%eth0", "resolved_link_local"),
    ):
        with pytest.raises(NetworkDeniedError) as info:
            resolve_and_check(policy, "x.example", 80, resolver=resolver_for(answer))
        assert info.value.decision.reason == reason


def test_a_private_answer_is_allowed_when_its_address_is_allowlisted() -> None:
    policy = NetworkPolicy.from_options(deny_with("example.com", "127.0.0.1"))
    resolver = resolver_for("127.0.0.1")
    assert resolve_and_check(policy, "rebind.example.com", 80, resolver=resolver) == ["127.0.0.1"]


def test_a_private_answer_is_allowed_when_the_exact_name_is_allowlisted() -> None:
    policy = NetworkPolicy.from_options(deny_with("git.corp.example"))
    resolver = resolver_for("10.20.30.40")
    assert resolve_and_check(policy, "git.corp.example", 443, resolver=resolver) == ["10.20.30.40"]


def test_a_wildcard_entry_never_vouches_for_private_answers() -> None:
    policy = NetworkPolicy.from_options(deny_with("*.corp.example"))
    with pytest.raises(NetworkDeniedError):
        resolve_and_check(policy, "git.corp.example", 443, resolver=resolver_for("10.20.30.40"))


def test_an_address_literal_is_checked_without_resolving() -> None:
    policy = NetworkPolicy.from_options(ALLOW)
    with pytest.raises(NetworkDeniedError) as info:
        resolve_and_check(policy, "127.0.0.1", 80)
    assert info.value.decision.reason == "loopback"


def test_the_system_resolver_is_used_by_default() -> None:
    policy = NetworkPolicy.from_options(allow_with("localhost"))
    addresses = resolve_and_check(policy, "localhost", 80)
    assert addresses
    assert all(ipaddress.ip_address(a).is_loopback for a in addresses)


def test_a_name_that_does_not_resolve_fails_with_resolve_failed() -> None:
    def failing(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(ToolError) as info:
        resolve_and_check(NetworkPolicy.from_options(ALLOW), "nx.example", 80, resolver=failing)
    assert (info.value.code, info.value.details["kind"]) == ("tool_error", "resolve_failed")


# --- errors and signals -------------------------------------------------------------------


def test_denial_error_carries_code_target_host_and_reason() -> None:
    decision = judge_target(NetworkPolicy.from_options(ALLOW), "http://127.1:8080/x")
    error = denial_error(decision)
    assert error.reason() == {
        "code": ENDPOINT,
        "message": "network target 'http://127.1:8080/x' is refused: it is a loopback "
        "address; name the exact host or address in network_allowlist to allow it",
        "target": "http://127.1:8080/x",
        "host": "127.0.0.1",
        "reason": "loopback",
    }


def test_a_host_off_the_allowlist_under_egress_allow_is_refused_with_its_fix() -> None:
    decision = judge_target(NetworkPolicy.from_options(allow_with("example.com")), "evil.example")
    assert str(denial_error(decision)) == (
        "network target 'evil.example' is refused: its host is not in network_allowlist; "
        "name the exact host or address in network_allowlist to allow it"
    )


def test_a_protocol_denial_says_how_to_allow_the_scheme() -> None:
    decision = judge_target(NetworkPolicy.from_options(EXAMPLE), "ftp://example.com/")
    assert str(denial_error(decision)).endswith(
        "its scheme is not in network_allowed_schemes; allow the scheme in network_allowed_schemes"
    )


def test_the_signal_names_tool_call_reason_and_hides_credentials() -> None:
    decision = TargetDecision(
        target="https://bob:s3cret@evil.example/x",
        host="evil.example",
        scheme="https",
        port=443,
        allowed=False,
        code=DENIED,
        reason="not_allowlisted",
    )
    assert signal_for(decision, "http.fetch", "call-1") == SecurityNetworkDenied(
        target="https://***@evil.example/x",
        reason="not_allowlisted",
        tool="http.fetch",
        call_id="call-1",
    )


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["url", "host", "data", "Endpoint", "x", "cmd"]), children, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(args=JSON_VALUES)
def test_extraction_never_fails_and_returns_unique_non_empty_strings(args: Any) -> None:
    targets = extract_targets({"payload": args, "encoded": json.dumps(args)})
    assert all(isinstance(t, str) and t == t.strip() and t for t in targets)
    assert len(targets) == len(set(targets))
