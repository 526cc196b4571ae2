"""KIP-966's last replica standing with the leader's power lost (`shutdown:elr-power-loss`, nightly:
marked slow, about 5 minutes a run), on Kafka 4.4 (kraft: 3 controllers and 3 brokers), as
docs/disk.md's "ELR and a power loss of the leader" reports it:

- ELR on (4.4's default): a restarted clean follower is elected from the ELR and every
  acknowledged send is read back, although the leader's drop took offsets of every partition
  (its record's `lost_offsets`);
- `--elr off`: no follower may lead, the partition waits for its old leader, which comes back
  on what its disk kept and leads; the clean followers truncate to it, and the acknowledged
  sends past what it kept are gone: the final reads come short by what `lost_offsets` named.

Every node runs on the disk layer with a 30 s writeback (a kernel's own, docs/disk.md), and the
run's durability options reach Kafka: the topic's configs are in the committed metadata log.
"""

from __future__ import annotations

import json

import pytest

from history.format import DURABILITY_FIELD, NEMESIS
from history.reader import read_history
from tests.integration.runs import quiet_run

pytestmark = pytest.mark.slow


def _run(docker_client, tmp_path_factory, name, subnet, **fields):
    done = quiet_run(
        docker_client,
        name,
        subnet,
        42,
        tmp_path_factory.mktemp("results"),
        version="4.4",
        topology="kraft",
        nemesis=["shutdown:elr-power-loss"],
        nemesis_interval=45,
        time_limit=110,
        rate=20,
        send_mode="sync",
        # A spec made in code gets no fresh values: the layer is named, as a new run's would be.
        disk_layer="journal",
        disk_writeback=30,
        **fields,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    return done.result


def _fault(result, f):
    ops = read_history(result.run_dir / "history.jsonl").ops
    (op,) = [o for o in ops if o["process"] == NEMESIS and o["f"] == f and o["type"] == "ok"]
    return op["value"]


@pytest.fixture(scope="module")
def elr_on(docker_client, tmp_path_factory):
    return _run(docker_client, tmp_path_factory, "elr-pl", "10.213.213.0/24")


@pytest.fixture(scope="module")
def elr_off(docker_client, tmp_path_factory):
    return _run(
        docker_client,
        tmp_path_factory,
        "elr-pl-off",
        "10.213.214.0/24",
        elr="off",
        unclean_leader_election=False,
    )


def test_with_elr_a_clean_follower_leads_and_nothing_acknowledged_is_lost(elr_on):
    start, stop = _fault(elr_on, "start-shutdown"), _fault(elr_on, "stop-shutdown")
    leader = start["leader"]
    assert stop["elected"] in start["followers"], stop
    # The leader's power loss took written offsets: the record names them per partition.
    lost = start["dropped"][leader]["lost_offsets"]
    assert any(p.startswith("kchaos-queue-") and None not in r for p, r in lost.items()), lost
    reads = elr_on.summary["final_reads"]
    assert reads["read_acknowledged"] == reads["acknowledged"] > 0
    assert elr_on.summary["check"]["status"] == "valid", elr_on.summary


def test_without_elr_the_old_leader_leads_on_what_its_disk_kept(elr_off):
    start, stop = _fault(elr_off, "start-shutdown"), _fault(elr_off, "stop-shutdown")
    assert stop["elected"] is None  # no follower could lead: the partition waited
    lost = start["dropped"][start["leader"]]["lost_offsets"]
    reads = elr_off.summary["final_reads"]
    # What the followers had and acknowledged is gone with what the leader's disk dropped: each
    # partition's log ends where the leader's kept part did.
    assert reads["read_acknowledged"] < reads["acknowledged"]
    for key, end in reads["high_watermarks"].items():
        first, _ = lost[f"kchaos-queue-{key}"]
        assert end == first, (key, end, lost)
    header = read_history(elr_off.run_dir / "history.jsonl").header
    assert header[DURABILITY_FIELD]["elr"] is False
    # Judged as Kafka's documented behaviour: the last replica standing lost power, ELR off.
    results = json.loads((elr_off.run_dir / "results.json").read_text())
    kinds = {f["kind"] for f in results["findings"]}
    assert kinds == {"lost-write-power-loss-documented"}, kinds
    assert all(f["tolerated"] for f in results["findings"])


def test_the_durability_options_reach_the_topic_and_the_features(elr_off):
    plan = json.loads((elr_off.run_dir / "plan.json").read_text())
    assert plan["generator"]["elr"] is False and plan["spec"]["elr"] == "off"
    records = []
    for path in (elr_off.run_dir / "metadata").glob("c*.txt"):
        for line in path.read_text().splitlines():
            if '"CONFIG_RECORD"' in line and '"kchaos-queue"' in line:
                records.append(json.loads(line[line.index("{") :])["data"])
            # A FeatureLevelRecord of level 0 is never written: formatted at 0, none is there.
            if '"FEATURE_LEVEL_RECORD"' in line and "eligible.leader.replicas.version" in line:
                pytest.fail(f"a committed ELR level with --elr off: {line}")
    configs = {r["name"]: r["value"] for r in records}
    assert configs["min.insync.replicas"] == "2"
    assert configs["unclean.leader.election.enable"] == "false"
