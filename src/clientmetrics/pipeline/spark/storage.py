"""Where the job keeps its tables and state, with batch-idempotent writes.

Every write is keyed by the streaming batch id, so a batch that is replayed
after a crash (Structured Streaming replays the last uncommitted batch) leaves
exactly what one successful run would have:

* table rows are written to a staging directory, then each file is renamed into
  its ``date=`` partition as ``b<batch>-<name>``; a replay first deletes the
  files that carry its batch prefix;
* state is written to ``_state/<name>/batch=<id>`` and read back from the latest
  batch before the current one, so a replay sees the state it saw the first time;
* snapshot tables (clients) are replaced whole.

Files come from the pass's tasks (pyarrow) or from Spark's writer
(``write_rows``): the same publishing either way.

Paths go through Hadoop's FileSystem API (via the JVM), so any
Hadoop-compatible location works, not only local directories.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

_STATE_KEEP = 2
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


class TableStore:
    """Tables and state under one root directory (``DATA/tables`` by default)."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        self._spark = spark
        self._root = root.rstrip("/")
        jvm: Any = spark.sparkContext._jvm
        self._path_class = jvm.org.apache.hadoop.fs.Path
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._fs = self._path(self._root).getFileSystem(conf)

    @property
    def root(self) -> str:
        """The root directory."""
        return self._root

    def table_path(self, table: str) -> str:
        """Where a table lives."""
        return f"{self._root}/{table}"

    def _path(self, path: str) -> Any:
        return self._path_class(path)

    def staging_path(self, name: str, batch_id: int) -> str:
        """A batch's scratch directory (deleted by ``clear``)."""
        return f"{self._root}/_staging/{name}/{batch_id}"

    def clear(self, path: str) -> None:
        """Delete a directory and everything under it, if it exists."""
        self._fs.delete(self._path(path), True)

    def publish(self, paths: list[str], table: str, batch_id: int) -> list[str]:
        """Move files staged under ``.../date=D/`` into a table, replacing any earlier try."""
        return self._publish_paths([self._path(path) for path in paths], table, batch_id)

    def _publish_paths(self, sources: list[Any], table: str, batch_id: int) -> list[str]:
        prefix = f"b{batch_id:012d}-"
        for status in self._glob(f"{self.table_path(table)}/date=*/{prefix}*"):
            self._fs.delete(status.getPath(), False)
        written = []
        for source in sources:
            partition = source.getParent().getName()
            target_dir = self._path(f"{self.table_path(table)}/{partition}")
            self._fs.mkdirs(target_dir)
            target = self._path_class(target_dir, prefix + source.getName())
            self._fs.rename(source, target)
            written.append(str(target.toString()))
        return written

    def read_paths(self, paths: list[str], schema: StructType | str) -> DataFrame:
        """Read Parquet files with a given schema (an empty frame when there are none)."""
        if not paths:
            return self._spark.createDataFrame([], schema)
        return self._spark.read.schema(schema).parquet(*paths)

    def read_files(self, table: str, paths: list[str], schema: StructType) -> DataFrame:
        """Read back files of a table (with its ``date`` partition column)."""
        if not paths:
            return self._spark.createDataFrame([], schema)
        reader = self._spark.read.option("basePath", self.table_path(table))
        return reader.schema(schema).parquet(*paths)

    def write_rows(self, frame: DataFrame, directory: str, *, by_day: bool) -> list[str]:
        """Write rows with Spark's writer under ``directory`` (by its ``date`` column if
        ``by_day``); the files written, as ``publish`` and ``adopt_state`` take them."""
        writer = frame.write.mode("overwrite")
        if by_day:
            writer.partitionBy("date").parquet(directory)
            return [str(s.getPath().toString()) for s in self._glob(f"{directory}/date=*/part-*")]
        writer.parquet(directory)
        return [str(s.getPath().toString()) for s in self._glob(f"{directory}/part-*")]

    def replace_files(self, paths: list[str], table: str, batch_id: int) -> None:
        """Replace a snapshot table whole by files staged under ``.../date=D/``."""
        staging = f"{self._root}/_staging/{table}-snapshot/{batch_id}"
        self._fs.delete(self._path(staging), True)
        self._fs.mkdirs(self._path(staging))
        for path in paths:
            source = self._path(path)
            target_dir = self._path(f"{staging}/{source.getParent().getName()}")
            self._fs.mkdirs(target_dir)
            self._fs.rename(
                source, self._path_class(target_dir, f"b{batch_id:012d}-{source.getName()}")
            )
        target = self._path(self.table_path(table))
        self._fs.delete(target, True)
        self._fs.rename(self._path(staging), target)

    def write_state(self, frame: DataFrame, name: str, batch_id: int) -> None:
        """Save the state a batch leaves for the next one; drop states no longer needed."""
        frame.write.mode("overwrite").parquet(self._state_path(name, batch_id))
        self._prune_state(name)

    def _prune_state(self, name: str) -> None:
        versions = self._state_versions(name)
        for old in versions[:-_STATE_KEEP]:
            self._fs.delete(self._path(self._state_path(name, old)), True)

    def adopt_state(self, paths: list[str], name: str, batch_id: int) -> None:
        """Make already written Parquet files the state a batch leaves (``write_state``)."""
        target = self._path(self._state_path(name, batch_id))
        self._fs.delete(target, True)
        self._fs.mkdirs(target)
        for path in paths:
            source = self._path(path)
            self._fs.rename(source, self._path_class(target, source.getName()))
        self._fs.create(self._path_class(target, "_SUCCESS"), True).close()
        self._prune_state(name)

    def read_state(self, name: str, batch_id: int, schema: StructType | str) -> DataFrame:
        """The state left by the latest batch before ``batch_id`` (empty when none)."""
        earlier = [version for version in self._state_versions(name) if version < batch_id]
        if not earlier:
            return self._spark.createDataFrame([], schema)
        return self._spark.read.schema(schema).parquet(self._state_path(name, earlier[-1]))

    def state_files(self, name: str, batch_id: int) -> list[str]:
        """The Parquet files of the state ``read_state`` reads (none when there is none)."""
        earlier = [version for version in self._state_versions(name) if version < batch_id]
        if not earlier:
            return []
        found = self._glob(f"{self._state_path(name, earlier[-1])}/*.parquet")
        return [str(status.getPath().toString()) for status in found]

    def exists(self, relative: str) -> bool:
        """Whether a path under the root exists."""
        return bool(self._fs.exists(self._path(f"{self._root}/{relative}")))

    def mark(self, relative: str) -> None:
        """Create an empty marker file under the root."""
        self._fs.create(self._path(f"{self._root}/{relative}"), True).close()

    def _state_path(self, name: str, batch_id: int) -> str:
        return f"{self._root}/_state/{name}/batch={batch_id:012d}"

    def _state_versions(self, name: str) -> list[int]:
        versions = []
        for status in self._glob(f"{self._root}/_state/{name}/batch=*"):
            if self._fs.exists(self._path_class(status.getPath(), "_SUCCESS")):
                versions.append(int(status.getPath().getName().removeprefix("batch=")))
        return sorted(versions)

    def _glob(self, pattern: str) -> list[Any]:
        found = self._fs.globStatus(self._path(pattern))
        return list(found) if found is not None else []
