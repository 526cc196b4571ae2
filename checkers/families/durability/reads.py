"""The final reads (docs/history.md, "Final reads"): after the run's heal, one fresh client
assigns every partition from the beginning and polls until it read every acknowledged send
or reached each partition's end. Their records, as arrays, read from the columnar history's
poll elements invoked after the heal (nothing else polls then: the workers have stopped)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history.columnar import element_row_groups, read_element_row_group
from history.effects import HEAL

POLL = "poll"


@dataclass
class FinalReads:
    after: int  # run ns: polls invoked at or after it (the heal's completion)
    key: np.ndarray
    offset: np.ndarray
    value: np.ndarray
    op: np.ndarray

    def of(self, key: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, values, ops) the final reads returned of `key`."""
        m = self.key == key
        return self.offset[m], self.value[m], self.op[m]

    def top(self, key: int) -> int:
        """The highest offset returned of `key`; -1 when none."""
        offs = self.offset[self.key == key]
        return int(offs.max()) if len(offs) else -1

    @classmethod
    def from_parquet(cls, path: str | Path, after: int) -> FinalReads:
        """Element rows are stored in their ops' order, so the final reads are in the last row
        groups: one whose `invoke_time` statistics end before `after` is never decoded."""
        parts = []
        meta = pq.ParquetFile(path).metadata
        for i in element_row_groups(path):
            if _ends_before(meta.row_group(i), after):
                continue
            rg = read_element_row_group(
                path, i, ["kind", "key", "offset", "value", "invoke_time", "index"]
            )
            keep = pc.and_(
                pc.and_(pc.equal(rg.column("kind"), POLL), pc.is_valid(rg.column("offset"))),
                pc.and_(
                    pc.is_valid(rg.column("value")),
                    pc.greater_equal(rg.column("invoke_time"), after),
                ),
            )
            rg = rg.filter(pc.fill_null(keep, False))
            if rg.num_rows:
                parts.append(
                    [np.asarray(rg.column(c).to_numpy(), np.int64)
                     for c in ("key", "offset", "value", "index")]
                )  # fmt: skip
        if not parts:
            empty = np.zeros(0, np.int64)
            return cls(after, empty, empty, empty, empty)
        key, offset, value, op = (np.concatenate(c) for c in zip(*parts, strict=True))
        return cls(after, key, offset, value, op)


def heal_end(nemesis_rows: list[dict]) -> int | None:
    """The completion of the run's last heal: the final reads come after it. None without one."""
    ends = [int(r["time"]) for r in nemesis_rows if r["f"] == HEAL and r["type"] == "ok"]
    return max(ends) if ends else None


def _ends_before(rg: pq.RowGroupMetaData, after: int) -> bool:
    for j in range(rg.num_columns):
        col = rg.column(j)
        if col.path_in_schema == "invoke_time":
            st = col.statistics
            return bool(st is not None and st.has_min_max and st.max < after)
    return False
