"""A real full disk for the landing zone: a small tmpfs, and a file that fills it.

``small_tmpfs`` mounts a tmpfs of ``size`` on a directory (the test is skipped, with
the reason, where mounting is not allowed: it needs root or CAP_SYS_ADMIN) and
unmounts it at the end; ``fill`` writes until no byte is left. The ``small_disk``
fixture (tests/conftest.py) is ``DATA/landing`` on such a tmpfs.
tests/exporters/test_landing_faults.py injects the same fault where no tmpfs can be had.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(directory: Path, size: str = "4m") -> Iterator[Path]:
    """``directory`` (created) with a tmpfs of ``size`` mounted on it, until the end."""
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip()}); "
                    "test_landing_faults.py covers the same fault by injection")  # fmt: skip
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def fill(directory: Path) -> Path:
    """Write a file until the filesystem has no byte left; the file (unlink it to heal)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    probe = os.open(directory / "probe", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="No space left") as full:
            os.write(probe, b"x" * 4096)
    finally:
        os.close(probe)
    assert full.value.errno == errno.ENOSPC
    return filler


def heal(directory: Path, filler: Path) -> None:
    """Free what ``fill`` took (the filler and its probe file)."""
    filler.unlink()
    (directory / "probe").unlink(missing_ok=True)
