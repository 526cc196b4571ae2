"""`kchaos run --txn` with kills on kraft-combined: every broker's queue partition logs are
collected and decoded (KchaosSegments: the same batches and records as DumpLogSegments' text of
the same segments), and every acknowledged send still in a final log is attributed to the leader
that appended it; the verdict is valid."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from checkers.families.data_log.attribution import attribute, partition_leaders
from checkers.families.data_log.parse import read_data_logs
from checkers.families.metadata_log.check import sends_with_walls
from checkers.families.metadata_log.committed import committed_bound
from checkers.families.metadata_log.parse import read_metadata_logs
from checkers.families.metadata_log.rules import committed_records
from clusters.data_logs import dump_to_file
from clusters.kafka_dist import load_dist
from history.columnar import op_rows
from tests.integration.runs import quiet_run

NAME = "dl2"
SUBNET = "10.213.91.0/24"
SEED = 11


@pytest.fixture(scope="module")
def finished_run(docker_client, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        SEED,
        results,
        txn=True,
        time_limit=30,
        nemesis=["kill"],
        rate=30,
        final_timeout=60,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    yield done.result


def test_data_logs_are_collected_decoded_and_attributed(finished_run, tmp_path):
    run_dir = finished_run.run_dir
    data = read_data_logs(run_dir / "data")
    assert sorted(data) == ["n1", "n2", "n3"]
    assert all(log.topic == "kchaos-queue" and not log.notes for log in data.values())
    assert all(log.text_name is None for log in data.values())  # the decoder's rows
    # Each broker's rows are DumpLogSegments' text of its segments, batch for batch.
    dist = load_dist(json.loads((run_dir / "cluster.json").read_text())["version"])
    assert dist is not None
    for name, log in data.items():
        dump_to_file(dist, run_dir / "data" / f"{name}-raw", tmp_path / f"{name}.txt")
        text = read_data_logs(tmp_path)[name]
        for field in ("base", "last", "producer_id", "producer_epoch", "leader_epoch",
                      "partition", "flags", "marker", "n", "first", "position"):  # fmt: skip
            assert list(log.batches[field]) == list(text.batches[field]), (name, field)
        assert list(log.offsets) == list(text.offsets) and list(log.values) == list(text.values)
        assert log.odd == text.odd == {}
        (tmp_path / f"{name}.txt").unlink()
    meta = read_metadata_logs(run_dir / "metadata")
    bound = committed_bound(meta, 3, None)
    assert bound.last >= 0, bound.why
    committed = list(committed_records(meta, bound.last))
    sends = sends_with_walls(op_rows(pq.read_table(run_dir / "history.parquet")).to_pylist())
    assert sends, "no acknowledged sends"
    got = attribute(sends, data, partition_leaders(committed, "kchaos-queue"))
    assert got.notes == [], got.notes  # every send found in a final log has one leader
    placed = {a.op for ats in got.placed.values() for a in ats}
    assert placed, "no send attributed"
    assert all(a.leader.broker in (1, 2, 3) for ats in got.placed.values() for a in ats)
    # Acknowledged with acks=all and healed before the final reads: every one survives.
    assert got.unplaced == []


def test_verdict_is_valid(finished_run):
    results = json.loads((finished_run.run_dir / "results.json").read_text())
    assert results["status"] == "valid", results
    assert any(n.startswith("data logs:") for n in results["notes"])
