"""`kchaos-disk batches` (kafka_batches.cpp): the record batches of hand-built and generated
segment files past a byte length, as a power loss's record names their offsets. The program is
the one runs mount (ensure_layer: built once per source digest into kchaos's cache, which runs
and the integration tests use too); selftest.cpp checks the walk's edge cases in-process."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters import disk_layer

pytestmark = [
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
    pytest.mark.skipif(
        not Path(disk_layer.FUSE_INCLUDE, "fuse_lowlevel.h").exists(),
        reason="libfuse3-dev is not installed",
    ),
]


def batch(base: int, count: int, body: int = 0, magic: int = 2) -> bytes:
    """A record batch as Kafka lays it out: v2's 61-byte header (baseOffset, batchLength,
    partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, timestamps, producer id,
    epoch, base sequence, record count) and ``body`` bytes of records; the bytes the walk does
    not read are left zero."""
    header = struct.pack(">qiibIhi", base, 49 + body, 0, magic, 0, 0, count - 1)
    return header + bytes(61 - len(header) + body)


@pytest.fixture(scope="module")
def program() -> Path:
    return disk_layer.ensure_layer(say=lambda _: None) / disk_layer.PROGRAM


def walk(program: Path, root: Path, *pairs: tuple[str, int]) -> list[dict]:
    words = [w for path, length in pairs for w in (path, str(length))]
    proc = subprocess.run(
        [str(program), "batches", "--root", str(root), *words],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return disk_layer.answer(proc.stdout)["files"]


def test_a_segment_cut_at_its_durable_length_names_the_batches_past_it(program, tmp_path):
    part = tmp_path / "data" / "kchaos-queue-3"
    part.mkdir(parents=True)
    seg = batch(0, 3, 40) + batch(3, 1, 10) + batch(4, 5, 100)
    (part / "00000000000000000000.log").write_bytes(seg)
    first = len(batch(0, 3, 40))
    path = "data/kchaos-queue-3/00000000000000000000.log"
    (cut,) = walk(program, tmp_path, (path, first + 1))
    assert cut == {
        "path": path, "from": first + 1, "size": len(seg), "batches": 3, "lost": 2,
        "first": 3, "last": 8,
    }  # fmt: skip
    (kept,) = walk(program, tmp_path, (path, len(seg)))
    assert kept["lost"] == 0 and "first" not in kept
    (missing,) = walk(program, tmp_path, ("data/nothing/00000000000000000000.log", 0))
    assert missing["error"] == "No such file or directory"


def test_a_header_that_is_no_batch_stops_the_walk_and_says_where(program, tmp_path):
    seg = batch(10, 2) + b"\0" * 64
    (tmp_path / "s.log").write_bytes(seg)
    (w,) = walk(program, tmp_path, ("s.log", 0))
    assert (w["batches"], w["lost"], w["first"], w["last"]) == (1, 1, 10, 11)
    assert w["error"].startswith("no batch header at byte 61") and w["walked_to"] == 61


def test_bad_arguments_are_the_usage_line(program, tmp_path):
    for args in (["batches"], ["batches", "a"], ["batches", "a", "-1"], ["batches", "a", "x"]):
        proc = subprocess.run([str(program), *args], capture_output=True, text=True)
        assert proc.returncode == 2 and "usage: kchaos-disk" in proc.stderr


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 50), st.integers(0, 3000)), min_size=0, max_size=30),
    start=st.integers(0, 2**40),
    cut_at=st.floats(0, 1),
    torn=st.integers(0, 80),
)
def test_generated_segments_lose_exactly_the_batches_past_the_cut(
    program, tmp_path, sizes, start, cut_at, torn
):
    seg, ends, offsets, base = b"", [], [], start
    for count, body in sizes:
        seg += batch(base, count, body)
        ends.append(len(seg))
        offsets.append((base, base + count - 1))
        base += count
    # A write cut short: part of one more batch at the end (a header of 12 bytes or more is
    # read, a shorter one is said).
    tail = batch(base, 2, 50)[:torn]
    seg += tail
    cut = int(len(seg) * cut_at)
    (tmp_path / "p-0").mkdir(exist_ok=True)
    (tmp_path / "p-0" / "s.log").write_bytes(seg)
    (w,) = walk(program, tmp_path, ("p-0/s.log", cut))
    lost = [o for o, end in zip(offsets, ends, strict=True) if end > cut]
    if torn >= 12:
        lost.append((base, base + 1 if torn >= 27 else base))
    elif torn and len(seg) > cut:
        assert w["error"].startswith(f"a header cut short at byte {ends[-1] if ends else 0}")
    assert w["batches"] == len(sizes) + (torn >= 12)
    assert w["lost"] == len(lost)
    if lost:
        assert (w["first"], w["last"]) == (lost[0][0], lost[-1][1])
    else:
        assert "first" not in w
    json.dumps(w)
