"""The driver JVM's class archive (Java's dynamic AppCDS): a session starts on about half the CPU.

Spark's driver loads thousands of classes from the pyspark wheel's jars at
every start. Java (13 and later) can write the classes a run loaded into an
archive when the JVM exits (``-XX:ArchiveClassesAtExit``) and map them at the
next start (``-XX:SharedArchiveFile``). Measured on this project's 2-core
machine (docs/pipeline.md): the JVM's CPU to a ready session 18.8 s without,
9.95 s with.

The archive is kept under the user's cache directory, named by a digest of
what it depends on (the Java runtime, pyspark's version, the JVM's options);
the first run writes ``<key>.<pid>.partial`` at its exit and a later start
takes it once the process that wrote it is gone. A stale or broken archive
costs nothing but its use: the JVM (``-Xshare:auto``, the default) runs
without it. The JVM's own lines about the archive are switched off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

#: Where archives are kept (beside the Kafka connector's jars).
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clientmetrics"
#: Set to 0 to start the JVM without an archive.
ENV = "CLIENTMETRICS_SPARK_CLASS_ARCHIVE"
#: A partial archive younger than this may still be being written.
_SETTLED_S = 60.0
_QUIET = "-Xlog:cds*=off"


def archive_options(java_home: str, java_options: str, *, cache: Path = CACHE) -> str:
    """The JVM options that use (or, the first time, write) the class archive.

    Empty when ``CLIENTMETRICS_SPARK_CLASS_ARCHIVE=0`` or the cache cannot be written.
    """
    if os.environ.get(ENV, "1") == "0":
        return ""
    import pyspark

    key = hashlib.sha256(
        "\0".join((os.path.realpath(java_home), pyspark.__version__, java_options)).encode()
    ).hexdigest()[:16]
    directory = cache / "spark-classes"
    archive = directory / f"{key}.jsa"
    if not archive.exists():
        _adopt(directory, key, archive)
    if archive.exists():
        return f"-XX:SharedArchiveFile={archive} {_QUIET}"
    if any(directory.glob(f"{key}.*.partial")):
        return ""  # another run writes it (one at a time: it is large)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return ""
    return f"-XX:ArchiveClassesAtExit={directory / f'{key}.{os.getpid()}.partial'} {_QUIET}"


def _adopt(directory: Path, key: str, archive: Path) -> None:
    """Rename a finished partial archive (its writer gone, untouched for a while) to ``archive``."""
    for partial in sorted(directory.glob(f"{key}.*.partial")):
        writer = partial.name.split(".")[1]
        with contextlib.suppress(OSError, ValueError):
            if _alive(int(writer)) or time.time() - partial.stat().st_mtime < _SETTLED_S:
                continue
            if partial.stat().st_size == 0:
                partial.unlink()
                continue
            os.replace(partial, archive)
            return


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
