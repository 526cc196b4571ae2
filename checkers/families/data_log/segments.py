"""Reading the data-log decoder's files (clusters/java/KchaosSegments.java) of one broker:

- `data/<broker>.decoded.json`: the format, topic, counts, each segment file read (its
  partition, size, the bytes decoded, its first batch and record rows), notes on what could not
  be read, and the payloads that are not decimal int64s (`odd`: [record row, text or null]);
  written last, so that a broker without it was not decoded whole;
- `data/<broker>.batches.bin`: log.BATCH_DTYPE rows, 80 bytes each, little-endian;
- `data/<broker>.records.bin`: (offset, value) int64 pairs, one per data record.

docs/history.md ("Files beside the history") has the layout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from checkers.families.data_log.log import BATCH_DTYPE, RECORD_DTYPE, DataLog

FORMAT = "kchaos-segments 1"
DECODED_SUFFIX = ".decoded.json"
BATCHES_SUFFIX = ".batches.bin"
RECORDS_SUFFIX = ".records.bin"


class SegmentsError(Exception):
    """Decoded files that do not fit together; the message says which and how."""


def read_decoded(directory: Path, node: str) -> DataLog:
    index_path = directory / f"{node}{DECODED_SUFFIX}"
    try:
        index: dict[str, Any] = json.loads(index_path.read_text())
    except (OSError, ValueError) as e:
        raise SegmentsError(f"cannot read: {e}") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise SegmentsError(f"not {FORMAT!r} (format {index.get('format')!r})")
    batches = _rows(directory / f"{node}{BATCHES_SUFFIX}", BATCH_DTYPE, index.get("batches"))
    raw = _rows(directory / f"{node}{RECORDS_SUFFIX}", RECORD_DTYPE, index.get("records"))
    offsets = np.ascontiguousarray(raw["offset"])
    values = np.ascontiguousarray(raw["value"])
    del raw
    segments = index.get("segments") or []
    files = [str(s["file"]) for s in segments]
    n = batches["n"].astype(np.int64)
    if len(batches) and (
        np.any(batches["first"] != np.concatenate(([0], np.cumsum(n)[:-1])))
        or int(n.sum()) != len(offsets)
        or np.any((batches["segment"] < 0) | (batches["segment"] >= len(files)))
    ):
        raise SegmentsError(f"{node}{BATCHES_SUFFIX} does not fit {node}{RECORDS_SUFFIX}")
    odd = {int(row): text for row, text in index.get("odd") or []}
    with_batches = {int(p) for p in np.unique(batches["partition"])}
    empty = tuple(sorted({int(s["partition"]) for s in segments} - with_batches))
    return DataLog(
        node,
        index.get("topic"),
        batches,
        offsets,
        values,
        odd,
        files,
        [str(x) for x in index.get("notes") or []],
        empty_partitions=empty,
    )


def _rows(path: Path, dtype: np.dtype, expected: object) -> np.ndarray:
    try:
        rows = np.fromfile(path, dtype=dtype)
    except (OSError, ValueError) as e:
        raise SegmentsError(f"cannot read {path.name}: {e}") from None
    size = path.stat().st_size
    if size % dtype.itemsize or len(rows) != expected:
        raise SegmentsError(
            f"{path.name}: {size} bytes, {expected} rows of {dtype.itemsize} bytes expected"
        )
    return rows
