"""Spark's Kafka connector jars: fetched once from Maven Central, found again by the job.

The pyspark wheel has no Kafka source (``[KAFKA_DATA_SOURCE_NOT_ENABLED]``).
Its jars are named in ``kafka-connector.pom.xml`` beside this module (pinned
to the pyspark in pyproject.toml) and copied by Maven into a cache folder
named by a hash of that pom, so a changed pin fetches afresh and nothing is
ever written into the package. ``make install`` and ``clientmetrics pipeline
fetch-jars`` fill it; the job gives the jars to Spark with ``spark.jars``.
An operator who has the jars elsewhere names their folder with
``CLIENTMETRICS_KAFKA_JARS``, or sets ``spark.jars`` / ``spark.jars.packages``
themselves (``--conf``), and the job then leaves the setting alone.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from clientmetrics.errors import ConfigurationError

POM = Path(__file__).with_name("kafka-connector.pom.xml")
#: Names the jars folder (overrides the cache).
JARS_ENV = "CLIENTMETRICS_KAFKA_JARS"
#: The jars the Kafka source cannot start without (file name prefixes).
REQUIRED = (
    "spark-sql-kafka-0-10_2.13-",
    "spark-token-provider-kafka-0-10_2.13-",
    "kafka-clients-",
    "commons-pool2-",
)


def cache_dir() -> Path:
    """Where ``fetch`` puts the jars: under ``$XDG_CACHE_HOME`` (or ``~/.cache``), by pom hash."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    key = hashlib.sha256(POM.read_bytes()).hexdigest()[:16]
    return base / "clientmetrics" / f"spark-kafka-{key}"


def _complete(folder: Path) -> list[Path] | None:
    jars = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    found = [jar for jar in jars if jar.name.startswith(REQUIRED)]
    names = {prefix for prefix in REQUIRED for jar in found if jar.name.startswith(prefix)}
    return found if len(names) == len(REQUIRED) else None


def fetch(*, timeout_s: float = 900.0) -> Path:
    """Copy the pom's jars from Maven Central into ``cache_dir()`` (once); the folder."""
    target = cache_dir()
    if _complete(target) is not None:
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConfigurationError(
            "fetching Spark's Kafka connector needs Maven (mvn) on PATH; or put the jars "
            f"({', '.join(p + '*.jar' for p in REQUIRED)}) in a folder named by {JARS_ENV}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".spark-kafka-", dir=target.parent))
    try:
        done = subprocess.run(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={scratch}",
                "-DincludeScope=runtime",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout_s,
        )
        if done.returncode != 0 or _complete(scratch) is None:
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise ConfigurationError(f"Maven could not fetch Spark's Kafka connector: {tail}")
        if not target.exists():
            scratch.rename(target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def connector_jars(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The connector's jars: the folder ``CLIENTMETRICS_KAFKA_JARS`` names, else the cache."""
    environ = os.environ if environ is None else environ
    named = environ.get(JARS_ENV)
    folder = Path(named) if named else cache_dir()
    found = _complete(folder)
    if found is None:
        where = f"{JARS_ENV}={named}" if named else str(folder)
        raise ConfigurationError(
            f"Spark's Kafka connector jars are not in {where}: run `clientmetrics pipeline "
            "fetch-jars` (needs Maven), or give them with --conf spark.jars=... "
            "(docs/pipeline.md)"
        )
    return found


def with_connector(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with the connector's jars added to ``spark.jars`` (unless the operator chose)."""
    settings = dict(conf)
    given = settings.get("spark.jars", "") + settings.get("spark.jars.packages", "")
    if "spark-sql-kafka" in given:
        return settings
    jars = [str(jar) for jar in connector_jars()]
    settings["spark.jars"] = ",".join(filter(None, [settings.get("spark.jars"), *jars]))
    return settings
