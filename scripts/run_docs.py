r"""Run the runnable shell examples of a Markdown page and print what they printed.

    python scripts/run_docs.py README.md                      # every runnable block
    python scripts/run_docs.py README.md --section "A quick tour" --transcript docs/quick-tour.md

The convention (``docs/cli.md``, "Examples that run"): a fenced block whose info string
is ``console`` is runnable. In it, a line starting with ``$ `` is a command; it goes on
over the next line when it ends with ``\``, and through a here-document (``<<'EOF'`` ...
``EOF``). The other lines are the output the page shows; they are not compared (the page
may shorten them), except that a shown line ``roost: CODE: ...`` means the command must
fail with that error: exit with its status (``docs/cli.md``) and print such a line on
stderr. Every other command must exit 0. Blocks with any other info string (``sh``,
``text``, none) are illustrations and never run.

All the commands of one page run in order in one ``bash`` (``set -o pipefail``), so
variables and ``cd`` carry over, in a fresh working directory, with ``HOME`` and
``TMPDIR`` fresh temporary directories (so ``mktemp`` and the default ``ROOST_HOME`` stay
inside), ``ROOST_HOME`` unset and the directory of this Python's ``roost`` first on
``PATH``. Afterwards every daemon still running on a home under those directories is
stopped. ``--cwd DIR`` runs in ``DIR`` instead (the quick tour runs in the clone).

``tests/test_docs.py`` runs every page this way; ``tests/test_quick_tour.py`` writes the
quick tour's transcript and compares it with ``docs/quick-tour.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from runtime.guard.home.pidfile import locked_pid

ROOT = Path(__file__).resolve().parents[1]

_FENCE = re.compile(r"^(`{3,})(.*)$")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ERROR_LINE = re.compile(r"^roost: ([a-z_]+): ")
_EXIT_BY_CODE = {"usage": 2, "daemon_unreachable": 3, "timeout": 4}


@dataclass
class Command:
    """One ``$`` command of a runnable block and what the page shows after it."""

    text: str
    """The command as bash runs it (continuation lines and here-documents included)."""
    shown: list[str] = field(default_factory=list)
    """The output lines the page shows."""
    line: int = 0
    """Line number of the ``$`` in the page."""

    @property
    def expected_error(self) -> str | None:
        """The error code the page shows for it (``roost: CODE: ...``), if any."""
        for text in self.shown:
            match = _ERROR_LINE.match(text)
            if match:
                return match.group(1)
        return None

    @property
    def expected_status(self) -> int:
        """The exit status the command must have."""
        code = self.expected_error
        return 0 if code is None else _EXIT_BY_CODE.get(code, 1)


@dataclass
class Result:
    """What one command did."""

    command: Command
    status: int
    stdout: str
    stderr: str

    @property
    def problem(self) -> str | None:
        """Why the result does not match the page, or None."""
        want = self.command.expected_status
        if self.status != want:
            return f"exit status {self.status}, the page expects {want}"
        code = self.command.expected_error
        if code is not None and not self.stderr.startswith(f"roost: {code}: "):
            return f"stderr does not start with 'roost: {code}: '"
        return None


def runnable_blocks(
    markdown: str, section: str | None = None, *, skip_section: str | None = None
) -> list[list[Command]]:
    """The commands of each ``console`` block.

    ``section``: only the blocks under that heading; ``skip_section``: all but those.
    """
    blocks: list[list[Command]] = []
    lines = markdown.splitlines()
    in_section = section is None
    i = 0
    while i < len(lines):
        line = lines[i]
        heading = re.match(r"^(#+)\s+(.*)$", line)
        if heading and section is not None:
            in_section = heading.group(2).strip() == section
        elif heading and skip_section is not None:
            in_section = heading.group(2).strip() != skip_section
        fence = _FENCE.match(line)
        if not fence:
            i += 1
            continue
        ticks, info = fence.group(1), fence.group(2).strip()
        end = i + 1
        while end < len(lines) and not lines[end].startswith(ticks):
            end += 1
        if info == "console" and in_section:
            blocks.append(_commands(lines[i + 1 : end], first_line=i + 2))
        i = end + 1
    return blocks


def _commands(lines: list[str], first_line: int) -> list[Command]:
    commands: list[Command] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if commands:
                commands[-1].shown.append(line)
            i += 1
            continue
        start = i
        parts = [line[2:]]
        while parts[-1].endswith("\\") and i + 1 < len(lines):
            i += 1
            parts.append(lines[i])
        heredoc = _HEREDOC.search(parts[0])
        if heredoc:
            word = heredoc.group(2)
            while i + 1 < len(lines):
                i += 1
                parts.append(lines[i])
                if lines[i].strip() == word:
                    break
        commands.append(Command(text="\n".join(parts), line=first_line + start))
        i += 1
    return commands


def _script(commands: list[Command], out_dir: str) -> str:
    body = ["set -o pipefail"]
    for n, command in enumerate(commands):
        body += [
            "{ " + command.text,
            f'}} >"{out_dir}/{n}.out" 2>"{out_dir}/{n}.err" </dev/null',
            f'echo $? >"{out_dir}/{n}.rc"',
        ]
    return "\n".join(body) + "\n"


@dataclass
class Sandbox:
    """The fresh directories and environment one page runs in."""

    base: str
    cwd: str
    env: dict[str, str]

    @classmethod
    def make(cls, cwd: str | None = None) -> Sandbox:
        """Fresh ``HOME``, ``TMPDIR`` and working directory under one temporary directory."""
        base = tempfile.mkdtemp(prefix="roost-docs-")
        home, tmp, work = (os.path.join(base, name) for name in ("home", "tmp", "work"))
        for path in (home, tmp, work):
            os.makedirs(path, mode=0o700)
        bin_dir = os.path.dirname(sys.executable)
        env = {
            "HOME": home,
            "TMPDIR": tmp,
            "PATH": os.pathsep.join([bin_dir, "/usr/local/bin", "/usr/bin", "/bin"]),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "TERM": "dumb",
            "COLUMNS": "200",
        }
        for key in ("ROOST_JOURNAL", "ROOST_TEST_POSTGRES_HOST"):
            if key in os.environ:
                env[key] = os.environ[key]
        return cls(base=base, cwd=cwd or work, env=env)

    def daemon_homes(self) -> list[str]:
        """Homes under this sandbox where a daemon still holds its pid lock."""
        homes = []
        for pid_file in Path(self.base).rglob("roost.pid"):
            if locked_pid(str(pid_file)) is not None:
                homes.append(str(pid_file.parent))
        return homes

    def close(self) -> None:
        """Stop what the page left running, then remove the directories."""
        for home in self.daemon_homes():
            subprocess.run(
                [sys.executable, "-m", "runtime.cli", "--home", home, "daemon", "stop"],
                env=self.env,
                capture_output=True,
                timeout=120,
                check=False,
            )
        shutil.rmtree(self.base, ignore_errors=True)


def run_commands(commands: list[Command], sandbox: Sandbox, timeout_s: float = 300) -> list[Result]:
    """Run ``commands`` in one bash in ``sandbox``; return one result per command run."""
    out_dir = tempfile.mkdtemp(prefix="out-", dir=sandbox.base)
    proc = subprocess.Popen(
        ["bash", "--noprofile", "--norc", "-c", _script(commands, out_dir)],
        cwd=sandbox.cwd,
        env=sandbox.env,
        start_new_session=True,
    )
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    results = []
    for n, command in enumerate(commands):
        rc_path = os.path.join(out_dir, f"{n}.rc")
        if not os.path.exists(rc_path):
            break
        results.append(
            Result(
                command=command,
                status=int(Path(rc_path).read_text().strip() or "-1"),
                stdout=Path(out_dir, f"{n}.out").read_text(errors="replace"),
                stderr=Path(out_dir, f"{n}.err").read_text(errors="replace"),
            )
        )
    return results


@dataclass
class PageRun:
    """What running a page gave."""

    commands: list[Command]
    """Every runnable command of the page (or section), in order."""
    results: list[Result]
    """One per command that ran (all of them unless the page timed out)."""
    left_running: list[str]
    """Homes where a daemon still ran after the last command (then stopped)."""
    tmpdir: str
    """The ``TMPDIR`` the page ran with (removed since)."""

    @property
    def problems(self) -> list[str]:
        """Every command that did not do what the page shows, as ``line N: $ cmd: why``."""
        found = [
            f"line {r.command.line}: $ {r.command.text}: {r.problem}\n{r.stdout}{r.stderr}"
            for r in self.results
            if r.problem
        ]
        if len(self.results) < len(self.commands):
            missing = self.commands[len(self.results)]
            found.append(f"line {missing.line}: $ {missing.text}: did not run (timeout)")
        return found

    def transcript(self) -> str:
        """The transcript with the clone shown as ``~/roost`` and ``TMPDIR`` as ``/tmp``."""
        return transcript(self.results, {str(ROOT): "~/roost", self.tmpdir: "/tmp"})


def run_page(
    path: Path,
    *,
    section: str | None = None,
    skip_section: str | None = None,
    cwd: str | None = None,
    timeout_s: float = 300,
) -> PageRun:
    """Run a page's runnable blocks (or one section's) in a fresh :class:`Sandbox`."""
    blocks = runnable_blocks(path.read_text(), section, skip_section=skip_section)
    commands = [c for block in blocks for c in block]
    sandbox = Sandbox.make(cwd)
    try:
        results = run_commands(commands, sandbox, timeout_s)
        left = [_relative(h, sandbox.base) for h in sandbox.daemon_homes()]
    finally:
        sandbox.close()
    return PageRun(commands, results, left, sandbox.env["TMPDIR"])


def _relative(path: str, base: str) -> str:
    return path.replace(base, "<sandbox>")


def transcript(results: list[Result], replacements: dict[str, str]) -> str:
    """The commands and their output as a console transcript (paths replaced)."""
    lines: list[str] = []
    for result in results:
        lines.append("$ " + result.command.text)
        output = result.stdout + result.stderr
        lines.extend(output.rstrip("\n").splitlines() if output.strip() else [])
    text = "\n".join(lines)
    for old, new in sorted(replacements.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new)
    return text


TOUR_PAGE = """# The quick tour, as it runs

The [README](../README.md)'s quick tour, run word for word in a fresh clone after `make
demo` by `scripts/run_docs.py README.md --section "A quick tour" --transcript
docs/quick-tour.md`. `tests/test_quick_tour.py` (so `make test` and CI) runs it again and
checks that the output still has this shape: the same commands, the same lines, the same
columns, with ids, times, durations, token counts and temporary paths free to differ.
Paths are shortened: the clone is `~/roost`, the temporary directory `/tmp`.

```text
{body}
```
"""


def write_tour(path: Path, run: PageRun) -> None:
    """Write the quick tour's transcript page."""
    path.write_text(TOUR_PAGE.format(body=run.transcript()))


def _iter_report(results: list[Result]) -> Iterator[str]:
    for result in results:
        yield f"$ {result.command.text}"
        yield from (result.stdout + result.stderr).rstrip("\n").splitlines()
        problem = result.problem
        if problem:
            yield f"!! line {result.command.line}: {problem}"


def main(argv: list[str] | None = None) -> int:
    """Run a page; print its transcript; exit 1 when a command did not do what it shows."""
    parser = argparse.ArgumentParser(prog="scripts/run_docs.py", description=__doc__.split("\n")[0])
    parser.add_argument("page", help="the Markdown page (README.md, docs/incidents.md ...)")
    parser.add_argument("--section", help="only the blocks under this heading")
    parser.add_argument("--cwd", help="run in this directory (default: a fresh one)")
    parser.add_argument("--transcript", metavar="FILE", help="write the quick-tour page here")
    args = parser.parse_args(argv)
    started = time.monotonic()
    cwd = args.cwd or (str(ROOT) if args.transcript else None)
    run = run_page(Path(args.page), section=args.section, cwd=cwd)
    if args.transcript:
        write_tour(Path(args.transcript), run)
    for line in _iter_report(run.results):
        print(line)
    for home in run.left_running:
        print(f"!! a daemon was still running on {home} after the last command")
    failed = bool(run.problems or run.left_running)
    print(
        f"-- {len(run.results)} of {len(run.commands)} commands run in "
        f"{time.monotonic() - started:.1f} s; {'FAILED' if failed else 'ok'}",
        file=sys.stderr,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
