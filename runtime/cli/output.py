"""Writing a command's output to a file instead of stdout (``roost incident -o FILE``).

The file is replaced atomically: the text goes to a temporary file in the same directory,
is flushed to disk, then renamed over the target, so a reader never sees half a report
and a failed write leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from runtime.errors import RoostError

__all__ = ["OutputNotWrittenError", "write_output"]


class OutputNotWrittenError(RoostError):
    """The output file could not be written (exit 1); ``path`` and ``reason`` say why."""

    code = "output_not_written"


def write_output(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; raise ``OutputNotWrittenError``."""
    target = Path(path)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        tmp = None
    except OSError as e:
        raise OutputNotWrittenError(
            f"cannot write {path}: {e.strerror or e}; check that its directory exists "
            "and is writable",
            path=path,
            reason=e.strerror or str(e),
        ) from e
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
