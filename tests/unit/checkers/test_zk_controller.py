"""ZooKeeper-mode controller epochs: real log excerpts, hand-written cases and their near misses,
and generated logs of brokers that follow Kafka's epoch rule (never a finding) or break it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.zk_controller.check import check_run_zk
from checkers.families.zk_controller.parse import parse_log
from checkers.families.zk_controller.rules import reused_epochs, stale_epochs

DATA = Path(__file__).parent / "data" / "zk_failover"
F = "logs/b1/stdout.log"


def stamp(i: int) -> str:
    return f"[2026-11-22 05:{10 + i // 60:02d}:{i % 60:02d},000]"


# The wording of Kafka 3.9 (KafkaServer, KafkaController, ReplicaManager, ZkMetadataCache).
def start(i: int) -> str:
    return f"{stamp(i)} INFO starting (kafka.server.KafkaServer)"


def elected(i: int, c: int, e: int) -> str:
    return (
        f"{stamp(i)} INFO [Controller id={c}] {c} successfully elected as the controller. Epoch "
        f"incremented to {e} and epoch zk version is now {e} (kafka.controller.KafkaController)"
    )


def acts(i: int, c: int, e: int) -> str:
    return (
        f"{stamp(i)} INFO [Controller id={c} epoch={e}] Sending UpdateMetadata request to brokers "
        "HashSet(1, 2, 3) for 1 partitions (state.change.logger)"
    )


def leader(i: int, b: int, c: int, e: int) -> str:
    return (
        f"{stamp(i)} INFO [Broker id={b}] Stopped fetchers as part of LeaderAndIsr request "
        f"correlationId 7 from controller {c} epoch {e} as part of the become-leader transition "
        "for 2 partitions (state.change.logger)"
    )


def follower(i: int, b: int, c: int, e: int) -> str:
    return (
        f"{stamp(i)} INFO [Broker id={b}] Stopped fetchers as part of become-follower request "
        f"from controller {c} epoch {e} with correlation id 7 for 3 partitions "
        "(state.change.logger)"
    )


def metadata(i: int, b: int, c: int, e: int) -> str:
    return (
        f"{stamp(i)} INFO [Broker id={b}] Add 1 partitions and deleted 0 partitions from metadata "
        f"cache in response to UpdateMetadata request sent by controller {c} epoch {e} with "
        "correlation id 6 (state.change.logger)"
    )


def refused_lisr(i: int, b: int, c: int, e: int, known: int) -> str:
    return (
        f"{stamp(i)} WARN [Broker id={b}] Ignoring LeaderAndIsr request from controller {c} with "
        f"correlation id 4 since its controller epoch {e} is old. Latest known controller epoch "
        f"is {known} (state.change.logger)"
    )


def refused_um(i: int, b: int, c: int, e: int, known: int) -> str:
    return (
        f"{stamp(i)} WARN [Broker id={b}] Received update metadata request with correlation id 6 "
        f"from an old controller {c} with epoch {e}. Latest known controller epoch is {known} "
        "(state.change.logger)"
    )


def log(*lines: str) -> list:
    return parse_log("\n".join(lines) + "\n", F)


def test_every_line_kind_parses_with_its_numbers():
    events = log(
        start(0),
        elected(1, 2, 5),
        acts(2, 2, 5),
        leader(3, 1, 2, 5),
        follower(4, 1, 2, 5),
        metadata(5, 1, 2, 5),
        refused_lisr(6, 1, 3, 4, 5),
        refused_um(7, 1, 3, 4, 5),
        f"{stamp(8)} INFO [Controller id=2] Resigned (kafka.controller.KafkaController)",
        f"{stamp(9)} INFO [GroupCoordinator 1]: Resigned as the group coordinator for partition 3",
    )
    got = [(e.kind, e.node_id, e.controller, e.epoch, e.known, e.line) for e in events]
    assert got == [
        ("start", None, None, None, None, 1),
        ("elected", 2, None, 5, None, 2),
        ("acts", 2, None, 5, None, 3),
        ("accepted", 1, 2, 5, None, 4),
        ("accepted", 1, 2, 5, None, 5),
        ("accepted", 1, 2, 5, None, 6),
        ("refused", 1, 3, 4, 5, 7),
        ("refused", 1, 3, 4, 5, 8),
        ("resigned", 2, None, None, None, 9),
    ]
    assert events[3].cite() == f"{F}:4"


def test_a_stack_trace_repeating_a_refusal_is_not_a_second_event():
    text = refused_um(1, 2, 3, 1, 2) + "\norg.apache.kafka.common.errors.ControllerMovedException: "
    text += refused_um(1, 2, 3, 1, 2).split(" WARN ", 1)[1]
    assert [e.kind for e in parse_log(text, F)] == ["refused"]


def test_real_failover_is_valid_and_measured(tmp_path):
    """Kafka 3.9.2, partition {b1,b3}|{b2,zk}: b3 (epoch 1) deposed, b2 elected in epoch 2."""
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    result = check_run_zk(tmp_path, [])
    assert result is not None and result.checked
    assert result.findings == []
    assert result.stats["failovers"] == 1 and result.stats["epochs"] == [1, 2]
    assert result.stats["requests_refused_as_stale"] == 1
    overlap = [n for n in result.notes if "still acted as controller" in n]
    # b3 kept sending in epoch 1 after b2's election; b2 refused, b3's own broker (not yet told
    # of epoch 2) acted on it: both cited.
    assert len(overlap) == 1
    assert "controller 3 (epoch 1)" in overlap[0] and "elected in epoch 2" in overlap[0]
    assert "logs/b2/stdout.log:" in overlap[0] and "refused 1 as stale" in overlap[0]
    assert "acted on 1 of its requests (logs/b3/stdout.log:29)" in overlap[0]


def test_acting_on_an_older_epoch_after_a_newer_one_is_a_finding():
    found = stale_epochs(log(start(0), follower(1, 1, 2, 2), leader(2, 1, 3, 1)))
    assert [f.kind for f in found] == ["stale-controller-epoch-accepted"]
    assert found[0].data["lines"] == [f"{F}:2", f"{F}:3"]
    assert "controller epoch 1" in found[0].explanation and "epoch 2" in found[0].explanation
    assert "KIP-866" in found[0].explanation


def test_acting_after_refusing_a_newer_known_epoch_is_a_finding():
    # The refusal says the broker knew epoch 4; acting on 3 afterwards breaks the rule.
    found = stale_epochs(log(refused_um(1, 1, 2, 2, 4), metadata(2, 1, 3, 3)))
    assert len(found) == 1 and found[0].data["epochs"] == [4, 3]


def test_latest_known_epoch_going_back_is_a_finding():
    found = stale_epochs(log(leader(1, 1, 3, 5), refused_lisr(2, 1, 2, 2, 4)))
    assert len(found) == 1 and "latest known controller epoch was 4" in found[0].explanation


def test_near_misses_of_the_stale_rule():
    # The same epoch again, a newer one, refusals of older ones: fencing working.
    assert stale_epochs(log(leader(1, 1, 2, 2), follower(2, 1, 2, 2), metadata(3, 1, 3, 3))) == []
    assert stale_epochs(log(metadata(1, 1, 3, 3), refused_lisr(2, 1, 2, 2, 3))) == []
    # A restarted broker starts from epoch 0 again: an older epoch after it is Kafka's rule.
    assert stale_epochs(log(leader(1, 1, 3, 3), start(2), metadata(3, 1, 2, 2))) == []


def test_one_epoch_two_controllers_is_a_finding():
    b1 = log(elected(1, 1, 3), acts(2, 1, 3))
    b2 = parse_log(elected(5, 2, 3), "logs/b2/stdout.log")
    found = reused_epochs([*b1, *b2])
    assert [f.kind for f in found] == ["controller-epoch-reused"]
    assert found[0].data["controllers"] == [1, 2]
    assert found[0].data["lines"] == [f"{F}:1", "logs/b2/stdout.log:1"]


def test_a_broker_taking_one_epoch_from_two_controllers_is_a_finding():
    found = reused_epochs(log(leader(1, 1, 2, 4), metadata(2, 1, 3, 4)))
    assert len(found) == 1 and found[0].data["epoch"] == 4


def test_near_misses_of_the_reuse_rule():
    # One controller re-elected later takes a new epoch; epoch 0 (no election yet) is no claim.
    assert reused_epochs(log(elected(1, 1, 3), elected(2, 1, 4), leader(3, 2, 1, 4))) == []
    zero = log(acts(1, 1, 0), f"{stamp(2)} INFO [Controller id=2 epoch=0] Sending x (s)")
    assert reused_epochs(zero) == []


def _cluster(tmp_path: Path, topology: str = "zk") -> None:
    nodes = [{"name": "z1", "roles": ["zookeeper"], "node_id": 1}]
    nodes += [{"name": f"b{i}", "roles": ["broker"], "node_id": i} for i in (1, 2, 3)]
    (tmp_path / "cluster.json").write_text(json.dumps({"topology": topology, "nodes": nodes}))


def _write(tmp_path: Path, node: str, *lines: str) -> None:
    (tmp_path / "logs" / node).mkdir(parents=True, exist_ok=True)
    (tmp_path / "logs" / node / "stdout.log").write_text("\n".join(lines) + "\n")


def test_not_a_zk_run_is_not_judged(tmp_path):
    _cluster(tmp_path, "kraft")
    _write(tmp_path, "b1", elected(1, 1, 1))
    assert check_run_zk(tmp_path, []) is None
    assert check_run_zk(tmp_path / "nowhere", []) is None


def test_zk_run_without_evidence_is_unknown_and_names_missing_logs(tmp_path):
    _cluster(tmp_path)
    _write(tmp_path, "b1", start(0))
    result = check_run_zk(tmp_path, [])
    assert not result.checked
    assert [f.kind for f in result.findings] == ["zk-controller-epochs-unknown"]
    assert result.findings[0].unknown
    assert "no log of b2, b3" in result.notes[0]


def test_check_of_a_zk_run_directory_reports_a_stale_acceptance(tmp_path):
    from checkers.api import check
    from tests.unit.checkers.histories import H

    _cluster(tmp_path)
    _write(tmp_path, "b1", start(0), elected(1, 1, 1), acts(2, 1, 1))
    _write(tmp_path, "b2", start(0), elected(9, 2, 2), metadata(10, 2, 2, 2), metadata(12, 2, 1, 1))
    H().send(0, 0, 1, 0).poll(1, {0: [(0, 1)]}).write(tmp_path)
    verdict = check(tmp_path, engine="local")
    assert verdict.status == "invalid"
    assert [f.kind for f in verdict.findings] == ["stale-controller-epoch-accepted"]
    assert verdict.stats["zk_controller"]["failovers"] == 1


# Generated: controllers elected in rising epochs send requests; each broker receives them in
# any order, acting on a request as Kafka does (epoch >= the latest it knows) and refusing the
# rest, and may restart. Such logs never yield a finding; one stale acceptance always does.
requests = st.lists(
    st.tuples(st.integers(1, 3), st.integers(1, 5), st.booleans(), st.sampled_from("lfmr")),
    max_size=30,
)


def _broker_log(b: int, reqs: list[tuple[int, int, bool, str]], bug_at: int | None) -> list[str]:
    lines, known = [start(0)], 0
    for i, (_, epoch, restart, how) in enumerate(reqs, 1):
        c = epoch % 3 + 1  # one controller per epoch, as ZooKeeper's election guarantees
        if restart:
            lines.append(start(i))
            known = 0
        if epoch >= known or i == bug_at:
            line = {"l": leader, "f": follower, "m": metadata, "r": metadata}[how]
            lines.append(line(i, b, c, epoch))
            known = max(known, epoch)
        else:
            refuse = refused_lisr if how in "lf" else refused_um
            lines.append(refuse(i, b, c, epoch, known))
    return lines


@settings(max_examples=300, deadline=None)
@given(requests)
def test_brokers_following_the_epoch_rule_never_alarm(reqs):
    events = log(*_broker_log(1, reqs, None))
    assert stale_epochs(events) == [] and reused_epochs(events) == []


@settings(max_examples=200, deadline=None)
@given(requests, st.integers(1, 4))
def test_a_broker_acting_on_a_stale_epoch_is_always_found(reqs, bug_epoch):
    # Epoch 5 is always taken; the request after it, at an older epoch, is acted on anyway.
    bugged = [*reqs, (1, 5, False, "f"), (1, bug_epoch, False, "m")]
    found = stale_epochs(log(*_broker_log(1, bugged, len(bugged))))
    assert [f.kind for f in found] == ["stale-controller-epoch-accepted"]
    assert found[0].data["epochs"] == [5, bug_epoch]
