"""The blocklist's shell lexer (runtime.guard.commands.shellwords): each kind of character."""

from __future__ import annotations

import pytest

from runtime.guard.commands.shellwords import parse_segments

VARIABLES = {"a": " x  y ", "e": "", "u": "sudo"}
"""Variables assigned earlier in the command string."""

Shape = list[tuple[list[str], list[tuple[str, str]], bool]]

CASES: list[tuple[str, Shape]] = [
    ('echo "$a"z', [(["echo", " x  y z"], [], False)]),
    ("echo $a", [(["echo", "x", "y"], [], False)]),
    ('echo p$a"q"', [(["echo", "p", "x", "y", "q"], [], False)]),
    ("echo $e$e x", [(["echo", "x"], [], False)]),
    ('echo "$e"', [(["echo", ""], [], False)]),
    ("echo a#b #c", [(["echo", "a#b"], [], False)]),
    ("#only", []),
    ("ec\\\nho x", [(["echo", "x"], [], False)]),
    ("echo \\\n x", [(["echo", "x"], [], False)]),
    ("echo \\", [(["echo", ""], [], False)]),
    ('echo "a\\"b\\\\c\\$d\\`e\\\nf\\g"', [(["echo", 'a"b\\c$d`ef\\g'], [], False)]),
    ("echo `echo \\`x\\` \\$y \\z`", [(["echo", "`echo `x` $y \\z`"], [], False)]),
    ('$"abc" d', [(["abc", "d"], [], False)]),
    ("${x/a/b} ${#u} ${!u} ${#}", [(["${x/a/b}", "${#u}", "${!u}", "0"], [], False)]),
    (
        "${u?msg} ${u:?m} ${u:+alt}${x:+alt} ${x-def} ${u:=z}",
        [(["sudo", "sudo", "alt", "def", "sudo"], [], False)],
    ),
    (
        "${x:-${y:-${z:-${w:-${v:-${q:-${r:-${s:-${t:-${o:-deep}}}}}}}}}}",
        [(["${o:-deep}"], [], False)],
    ),
    ("\"$'x'\" $'\\x73udo'", [(["$'x'", "sudo"], [], False)]),
    (
        "$1 $@ $0 $# ${10} $² $? $$ $ x $% ${IFS}y",
        [(["sh", "0", "0", "0", "$", "x", "$%", "y"], [], False)],
    ),
    (
        "a 2>/dev/null 3<&0 x<(ls) >(cat) <<<w",
        [(["a", "x<(ls)", ">(cat)"], [(">", "/dev/null"), ("<&", "0"), ("<<<", "w")], False)],
    ),
    (
        "a|&b;;c ;& d ;;& e && f || g &>> h",
        [
            (["a"], [], True),
            (["b"], [], False),
            (["c"], [], False),
            (["d"], [], False),
            (["e"], [], False),
            (["f"], [], False),
            (["g"], [("&>>", "h")], False),
        ],
    ),
    ('"unclosed $u', [(["unclosed sudo"], [], False)]),
    ("'unclosed", [(["unclosed"], [], False)]),
    ("$(echo hi", [(["$(echo hi)"], [], False)]),
    ("`unclosed", [(["`unclosed`"], [], False)]),
]
"""A command and its segments: (words, redirections, pipes into the next)."""


@pytest.mark.parametrize(("command", "expected"), CASES)
def test_lexer_reads_the_shell_way(command: str, expected: Shape) -> None:
    segments = parse_segments(command, VARIABLES)
    assert [
        ([w.text for w in s.words], [(op, w.text) for op, w in s.redirects], s.pipe_to_next)
        for s in segments
    ] == expected
