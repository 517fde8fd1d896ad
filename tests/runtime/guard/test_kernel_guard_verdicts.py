"""What each kernel guard's entry says for each answer of the kernel (no bubblewrap run).

``kernel_guards.probe`` asks the kernel inside one bubblewrap run; here the kernel's answer
is given, so every verdict (available, or why not) is checked, failures included.
"""

from __future__ import annotations

import os

import pytest

from runtime.guard.sandbox import kernel_guards, seccomp
from runtime.guard.sandbox.view import MASKED_PATHS, PROC_READ_ONLY

WHY = "disabled by ROOST_SANDBOX_DISABLE"
PREFIX = ["bwrap", "--"]
GOOD = {"NoNewPrivs": "1", "CapEff": "0000000000000000", "Seccomp": "2", "tmp_blocks": "1024 4096"}
MASKS = ", ".join(p for p in (*PROC_READ_ONLY, *MASKED_PATHS) if os.path.lexists(p))


def _without(name: str, why: str) -> dict[str, object]:
    return {"available": False, "via": None, "detail": f"{why}; {kernel_guards.WITHOUT[name]}"}


def _held(detail: str) -> dict[str, object]:
    return {"available": True, "via": "bwrap", "detail": detail}


def _guards(
    monkeypatch: pytest.MonkeyPatch,
    answers: list[dict[str, str]],
    *,
    filter_ok: bool = True,
    disabled: frozenset[str] = frozenset(),
) -> tuple[dict[str, object], list[bool]]:
    """The entries for the kernel's ``answers`` (one per run), and whether each run had a filter."""
    asked: list[bool] = []

    def ask(prefix: list[str], fd: int | None) -> dict[str, str]:
        asked.append(fd is not None)
        return dict(answers[len(asked) - 1])

    monkeypatch.setattr(kernel_guards, "_ask_the_kernel", ask)
    monkeypatch.setattr(
        seccomp, "available", lambda: (filter_ok, "filter ok" if filter_ok else "no")
    )
    monkeypatch.setattr(seccomp, "program_fd", lambda: os.memfd_create("test-filter"))
    return dict(kernel_guards._guards(disabled, WHY, PREFIX)), asked


def test_every_guard_holds_where_the_kernel_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    layers, asked = _guards(monkeypatch, [GOOD])
    assert asked == [True]
    assert layers == {
        "seccomp": _held("filter ok"),
        "no_new_privs": _held("no capabilities"),
        "proc_masks": _held(f"read-only or masked: {MASKS}"),
        "tmpfs_size": _held("bwrap --size"),
    }


def test_a_disabled_filter_is_not_loaded_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    layers, asked = _guards(monkeypatch, [GOOD], disabled=frozenset({"seccomp"}))
    assert asked == [False]
    assert layers["seccomp"] == _without("seccomp", WHY)


def test_a_filter_that_cannot_be_built_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    layers, asked = _guards(monkeypatch, [GOOD], filter_ok=False)
    assert asked == [False]
    assert layers["seccomp"] == _without("seccomp", "no")


def test_a_filter_bubblewrap_refused_is_unavailable_and_the_kernel_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refused = {"error": "bwrap: seccomp refused"}
    layers, asked = _guards(monkeypatch, [refused, GOOD])
    assert asked == [True, False]
    why = f"bubblewrap did not load the filter ({refused})"
    assert layers["seccomp"] == _without("seccomp", why)
    assert layers["no_new_privs"] == _held("no capabilities")


def test_a_filter_the_kernel_does_not_report_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    said = {**GOOD, "Seccomp": "0"}
    layers, _ = _guards(monkeypatch, [said])
    assert layers["seccomp"] == _without("seccomp", f"bubblewrap did not apply the filter ({said})")
    errored = {**GOOD, "Seccomp": "0", "error": "exit status 1"}
    layers, _ = _guards(monkeypatch, [errored])
    why = "bubblewrap did not apply the filter (exit status 1)"
    assert layers["seccomp"] == _without("seccomp", why)


@pytest.mark.parametrize(
    "change", [{"NoNewPrivs": "0"}, {"CapEff": "0000003fffffffff"}, {"CapEff": ""}]
)
def test_privileges_that_can_rise_are_reported(
    monkeypatch: pytest.MonkeyPatch, change: dict[str, str]
) -> None:
    said = {**GOOD, **change}
    layers, _ = _guards(monkeypatch, [said])
    expected = _held("no capabilities")
    if change != {"CapEff": ""}:
        expected = _without("no_new_privs", f"the kernel says {said}")
    assert layers["no_new_privs"] == expected


@pytest.mark.parametrize("mark", ["sys_writable", "kcore_readable", "error"])
def test_masks_that_did_not_hold_are_reported(monkeypatch: pytest.MonkeyPatch, mark: str) -> None:
    said = {**GOOD, mark: "exit status 2" if mark == "error" else ""}
    layers, _ = _guards(monkeypatch, [said])
    shown = "exit status 2" if mark == "error" else str(said)
    assert layers["proc_masks"] == _without("proc_masks", f"the masks did not hold ({shown})")


@pytest.mark.parametrize("blocks", ["", "1025 4096", "x 4096", "1024"])
def test_an_unsized_tmpfs_is_reported(monkeypatch: pytest.MonkeyPatch, blocks: str) -> None:
    layers, _ = _guards(monkeypatch, [{**GOOD, "tmp_blocks": blocks}])
    why = "bubblewrap cannot size a tmpfs (0.8.0 and later can: --size)"
    assert layers["tmpfs_size"] == _without("tmpfs_size", why)


def test_without_bubblewrap_every_guard_says_it_comes_with_it() -> None:
    why = "they come with bubblewrap, which cannot run here"
    layers = kernel_guards._guards(frozenset(), WHY, None)
    assert layers == {
        n: _without(n, why) for n in ("seccomp", "no_new_privs", "proc_masks", "tmpfs_size")
    }


def test_the_cgroup_limits_say_why_they_are_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    found = {
        "pids": (True, "ok", "cgroup_v2"),
        "memory": (False, "cannot limit memory: EBUSY", None),
        "cpu": (False, "no writable cpu cgroup hierarchy", None),
    }
    monkeypatch.setattr(kernel_guards.cgroups, "probe_controllers", lambda: found)
    monkeypatch.setattr(kernel_guards, "_guards", lambda *_: {})
    assert kernel_guards.probe(frozenset(), WHY, None) == {
        "pids_limit": {"available": True, "via": "cgroup_v2", "detail": "ok"},
        "memory_limit": _without("memory_limit", "cannot limit memory: EBUSY"),
        "cpu_limit": _without("cpu_limit", "no writable cpu cgroup hierarchy"),
    }
    assert kernel_guards.probe(frozenset({"cgroups"}), WHY, None) == {
        n: _without(n, WHY) for n in ("pids_limit", "memory_limit", "cpu_limit")
    }
