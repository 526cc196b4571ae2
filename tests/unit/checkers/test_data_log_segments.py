"""The data-log decoder (clusters/java/KchaosSegments.java) on real segment files written by
Kafka's own MemoryRecords builder (bench/java/KchaosSegmentWriter.java): the arrays it gives
are those of the same batches as DumpLogSegments text, under every compression, and so are the
findings; a segment it cannot read whole costs only what it must, with a note."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bench.segments import write_segments
from checkers.families.data_log import segments as read_side
from checkers.families.data_log.check import DataLogRead, check_data_logs, read_run_data
from checkers.families.data_log.log import BATCH_DTYPE
from checkers.families.data_log.parse import parse_data_log, read_data_logs
from checkers.families.data_log.segments import read_decoded
from clusters import data_logs
from clusters.data_logs import decode_segments
from clusters.kafka_dist import load_dist
from tests.unit.checkers.datalogs import B, dump, segment_spec

needs_jdk = pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
# Both sides of the 4.x move of Kafka's record classes (clusters/java_tool.py).
RELEASES = ("4.4.0", "3.9.2")
# The rows' fields that both forms carry (a text without positions, and DumpLogSegments prints
# a marker's baseSequence as the hand-written dump does not: compared for data batches only).
SAME = [n for n in BATCH_DTYPE.names if n not in ("position", "segment", "base_sequence", "pad")]


def _dist(version: str = RELEASES[0]):
    dist = load_dist(version)
    if dist is None:
        pytest.skip(f"Kafka {version} is not assembled (make setup assembles it)")
    return dist


def test_the_decoders_format_is_the_readers():
    assert data_logs.DECODED_SUFFIX == read_side.DECODED_SUFFIX


_payload = st.one_of(
    st.integers(-(2**63) + 1, 2**63 - 1),
    st.integers(0, 20),
    # no value: leading zeros, "-0", words, beyond int64
    st.sampled_from(["007", "-0", "abc", "1e3", "+5", "9223372036854775808", "٣"]),
)
_batch = st.one_of(
    st.builds(
        # A producer without id has no epoch or sequence (Kafka's builder refuses them).
        lambda pid, pe, le, vs, txn, seq: B(
            pid,
            pe if pid >= 0 else -1,
            le,
            values=tuple(vs),
            txn=txn and pid >= 0,
            seq=seq if pid >= 0 else -1,
        ),
        st.sampled_from([-1, 7, 8]),
        st.integers(0, 2),
        st.integers(0, 3),
        st.lists(_payload, min_size=1, max_size=4),
        st.booleans(),
        st.integers(0, 50),
    ),
    st.builds(
        lambda pid, pe, le, m: B(pid, pe, le, marker=m),
        st.sampled_from([7, 8]),
        st.integers(0, 2),
        st.integers(0, 3),
        st.sampled_from(["COMMIT", "ABORT"]),
    ),
)
_case = st.dictionaries(
    st.sampled_from(["n1", "n2"]),
    st.dictionaries(st.integers(0, 3), st.lists(_batch, max_size=5), max_size=3),
    min_size=1,
)
# A batch's file and place, before its `<topic>-<p> offsets` or `<topic>-<p> COMMIT marker`.
CITE = re.compile(r"data/.*? (?=\S+-\d+ (?:offsets|\w+ marker))")


def _decoded(dist, root: Path, cases: list[dict], compression: str) -> Path:
    """Every broker of every case written as real segments, then decoded in one JVM."""
    spec = "".join(
        segment_spec(parts, compression=compression, under=f"c{i}-{node}-raw/")
        for i, case in enumerate(cases)
        for node, parts in case.items()
        if parts
    )
    write_segments(dist, root, spec)
    raws = {f"c{i}-{n}": root / f"c{i}-{n}-raw" for i, case in enumerate(cases) for n in case}
    assert decode_segments(dist, raws, root) == []
    return root


@needs_jdk
@pytest.mark.parametrize("version", RELEASES)
# Each example starts two JVMs: few examples of many cases each, and no shrinking (a failing
# example's cases are reported whole).
@settings(
    max_examples=3,
    deadline=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    cases=st.lists(_case, min_size=8, max_size=8),
    compression=st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
)
def test_decoded_segments_are_the_arrays_and_findings_of_their_text(
    tmp_path_factory, version, cases, compression
):
    dist = _dist(version)
    root = _decoded(dist, tmp_path_factory.mktemp("seg"), cases, compression)
    for i, case in enumerate(cases):
        text = {n: parse_data_log(dump(parts), n) for n, parts in case.items()}
        binary = {n: read_decoded(root, f"c{i}-{n}") for n in case}
        for n in case:
            t, b = text[n], binary[n]
            assert b.notes == [] and b.topic == (t.topic if t.topic else None)
            for name in SAME:
                assert list(b.batches[name]) == list(t.batches[name]), name
            data = (t.batches["flags"] & 2) == 0
            assert list(b.batches["base_sequence"][data]) == list(t.batches["base_sequence"][data])
            assert list(b.offsets) == list(t.offsets) and list(b.values) == list(t.values)
            assert b.odd == t.odd
            assert b.partition_ids == t.partition_ids
        sends = [
            {"index": 2 * k + 1, "invoke_index": 2 * k, "type": "ok", "f": "send", "process": k,
             "value": [["send", p, [o, int(v) - (o % 2)]]]}
            for k, (p, o, v) in enumerate(_writes(case))
        ]  # fmt: skip
        a = check_data_logs(DataLogRead(text), sends)
        z = check_data_logs(DataLogRead({n: read_decoded(root, f"c{i}-{n}") for n in case}), sends)
        assert _plain(a.findings) == _plain(_renamed(z.findings, f"c{i}-"))
        assert a.notes == [n.replace(f"c{i}-", "") for n in z.notes]


def _writes(case: dict) -> list[tuple[int, int, str]]:
    """Some (partition, offset, payload) of a case's value records: sends acknowledged there,
    half of them with another value (an acknowledgement the logs contradict)."""
    out = []
    for parts in case.values():
        for p, batches in parts.items():
            o = 0
            for b in batches:
                for v in () if b.marker else b.values:
                    if isinstance(v, int) and o % 3 == 0:
                        out.append((p, o, str(v)))
                    o += 1
                o += 1 if b.marker else 0
    return out[:6]


def _renamed(findings, prefix: str):
    """The decoded brokers were named `<case>-<broker>` to share one JVM."""
    return [replace(f, explanation=f.explanation.replace(prefix, "")) for f in findings]


def _plain(findings):
    """Findings with each batch's file and place left out: a text cites its line, the decoded
    rows their segment file and position."""

    def strip(x):
        if isinstance(x, str):
            return CITE.sub("data/… ", x)
        if isinstance(x, list):
            return [strip(y) for y in x]
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items()}
        return x

    return [(f.kind, f.key, f.ops, strip(f.explanation), strip(f.data)) for f in findings]


# A segment the decoder cannot read whole ------------------------------------------------------
GOOD = {0: [B(7, 0, values=(1, 2)), B(7, 0, values=(3,)), B(7, 0, marker="COMMIT")]}


def _one(tmp_path: Path, spec: str, raw: str = "n1-raw") -> Path:
    dist = _dist()
    write_segments(dist, tmp_path, spec)
    assert decode_segments(dist, {"n1": tmp_path / raw}, tmp_path) == []
    return tmp_path


@needs_jdk
def test_a_cut_file_loses_only_its_last_batch_and_says_so(tmp_path):
    spec = segment_spec(GOOD, under="n1-raw/")
    _one(tmp_path, spec)
    seg = tmp_path / "n1-raw" / "t-0" / "00000000000000000000.log"
    whole = seg.read_bytes()
    log = read_decoded(tmp_path, "n1")
    last = int(log.batches["position"][-1])
    seg.write_bytes(whole[: last + 30])  # the marker batch cut mid-way
    dist = _dist()
    assert decode_segments(dist, {"n1": tmp_path / "n1-raw"}, tmp_path) == []
    cut = read_decoded(tmp_path, "n1")
    assert list(cut.base) == [0, 2] and list(cut.values) == [1, 2, 3]
    [note] = cut.notes
    assert f"the 30 bytes from position {last} are not a whole batch" in note
    assert "data/n1-raw/t-0/00000000000000000000.log" in note


@needs_jdk
def test_a_corrupt_batch_header_stops_the_file_there_and_the_next_file_is_read(tmp_path):
    parts = {**GOOD, 1: [B(8, 0, values=(9,))]}
    spec = segment_spec(parts, under="n1-raw/")
    # After partition 0's batches: a header (offset, size, epoch, magic) whose size is 1.
    spec = spec.replace(
        "segment n1-raw/t-1/",
        "bytes 0000000000000005000000010000000002ffff\nsegment n1-raw/t-1/",
    )
    log = read_decoded(_one(tmp_path, spec), "n1")
    assert list(log.partition) == [0, 0, 0, 1] and list(log.values) == [1, 2, 3, 9]
    [note] = log.notes
    assert "t-0/00000000000000000000.log" in note and "smaller than minimum record overhead" in note
    assert "the 19 bytes from position" in note


@needs_jdk
def test_a_batch_failing_its_crc_is_kept_with_a_note_and_one_that_does_not_decode_is_left_out(
    tmp_path,
):
    _one(tmp_path, segment_spec(GOOD, under="n1-raw/"))
    seg = tmp_path / "n1-raw" / "t-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[42] ^= 0x01  # the first batch's maxTimestamp (bytes 35..42): covered by its CRC
    data[-1] ^= 0xFF  # the marker's record (the file's last batch): no longer a control record
    seg.write_bytes(bytes(data))
    assert decode_segments(_dist(), {"n1": tmp_path / "n1-raw"}, tmp_path) == []
    log = read_decoded(tmp_path, "n1")
    assert list(log.base) == [0, 2] and list(log.values) == [1, 2, 3]
    crc, left_out = log.notes
    assert "batch at position 0 (offsets 0..1) fails its CRC check" in crc
    assert "batch at position 149 (offsets 3..3) does not decode" in left_out
    assert left_out.endswith("left out")


@needs_jdk
def test_payloads_that_are_no_values_are_flagged_and_quoted(tmp_path):
    spec = "segment n1-raw/t-0/00000000000000000000.log\n"
    spec += "data 0 7 0 0 0 0 1795326812806 none 5 007 \\N abc -12\n"
    log = read_decoded(_one(tmp_path, spec), "n1")
    assert list(log.offsets) == [0, 1, 2, 3, 4] and list(log.values) == [5, 0, 0, 0, -12]
    assert log.odd == {1: "007", 2: None, 3: "abc"}
    result = check_data_logs(DataLogRead({"n1": log}), [])
    assert any("3 record(s) of t whose payload is not a decimal integer" in n for n in result.notes)
    assert log.batch(0).payloads[1] == "007" and log.batch(0).values() == [5, -12]


@needs_jdk
def test_a_run_directory_reads_the_decoded_rows_before_any_text(tmp_path):
    d = _one(tmp_path, segment_spec(GOOD, under="n1-raw/"))
    (d / "n1.txt").write_text("not read\n")
    (d / "n2.txt").write_text(dump({0: [B(7, 0, values=(4,))]}))
    logs = read_data_logs(d)
    assert sorted(logs) == ["n1", "n2"]
    assert (
        logs["n1"]
        .batch(0)
        .cite()
        .startswith(
            "data/n1-raw/t-0/00000000000000000000.log position 0 t-0 offsets 0..1 producerId 7"
        )
    )
    assert logs["n2"].batch(0).cite().startswith("data/n2.txt:3 t-0 offsets 0..0")


@needs_jdk
def test_rows_that_do_not_fit_their_index_are_one_unknown_finding(tmp_path):
    data = tmp_path / "run" / "data"
    data.mkdir(parents=True)
    _one(data, segment_spec(GOOD, under="n1-raw/"))
    records = data / "n1.records.bin"
    records.write_bytes(records.read_bytes()[:-16])  # one record row short
    read = read_run_data(tmp_path / "run")
    assert read is not None and read.error is not None and read.logs == {}
    assert "n1.records.bin: 32 bytes, 3 rows of 16 bytes expected" in str(read.error)
    result = check_data_logs(read, [])
    assert [(f.kind, f.unknown) for f in result.findings] == [("data-log-unreadable", True)]


@needs_jdk
def test_decoded_rows_shown_read_back_as_the_same_batches_and_records(tmp_path):
    from checkers.families.data_log.show import show

    parts = {0: GOOD[0], 2: [B(-1, -1, values=(5, "abc"), txn=False), B(8, 1, values=(6,))]}
    log = read_decoded(_one(tmp_path, segment_spec(parts, under="n1-raw/")), "n1")
    lines = list(show(log))
    assert lines[0] == "Dumping data/n1-raw/t-0/00000000000000000000.log"
    again = parse_data_log("\n".join(lines) + "\n", "n1")
    for name in [*SAME, "position"]:
        assert list(again.batches[name]) == list(log.batches[name]), name
    assert list(again.offsets) == list(log.offsets) and again.odd == log.odd == {4: "abc"}
