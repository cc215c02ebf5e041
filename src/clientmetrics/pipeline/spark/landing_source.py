"""The landing directory as a streaming source whose batches the pipeline names itself.

A Python data source (``pyspark.sql.datasource``, public API): its offsets
are numbered manifests the pipeline writes under its checkpoint
(``<checkpoint>/landing/<n>.json``, the files first seen for batch ``n``),
and a micro-batch is one row per share naming the landed files that share
reads. So the driver knows a batch's inputs without asking Spark's plan or
its offset log, and the pass's tasks take their files from their row.

Exactly once: a file goes into exactly one manifest; Spark logs a batch's
offset range (a range of manifests) before it runs the batch, and a replay
plans the same range, so the same files. A manifest written for a batch
Spark did not get to log is the next batch's.

Files are taken oldest first (modification time, then name), at most
``maxFilesPerTrigger`` a batch; ``Trigger.AvailableNow`` takes what was
landed when the query started.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyarrow import fs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxFiles,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

from clientmetrics.pipeline.core.schemas import LANDED_FILES
from clientmetrics.pipeline.spark.files import open_uri

#: The source's name, as ``spark.readStream.format`` takes it.
NAME = "clientmetrics_landing"
#: A batch's rows: a share, how many shares there are, and the landed files it reads.
BATCH = StructType(
    [
        StructField("share", IntegerType()),
        StructField("shares", IntegerType()),
        StructField("files", ArrayType(StringType())),
    ]
)
BATCH_ARROW = pa.schema(
    [
        pa.field("share", pa.int32()),
        pa.field("shares", pa.int32()),
        pa.field("files", pa.list_(pa.string())),
    ]
)
#: Where the manifests go, under the query's checkpoint.
MANIFESTS = "landing"


def manifest_dir(checkpoint: str) -> str:
    """The manifests' directory of a query's checkpoint (a URI or an absolute path)."""
    return f"{checkpoint.rstrip('/')}/{MANIFESTS}"


@dataclass(frozen=True, slots=True)
class _Share(InputPartition):
    share: int
    shares: int
    files: tuple[str, ...]


def listed(input_path: str) -> list[str]:
    """The landed files under ``input_path`` (``LANDED_FILES``), oldest first,
    named as ``input_path`` names them (a URI stays one).

    Names beginning with ``.`` or ``_`` are not data (docs/landing.md).
    """
    filesystem, root = open_uri(input_path)
    root = root.rstrip("/")
    try:
        found = filesystem.get_file_info(
            fs.FileSelector(root, recursive=True, allow_not_found=True)
        )
    except (FileNotFoundError, NotADirectoryError):
        return []
    files = []
    for info in found:
        relative = info.path[len(root) + 1 :]
        parts = relative.split("/")
        if (
            info.type == fs.FileType.File
            and fnmatch.fnmatchcase(relative, LANDED_FILES)
            and len(parts) == LANDED_FILES.count("/") + 1
            and not any(part.startswith((".", "_")) for part in parts)
        ):
            files.append((info.mtime_ns or 0, relative))
    base = input_path.rstrip("/")
    return [f"{base}/{relative}" for _, relative in sorted(files)]


class _Manifests:
    """The numbered manifests of a checkpoint: which files each batch took."""

    def __init__(self, directory: str) -> None:
        self._fs, self._dir = open_uri(directory)
        self._fs.create_dir(self._dir, recursive=True)
        self.count = 0
        self.known: set[str] = set()
        numbers = sorted(
            int(info.base_name.removesuffix(".json"))
            for info in self._fs.get_file_info(fs.FileSelector(self._dir))
            if info.base_name.endswith(".json") and info.base_name[:-5].isdigit()
        )
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"the landing manifests in {directory} are not 1..n: {numbers}")
        for number in numbers:
            self.known.update(self.files(number))
        self.count = len(numbers)

    def _path(self, number: int) -> str:
        return f"{self._dir}/{number:012d}.json"

    def files(self, number: int) -> list[str]:
        with self._fs.open_input_stream(self._path(number)) as stream:
            found: list[str] = json.loads(stream.read())["files"]
        return found

    def add(self, files: Sequence[str]) -> int:
        """Write the next manifest, atomically (a temporary file renamed): its number."""
        number = self.count + 1
        partial = f"{self._dir}/.{number:012d}.json.tmp"
        with self._fs.open_output_stream(partial) as stream:
            stream.write(json.dumps({"files": list(files)}).encode())
        self._fs.move(partial, self._path(number))
        self.count = number
        self.known.update(files)
        return number


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        self._input = options["path"]
        self._shares = int(options["shares"])
        self._max_files = int(options.get("maxfilespertrigger") or 0)
        self._manifests = _Manifests(options["manifests"])
        #: The files landed when an AvailableNow query started (None: no bound).
        self._until: set[str] | None = None

    def initialOffset(self) -> dict[str, int]:
        return {"manifest": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self._max_files) if self._max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = set(listed(self._input))

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        manifests = self._manifests
        if manifests.count > start["manifest"]:
            # Written for a batch Spark had not logged when it stopped: that batch, now.
            return {"manifest": start["manifest"] + 1}
        new = [
            path
            for path in listed(self._input)
            if path not in manifests.known and (self._until is None or path in self._until)
        ]
        if isinstance(limit, ReadMaxFiles):
            new = new[: limit.max_files]
        if not new:
            return start
        return {"manifest": manifests.add(new)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[_Share]:
        files = tuple(
            path
            for number in range(start["manifest"] + 1, end["manifest"] + 1)
            for path in self._manifests.files(number)
        )
        if not files:
            return []
        return [_Share(share, self._shares, files) for share in range(self._shares)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, _Share):
            raise TypeError(f"not a landing share: {partition!r}")
        yield pa.RecordBatch.from_pylist(
            [{"share": partition.share, "shares": partition.shares, "files": partition.files}],
            schema=BATCH_ARROW,
        )


class LandingSource(DataSource):
    """``spark.readStream.format("clientmetrics_landing")``: see the module's docstring.

    Options: ``path`` (the landing pushes), ``manifests`` (``manifest_dir``),
    ``shares`` (the pass's shares), ``maxFilesPerTrigger``.
    """

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return BATCH

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        # Spark hands options over with their names in lower case.
        return _Reader({key.lower(): value for key, value in self.options.items()})


def landing_stream(
    spark: SparkSession,
    input_path: str,
    checkpoint: str,
    shares: int,
    max_files_per_trigger: int | None,
) -> DataFrame:
    """The landing directory's new files, a row per share (``BATCH``) each micro-batch."""
    spark.dataSource.register(LandingSource)
    reader = (
        spark.readStream.format(NAME)
        .option("path", input_path)
        .option("manifests", manifest_dir(checkpoint))
        .option("shares", shares)
    )
    if max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", max_files_per_trigger)
    return reader.load()


def landing_batch(spark: SparkSession, files: Sequence[str], shares: int) -> DataFrame:
    """The rows the source gives a batch of ``files`` (to process a batch by hand)."""
    rows = [(share, shares, list(files)) for share in range(shares)]
    return spark.createDataFrame(rows, BATCH).repartition(max(shares, 1))
