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

Paths go through pyarrow's filesystems, the same API the pass's tasks write
with (``files.open_uri``): local paths, and any scheme pyarrow opens (HDFS,
S3, GCS; there a rename is a copy, so a crash can leave a partly published
batch that its replay then replaces).
"""

from __future__ import annotations

import pyarrow as pa
from pyarrow import fs

from clientmetrics.pipeline.spark.files import open_uri, read_parquet, write_parquet

_STATE_KEEP = 2


class TableStore:
    """Tables and state under one root directory (``DATA/tables`` by default)."""

    def __init__(self, root: str) -> None:
        self._root = root.rstrip("/")
        self._fs, self._base = open_uri(self._root)

    @property
    def root(self) -> str:
        """The root directory."""
        return self._root

    def table_path(self, table: str) -> str:
        """Where a table lives."""
        return f"{self._root}/{table}"

    def _local(self, uri: str) -> str:
        """A URI under the root as a path of the root's filesystem."""
        return open_uri(uri)[1]

    def _uri(self, local: str) -> str:
        return self._root + local.removeprefix(self._base)

    def _list(self, uri: str, *, recursive: bool = False) -> list[fs.FileInfo]:
        selector = fs.FileSelector(self._local(uri), allow_not_found=True, recursive=recursive)
        return list(self._fs.get_file_info(selector))

    def staging_path(self, name: str, batch_id: int) -> str:
        """A batch's scratch directory (deleted by ``clear``)."""
        return f"{self._root}/_staging/{name}/{batch_id}"

    def clear(self, uri: str) -> None:
        """Delete a directory and everything under it, if it exists."""
        local = self._local(uri)
        if self._fs.get_file_info(local).type != fs.FileType.NotFound:
            self._fs.delete_dir(local)

    def _move(self, source: str, directory: str, name: str) -> str:
        self._fs.create_dir(self._local(directory), recursive=True)
        target = f"{directory}/{name}"
        self._fs.move(self._local(source), self._local(target))
        return target

    def publish(self, paths: list[str], table: str, batch_id: int) -> list[str]:
        """Move files staged under ``.../date=D/`` into a table, replacing any earlier try."""
        prefix = f"b{batch_id:012d}-"
        for day in self._list(self.table_path(table)):
            if day.type == fs.FileType.Directory and day.base_name.startswith("date="):
                for old in self._fs.get_file_info(fs.FileSelector(day.path)):
                    if old.base_name.startswith(prefix):
                        self._fs.delete_file(old.path)
        written = []
        for path in paths:
            parent, name = path.rsplit("/", 1)
            partition = parent.rsplit("/", 1)[1]
            written.append(self._move(path, f"{self.table_path(table)}/{partition}", prefix + name))
        return written

    def replace_files(self, paths: list[str], table: str, batch_id: int) -> None:
        """Replace a snapshot table whole by files staged under ``.../date=D/``."""
        staging = f"{self._root}/_staging/{table}-snapshot/{batch_id}"
        self.clear(staging)
        self._fs.create_dir(self._local(staging), recursive=True)
        for path in paths:
            parent, name = path.rsplit("/", 1)
            self._move(path, f"{staging}/{parent.rsplit('/', 1)[1]}", f"b{batch_id:012d}-{name}")
        # Set the old snapshot aside by rename, not by deleting it first: readers then
        # see no table only between two renames, not for as long as a delete takes.
        retired = f"{self._root}/_staging/{table}-retired/{batch_id}"
        self.clear(retired)
        table_path = self.table_path(table)
        if self._fs.get_file_info(self._local(table_path)).type != fs.FileType.NotFound:
            self._fs.create_dir(self._local(retired.rsplit("/", 1)[0]), recursive=True)
            self._fs.move(self._local(table_path), self._local(retired))
        self._fs.move(self._local(staging), self._local(table_path))
        self.clear(retired)

    def adopt_state(self, paths: list[str], name: str, batch_id: int) -> None:
        """Make already written Parquet files the state a batch leaves for the next one."""
        target = self._state_path(name, batch_id)
        self.clear(target)
        self._fs.create_dir(self._local(target), recursive=True)
        for path in paths:
            self._move(path, target, path.rsplit("/", 1)[1])
        with self._fs.open_output_stream(self._local(f"{target}/_SUCCESS")):
            pass
        for old in self._state_versions(name)[:-_STATE_KEEP]:
            self.clear(self._state_path(name, old))

    def write_state_table(self, table: pa.Table, name: str, batch_id: int) -> None:
        """Save a small state table (written here, by the driver) as a batch's state."""
        staging = self.staging_path(name, batch_id)
        self.clear(staging)
        write_parquet(f"{staging}/part-00000.parquet", table)
        self.adopt_state([f"{staging}/part-00000.parquet"], name, batch_id)
        self.clear(staging)

    def state_files(self, name: str, batch_id: int) -> list[str]:
        """The Parquet files of the state the latest batch before ``batch_id`` left (or none)."""
        earlier = [version for version in self._state_versions(name) if version < batch_id]
        if not earlier:
            return []
        found = self._list(self._state_path(name, earlier[-1]))
        return sorted(self._uri(i.path) for i in found if i.base_name.endswith(".parquet"))

    def read_state_table(self, name: str, batch_id: int, schema: pa.Schema) -> pa.Table:
        """The state ``state_files`` names, read here (for small state such as progress)."""
        paths = self.state_files(name, batch_id)
        return pa.concat_tables([schema.empty_table(), *(read_parquet(p, schema) for p in paths)])

    def exists(self, relative: str) -> bool:
        """Whether a path under the root exists."""
        found = self._fs.get_file_info(self._local(f"{self._root}/{relative}"))
        return bool(found.type != fs.FileType.NotFound)

    def mark(self, relative: str) -> None:
        """Create an empty marker file under the root."""
        path = self._local(f"{self._root}/{relative}")
        self._fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        with self._fs.open_output_stream(path):
            pass

    def _state_path(self, name: str, batch_id: int) -> str:
        return f"{self._root}/_state/{name}/batch={batch_id:012d}"

    def _state_versions(self, name: str) -> list[int]:
        versions = []
        for found in self._list(f"{self._root}/_state/{name}"):
            if found.type == fs.FileType.Directory and found.base_name.startswith("batch="):
                done = self._fs.get_file_info(f"{found.path}/_SUCCESS")
                if done.type != fs.FileType.NotFound:
                    versions.append(int(found.base_name.removeprefix("batch=")))
        return sorted(versions)
