"""The folder of ``fpm replay --out DIR``: step and request records streamed to disk while the replay runs.

The records of each chunk of a :class:`~fpmcore.replay.ReplayRun` are
appended to the files as the chunk is made, so memory is bounded by a chunk,
never by the steps.  The folder is written as one output
(:class:`fpmcore.documents.output_files.StagedFolder`, rules ``O-1`` … ``O-6``): the files
grow in a temporary sibling folder and are published together at the end, so
a kill at any moment leaves the earlier output or the new one whole, and two
runs into the same folder leave one complete output.

Files (``FORMAT`` is ``jsonl.zst``, ``jsonl.gz`` or ``parquet``)::

    replay-steps.FORMAT       R-34 records, one per step
    replay-requests.FORMAT    R-35 records, one per completed request, in completion order
    replay-summary.json       the R-35 summary, "format" and "files": {name: sha256} of the two above
    fpm-manifest.json         the SHA-256 of every file (written last)

Formats (``fpm replay --out-format``):

``jsonl.zst`` (the default)
    one compact JSON object per line, zstd level 1 (``zstdcat``, ``jq``,
    ``pandas.read_json(lines=True)``).  On the 20,000-request benchmark
    replay (docs/guides/replaying.md) its files are as small as Parquet's (5.1 MB of step
    records against 5.2 MB; gzip: 10.1 MB) and it takes half Parquet's CPU
    time and memory.  ``fpm replay`` hands the JSON formats the records of
    a chunk as JSON lines the C library wrote (:meth:`RecordFiles.write_lines`,
    :mod:`fpmcore.replay.record_lines`), with no Python object per record.
``jsonl.gz``
    the same lines, gzip level 1, for tool chains without zstd.
``parquet``
    Apache Parquet through pyarrow (``pip install fpmcore[parquet]``),
    zstd-compressed, one row group per 4,096 steps: typed columns for
    analysis; ``scheduled`` is a list of ``{request_id, tokens,
    computed_before}`` structs and ``held_blocks_end`` a map from request id
    to the blocks held per group (:func:`read_records` gives the R-34 shapes
    back).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fpmcore.documents.errors import FpmError

if TYPE_CHECKING:
    from pathlib import Path

    from fpmcore.documents.output_files import OutputError

FORMATS = ("jsonl.zst", "jsonl.gz", "parquet")
DEFAULT_FORMAT = "jsonl.zst"
STEPS = "replay-steps"
REQUESTS = "replay-requests"
SUMMARY = "replay-summary.json"
#: zstd level of ``jsonl.zst``: level 1 is both smaller and faster than 3 on R-34 records.
ZSTD_LEVEL = 1
#: gzip level of ``jsonl.gz``.
GZIP_LEVEL = 1
#: Steps buffered into one Parquet row group.
ROW_GROUP_STEPS = 4096


def file_names(fmt: str) -> tuple[str, str]:
    """The step and request file names of a format."""
    return f"{STEPS}.{fmt}", f"{REQUESTS}.{fmt}"


def check_format(fmt: str) -> None:
    """Refuse ``parquet`` before any work when pyarrow is not installed."""
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise FpmError(
                "R-34", "--out-format parquet needs pyarrow, which is not installed; "
                "install it (pip install 'fpmcore[parquet]') or use --out-format jsonl.gz",
            ) from None  # fmt: skip


class _Jsonl:
    def __init__(self, path: Path, compression: str) -> None:
        self._raw = open(path, "xb")  # noqa: SIM115 - closed in close()
        if compression == "zst":
            import zstandard

            self._gz: Any = zstandard.ZstdCompressor(level=ZSTD_LEVEL).stream_writer(self._raw, closefd=False)
        else:
            import gzip

            self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0)

    def write(self, records: list[dict[str, Any]]) -> None:
        if records:
            from fpmcore.documents.jsonio import dumps_output

            self.write_lines(b"".join(map(dumps_output, records)))

    def write_lines(self, lines: bytes) -> None:
        """Append records already serialised as JSON lines (every record reaches the file through here)."""
        if lines:
            self._gz.write(lines)

    def close(self) -> None:
        self._gz.close()
        self._raw.close()


def _step_schema(groups: int) -> Any:
    import pyarrow as pa

    i64, f64 = pa.int64(), pa.float64()
    sched = pa.struct([("request_id", pa.string()), ("tokens", i64), ("computed_before", i64)])
    ids = pa.list_(pa.string())
    return pa.schema([
        ("step", i64), ("t_start", f64), ("t_end", f64), ("duration_s", f64), ("extrapolated", pa.bool_()),
        ("scheduled", pa.list_(sched)), ("num_prefill_requests", i64), ("sum_prefill_tokens", i64),
        ("sum_prefill_kv_tokens", i64), ("num_decode_requests", i64), ("sum_decode_kv_tokens", i64),
        ("admitted", ids), ("preempted", ids), ("finished", ids), ("rejected", ids), ("running", i64),
        ("waiting", i64), ("used_bytes_scheduled", i64), ("used_bytes_end", i64), ("used_blocks_scheduled", i64),
        ("used_blocks_end", i64), ("free_blocks", i64), ("held_blocks_end", pa.map_(pa.string(), pa.list_(i64))),
    ])  # fmt: skip


def _request_schema() -> Any:
    import pyarrow as pa

    i64, f64, s = pa.int64(), pa.float64(), pa.string()
    return pa.schema([
        ("request_id", s), ("arrival_time", f64), ("prompt_len", i64), ("output_len", i64), ("status", s),
        ("reject_reason", s), ("first_scheduled_time", f64), ("first_token_time", f64), ("finish_time", f64),
        ("output_tokens", i64), ("preemptions", i64), ("prefix_hit_tokens", i64), ("ttft_s", f64), ("tpot_s", f64),
        ("e2e_s", f64),
    ])  # fmt: skip


class _Parquet:
    def __init__(self, path: Path, schema: Any, steps: bool) -> None:
        import pyarrow.parquet as pq

        self._schema = schema
        self._steps = steps
        self._writer = pq.ParquetWriter(str(path), schema, compression="zstd")
        self._rows: list[dict[str, Any]] = []

    def write(self, records: list[dict[str, Any]]) -> None:
        if self._steps:  # [id, tokens, computed] lists as structs, the held-blocks dict as map entries
            records = [{**r, "scheduled": [tuple(x) for x in r["scheduled"]],
                        "held_blocks_end": None if r["held_blocks_end"] is None else list(r["held_blocks_end"].items())}
                       for r in records]  # fmt: skip
        self._rows.extend(records)
        if len(self._rows) >= ROW_GROUP_STEPS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self._rows:
            self._writer.write_table(pa.Table.from_pylist(self._rows, schema=self._schema))
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()


class RecordFiles:
    """The ``--out`` folder being written: stream chunks with :meth:`write`, then :meth:`publish` or :meth:`discard`.

    ``target`` must have passed :func:`fpmcore.documents.output_files.check_output_folder`.
    """

    def __init__(self, target: Path, fmt: str = DEFAULT_FORMAT, *, groups: int = 1) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown record format {fmt!r}")
        self.format = fmt
        self.names = file_names(fmt)
        from fpmcore.documents.output_files import StagedFolder

        self._stage = StagedFolder(target, replace=True, command="replay")
        try:
            steps_path, requests_path = (self._stage.file(n) for n in self.names)
            if fmt == "parquet":
                self._steps: Any = _Parquet(steps_path, _step_schema(groups), True)
                self._requests: Any = _Parquet(requests_path, _request_schema(), False)
            else:
                kind = fmt.rsplit(".", 1)[1]
                self._steps, self._requests = _Jsonl(steps_path, kind), _Jsonl(requests_path, kind)
        except BaseException:
            self._stage.discard()
            raise
        self._closed = False

    def write(self, steps: list[dict[str, Any]], requests: list[dict[str, Any]]) -> None:
        """Append the records of one chunk (a write error is ``O-5``; nothing is published)."""
        try:
            self._steps.write(steps)
            self._requests.write(requests)
        except OSError as exc:
            raise self._failed(exc) from None

    @property
    def takes_lines(self) -> bool:
        """The records are JSON lines (``jsonl.zst``, ``jsonl.gz``): :meth:`write_lines` takes them as bytes."""
        return self.format != "parquet"

    def write_lines(self, steps: bytes, requests: bytes) -> None:
        """Append the records of one chunk as JSON lines (:class:`fpmcore.replay.record_lines.RecordLines`)."""
        try:
            self._steps.write_lines(steps)
            self._requests.write_lines(requests)
        except OSError as exc:
            raise self._failed(exc) from None

    def publish(self, summary: dict[str, Any]) -> dict[str, str]:
        """Close the record files, write the summary naming their SHA-256, publish; every file's SHA-256."""
        from fpmcore.documents.jsonio import dumps_output

        try:
            self._close()
            files = {name: self._stage.digest(name) for name in self.names}
            doc = {**summary, "files": files, "format": self.format}
            with open(self._stage.file(SUMMARY), "xb") as f:
                f.write(dumps_output(doc))
        except OSError as exc:
            raise self._failed(exc) from None
        return self._stage.publish()

    def _failed(self, exc: OSError) -> OutputError:
        from fpmcore.documents.output_files import OutputError

        self.discard()
        return OutputError("O-5", f"cannot write the output: {exc.strerror or type(exc).__name__}; nothing was "
                                  "replaced", str(self._stage.target))  # fmt: skip

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self._steps.close()
            self._requests.close()

    def discard(self) -> None:
        """Drop everything written (the earlier output, if any, stays)."""
        try:
            self._close()
        except Exception:  # noqa: BLE001 - the files are removed anyway
            pass
        self._stage.discard()


def read_records(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a ``jsonl.zst``, ``jsonl.gz`` or ``parquet`` record file (for tests and analysis)."""
    name = os.fspath(path)
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
        for r in rows:  # back to the R-34 shapes
            if "scheduled" in r:
                r["scheduled"] = [[x["request_id"], x["tokens"], x["computed_before"]] for x in r["scheduled"]]
                if r["held_blocks_end"] is not None:
                    r["held_blocks_end"] = dict(r["held_blocks_end"])
        return rows
    from fpmcore.documents.jsonio import loads

    if name.endswith(".zst"):
        import io

        import zstandard

        with open(path, "rb") as raw, io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw)) as f:
            return [loads(line, str(path)) for line in f]
    import gzip

    with gzip.open(path, "rb") as f:
        return [loads(line, str(path)) for line in f]
