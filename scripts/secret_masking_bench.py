"""What masking known secret values costs: per KB of output, and per call for the sources.

Run ``python scripts/secret_masking_bench.py [--values N]``. It prints, best of 7:

- compiling a masker for N random 24-character values (all their encoded forms);
- ``mask_text`` on clean Python source of 1 KB, 64 KB and 1 MB (µs, and µs per KB),
  on 64 KB of base64 lines, and on 64 KB holding one value;
- ``SecretSources.masker()`` on a root of 10,000 files in 1,000 directories: the first
  look, a call within the rescan period, and a rescan that finds nothing new.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import shutil
import string
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from runtime.guard.secrets.masking import SecretMasker
from runtime.guard.secrets.sources import SecretSources
from runtime.option_table import RuntimeOptions

_ALNUM = string.ascii_letters + string.digits
_SOURCE = (Path(__file__).resolve().parents[1] / "runtime" / "execution" / "runner.py").read_text()


def best(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of ``fn``, the best of 7 rounds of ``number`` calls."""
    rounds = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return min(rounds)


def text_of(size: int) -> str:
    """``size`` bytes of clean Python source (this repository's runner, repeated)."""
    return (_SOURCE * (size // len(_SOURCE) + 1))[:size]


def masking(count: int) -> None:
    """Print the masker's costs for ``count`` random values."""
    values = ["".join(secrets.choice(_ALNUM) for _ in range(24)) for _ in range(count)]
    compile_s = best(lambda: SecretMasker(values), 1)
    masker = SecretMasker(values)
    print(f"compile {count} values ({masker.forms_count} forms): {compile_s * 1e3:.1f} ms")
    for size in (1024, 65536, 1 << 20):
        text = text_of(size)
        seconds = best(lambda text=text: masker.mask_text(text), max(1, (4 << 20) // size))
        per_kb = seconds * 1e6 / (size / 1024)
        print(f"clean text, {size:>7} B: {seconds * 1e6:9.1f} µs  ({per_kb:.2f} µs/KB)")
    lines = base64.encodebytes(text_of(49152).encode()).decode()
    seconds = best(lambda: masker.mask_text(lines), 50)
    print(f"base64 lines, {len(lines)} B: {seconds * 1e6:.1f} µs")
    text = text_of(65536)
    hit = text[:30000] + values[0] + text[30000:]
    seconds = best(lambda: masker.mask_text(hit), 50)
    print(f"64 KB holding one value: {seconds * 1e6:.1f} µs")


def sources() -> None:
    """Print what finding the values costs on a root of 10,000 files."""
    root = tempfile.mkdtemp(prefix="roost-mask-bench-")
    try:
        for index in range(1000):
            directory = os.path.join(root, f"d{index // 100}", f"s{index}")
            os.makedirs(directory)
            for name in range(10):
                Path(directory, f"f{name}.py").write_text("x = 1\n")
        Path(root, ".env").write_text("API_TOKEN=Sup3rS3cr3tV4lue\nOTHER=An0therValue9\n")
        deny = RuntimeOptions().sensitive_path_denylist
        start = time.perf_counter()
        SecretSources(root, deny=deny, environ={}).masker()
        first = time.perf_counter() - start
        cached = SecretSources(root, deny=deny, environ={})
        cached.masker()
        within = best(cached.masker, 20)
        rescanning = SecretSources(root, deny=deny, environ={}, rescan_s=0)
        rescanning.masker()
        rescan = best(rescanning.masker, 5)
        print(
            "sources, 10,000 files in 1,000 directories: first look "
            f"{first * 1e3:.1f} ms, within the rescan period {within * 1e6:.0f} µs, "
            f"a rescan {rescan * 1e3:.2f} ms"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Parse the arguments and print every figure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--values", type=int, default=50, help="values to mask (default 50)")
    args = parser.parse_args()
    masking(args.values)
    sources()


if __name__ == "__main__":
    main()
