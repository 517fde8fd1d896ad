"""Tool processes hold no privilege over the host, attacked through a real daemon.

Issue 17's first property: whatever uid the daemon has (CI runs it as root, as operators in
containers do), a process a tool starts has no capabilities, ``no_new_privs``, the seccomp
filter of ``runtime.guard.sandbox.seccomp``, the kernel's control files read-only or masked, no way
into the daemon user's keyrings, sized tmpfs, and a memory and CPU limit per call. Every
attack runs by three routes -- ``command.run``, an asset command (``.roost/commands``) and a
workflow step (``.roost/workflows``) -- and must fail by each.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.client import Client
from runtime.guard.sandbox import cgroupfs, cgroups
from tests.integration.adversarial_helpers import LAYERS, needs_bwrap, run_daemon
from tests.integration.conftest import make_root

pytestmark = needs_bwrap

P = "guard"
ROUTES = ("command", "asset", "workflow")
TMPFS_BYTES = 8 * 1024**2
MEMORY_BYTES = 160 * 1024**2
CPU_CORES = 0.5

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the attack needs a daemon running as root (as CI runs it)"
)

_COMMAND_ASSET = """---
description: Run a script
input_schema: {"type": "object", "properties": {"script": {"type": "string"}},
  "required": ["script"]}
argv: ["/bin/sh", "-c", "{{script}}"]
---
"""

_WORKFLOW_ASSET = """---
description: Run a script as a workflow step
input_schema: {"type": "object", "properties": {"script": {"type": "string"}},
  "required": ["script"]}
steps: [{"tool": "command.run", "args": {"command": "{{script}}", "timeout_ms": 60000}}]
---
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    """A daemon with one project whose calls are limited, carrying both assets."""
    base = tmp_path_factory.mktemp("guards")
    home = Path(tempfile.mkdtemp(prefix="roost-kg-", dir="/var/tmp"))
    try:
        with run_daemon(home / "home") as daemon, daemon.client(timeout_s=120) as c:
            root = Path(make_root(base / P))
            (root / ".roost" / "commands").mkdir()
            (root / ".roost" / "commands" / "sh.md").write_text(_COMMAND_ASSET)
            (root / ".roost" / "workflows").mkdir()
            (root / ".roost" / "workflows" / "sh.md").write_text(_WORKFLOW_ASSET)
            options = {
                "tool_tmpfs_bytes": TMPFS_BYTES,
                "tool_max_memory_bytes": MEMORY_BYTES,
                "tool_cpu_cores": CPU_CORES,
                "tool_timeout_ms": 60000,
            }
            c.start_project(str(root), project_id=P, options=options)
            yield c
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(client: Client, route: str, script: str) -> dict[str, Any]:
    """Run ``script`` with ``/bin/sh -c`` by ``route``; return ``command.run``'s result."""
    if route == "command":
        request = {"name": "command.run", "args": {"command": script, "timeout_ms": 60000}}
    else:
        request = {
            "name": f"{route.replace('asset', 'command')}.run.sh",
            "args": {"script": script},
        }
    answer = client.run_tool(P, request)
    assert answer["status"] == "ok", answer
    result: dict[str, Any] = answer["result"]
    if route == "workflow":
        result = result["steps"][0]["result"]
    return result


def root_of(client: Client) -> Path:
    return Path(client.diagnostics(P)["root"])


@pytest.mark.parametrize("route", ROUTES)
def test_the_kernel_says_no_capabilities_no_new_privs_and_a_filter(
    client: Client, route: str
) -> None:
    result = run(client, route, "grep -E '^(CapEff|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status")
    said = dict(line.split(":\t") for line in result["stdout"].splitlines())
    assert said == {
        "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000",
        "NoNewPrivs": "1",
        "Seccomp": "2",
    }


@needs_root
@pytest.mark.parametrize("route", ROUTES)
def test_a_command_cannot_write_proc_sys(client: Client, route: str) -> None:
    """The write puts vm.swappiness's current value back: it changes nothing even if it works."""
    before = Path("/proc/sys/vm/swappiness").read_text()
    script = 'v=$(cat /proc/sys/vm/swappiness); echo "$v" > /proc/sys/vm/swappiness; echo rc=$?'
    result = run(client, route, script)
    assert result["stdout"] == "rc=2\n", result
    assert "Read-only file system" in result["stderr"]
    assert Path("/proc/sys/vm/swappiness").read_text() == before


@pytest.mark.parametrize("route", ROUTES)
def test_the_kernels_memory_and_keys_read_as_nothing(client: Client, route: str) -> None:
    script = (
        "for f in /proc/keys /proc/key-users /proc/kcore; do "
        "printf '%s ' $(cat $f 2>/dev/null | wc -c); done"
    )
    with user_key("roost-kg-proc-keys", "visible-in-proc-keys"):
        result = run(client, route, script)
    assert result["stdout"].split() == ["0", "0", "0"], result


@contextlib.contextmanager
def user_key(name: str, value: str) -> Iterator[str]:
    """A key in this process's user keyring (the daemon's user's: same uid), then unlinked."""
    if shutil.which("keyctl") is None:
        pytest.skip("keyctl (keyutils) is not installed here")
    done = subprocess.run(
        ["keyctl", "add", "user", name, value, "@u"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot add a key here: {done.stderr.strip()}")
    key = done.stdout.strip()
    try:
        yield key
    finally:
        subprocess.run(["keyctl", "unlink", key, "@u"], capture_output=True, check=False)


@pytest.mark.parametrize("route", ROUTES)
def test_a_command_cannot_find_or_read_the_daemon_users_key(client: Client, route: str) -> None:
    with user_key("roost-kg-secret", "the-operators-secret-token") as key:
        script = (
            "id=$(keyctl search @u user roost-kg-secret); echo search=$?; "
            f"keyctl print ${{id:-{key}}}; echo print=$?; keyctl show @s; echo show=$?"
        )
        result = run(client, route, script)
    assert "the-operators-secret-token" not in json.dumps(result)
    said = [line for line in result["stdout"].splitlines() if "=" in line]
    assert said == ["search=1", "print=1", "show=1"], result
    assert "Operation not permitted" in result["stderr"]


PTRACE = (
    "import ctypes, os, time\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "pid = os.fork()\n"
    "if pid == 0:\n    time.sleep(30); os._exit(0)\n"
    "rc = libc.ptrace(16, pid, 0, 0)\n"  # PTRACE_ATTACH to its own child
    "print('ptrace', rc, ctypes.get_errno()); os.kill(pid, 9)\n"
)


@pytest.mark.parametrize("route", ROUTES)
def test_a_command_cannot_unshare_mount_or_ptrace(client: Client, route: str) -> None:
    script = (
        "unshare -U true; echo unshare_user=$?; unshare -r true; echo unshare_root=$?; "
        "mkdir -p m; mount -t tmpfs none m; echo mount=$?; rmdir m; "
        f'python3 -c "{PTRACE}"'
    )
    result = run(client, route, script)
    assert result["stdout"].splitlines() == [
        "unshare_user=1",
        "unshare_root=1",
        "mount=32",
        "ptrace -1 1",
    ], result


@pytest.mark.parametrize("route", ROUTES)
def test_no_set_id_file_fifo_or_device_can_be_made(client: Client, route: str) -> None:
    script = (
        "cp /bin/sh helper; chmod u+s helper; echo suid=$?; chmod g+s helper; echo sgid=$?; "
        "chmod 4755 helper; echo octal=$?; mkfifo pipe; echo fifo=$?; "
        "mknod dev c 1 3; echo chr=$?; mknod blk b 7 0; echo blk=$?; "
        "python3 -c \"import os; os.open('made', os.O_CREAT | os.O_WRONLY, 0o4755)\"; "
        "echo create=$?; install -m 2755 /bin/true inst; echo install=$?; "
        "chmod 755 helper; echo plain=$?"
    )
    result = run(client, route, script)
    assert result["stdout"].splitlines() == [
        "suid=1",
        "sgid=1",
        "octal=1",
        "fifo=1",
        "chr=1",
        "blk=1",
        "create=1",
        "install=1",
        "plain=0",
    ], result
    root = root_of(client)
    try:
        for path in root.iterdir():
            mode = path.lstat().st_mode
            assert mode & 0o6000 == 0, path
            assert path.is_dir() or path.is_file(), path
        assert not (root / "pipe").exists() and not (root / "made").exists()
    finally:
        for name in ("helper", "inst", "made"):
            (root / name).unlink(missing_ok=True)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("place", ["/tmp", "/var/tmp", "/dev/shm"])
def test_a_scratch_tmpfs_fills_up_at_its_size(client: Client, route: str, place: str) -> None:
    script = (
        f"dd if=/dev/zero of={place}/fill bs=1M count=64 2>err; echo rc=$?; "
        f"grep -c 'No space left on device' err; stat -c %s {place}/fill; rm -f err; "
        "touch /dev/planted; echo dev=$?"
    )
    result = run(client, route, script)
    rc, enospc, size, dev = result["stdout"].split()
    assert (rc, enospc, dev) == ("rc=1", "1", "dev=1"), result
    assert 0 < int(size) <= TMPFS_BYTES


def test_a_command_cannot_leave_its_cgroups(client: Client) -> None:
    script = (
        "for f in /sys/fs/cgroup/*/cgroup.procs /sys/fs/cgroup/cgroup.procs; do "
        '[ -e "$f" ] && { echo $$ > "$f"; } 2>/dev/null && echo "left via $f"; done; echo done'
    )
    assert run(client, "command", script)["stdout"] == "done\n"


def _memory_limited() -> None:
    if not LAYERS["memory_limit"]["available"]:
        pytest.skip(f"no memory cgroup here: {LAYERS['memory_limit']['detail']}")


@pytest.mark.parametrize("route", ROUTES)
def test_a_memory_hog_is_stopped_by_the_memory_limit(client: Client, route: str) -> None:
    _memory_limited()
    hog = "python3 -c \"b = b'x' * (600 * 1024 * 1024); print('survived')\""
    result = run(client, route, hog)
    assert result["exit_code"] == 137, result
    assert result["killed_by"] == "memory_limit"
    assert "survived" not in result["stdout"]


def _cpu_mount() -> str:
    for mount, fstype, options in cgroupfs.mounts():
        if fstype == "cgroup" and "cpu" in options:
            return mount
        if fstype == "cgroup2":
            return mount
    pytest.skip("no cpu cgroup mounted here")


@pytest.mark.parametrize("route", ROUTES)
def test_the_cgroup_of_a_running_command_has_the_cpu_quota(client: Client, route: str) -> None:
    if not LAYERS["cpu_limit"]["available"]:
        pytest.skip(f"no cpu cgroup here: {LAYERS['cpu_limit']['detail']}")
    mount = _cpu_mount()
    script = (
        "p=$(grep -E '^[0-9]+:([^:]*,)?cpu(,[^:]*)?:|^0::' /proc/self/cgroup "
        "| head -1 | cut -d: -f3); "
        f"cat {mount}$p/cpu.cfs_quota_us {mount}$p/cpu.cfs_period_us 2>/dev/null "
        f"|| cat {mount}$p/cpu.max"
    )
    result = run(client, route, script)
    quota = int(CPU_CORES * cgroups.CPU_PERIOD_US)
    assert result["stdout"].split() in ([str(quota), str(cgroups.CPU_PERIOD_US)],), result


def test_diagnostics_report_every_guard(client: Client) -> None:
    layers = client.diagnostics(P)["sandbox_layers"]
    for name in ("seccomp", "no_new_privs", "proc_masks", "tmpfs_size"):
        assert layers[name]["available"] is True, layers[name]
    for name in ("pids_limit", "memory_limit", "cpu_limit"):
        assert layers[name]["available"] is LAYERS[name]["available"], layers[name]
