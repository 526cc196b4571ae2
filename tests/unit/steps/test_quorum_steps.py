"""Controller membership steps (steps/quorum_steps.py): planned from the seed, carried out by the
upgrade driver's handlers with Kafka's tool scripted, each ending ok, fail or info by Jepsen's
rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import steps.quorum_steps as qs
from clusters.capabilities import ExecResult
from clusters.cluster import ClusterInfo
from clusters.kafka_dist import KafkaDist
from clusters.topology import build_topology
from harness.plan import build_plan, load_plan
from harness.run.recorder import Recorder
from harness.spec import RunSpec, SpecError, spec_from_dict
from history.reader import read_history
from steps.quorum_steps import (
    ADD,
    CONFIGURE,
    REMOVE,
    REPROVISION,
    QuorumSteps,
    final_observation,
    membership_units,
    quorum_schedule,
)
from steps.upgrade import FEATURES, UpgradeDriver, UpgradeStep

D1, D2, D3, NEW = (
    "qMmcoDlResQrnunjVY0EtA",
    "lo5JMOVaIDSdoOnSI0HC2w",
    "uGm086Yp4TcTo3CghM1CIQ",
    "h8W",
)


# Planning --------------------------------------------------------------------------------------
def test_a_static_quorum_plans_nothing_and_its_plan_is_unchanged():
    assert quorum_schedule("kraft", 150, 1, None) == []
    assert quorum_schedule("kraft", 150, 1, "static") == []
    plain = build_plan(RunSpec(), 7).to_json()
    assert build_plan(spec_from_dict({"quorum": "static"}), 7).to_json() == plain
    assert "quorum" not in json.loads(plain)["spec"]


def test_dedicated_controllers_are_removed_reprovisioned_and_added_back():
    steps = quorum_schedule("kraft", 150, 3, "dynamic")
    assert [s.step for s in steps] == [REMOVE, REPROVISION, ADD]
    assert len({s.node for s in steps}) == 1 and steps[0].node.startswith("c")
    assert 0.15 * 150 <= steps[0].at_s <= 0.2 * 150 <= 0.4 * 150 <= steps[1].at_s <= 0.45 * 150


def test_combined_nodes_are_removed_and_added_back_without_a_wipe():
    steps = quorum_schedule("kraft-combined", 150, 3, "dynamic")
    assert [s.step for s in steps] == [REMOVE, ADD] and steps[0].node.startswith("n")


@pytest.mark.parametrize(
    ("topology", "quorum"),
    [
        ("kraft", "dynamic"),
        ("kraft-combined", "dynamic"),
        ("kraft", "static-to-dynamic"),
        ("kraft", "dynamic-auto-join"),
    ],
)
def test_a_shrink_drops_a_removal_with_its_addition_back_never_one_alone(topology, quorum):
    feature = UpgradeStep(1.0, FEATURES, "b1", {"action": "upgrade", "feature": "x", "level": 1})
    steps = [feature, *quorum_schedule(topology, 150, 3, quorum)]
    units = membership_units(steps)
    assert sorted(i for u in units for i in u) == list(range(len(steps)))  # each step once
    (membership,) = [u for u in units if any(steps[i].step == REMOVE for i in u)]
    # The removal's moment and the addition's: one unit (an addition alone would fail).
    assert {steps[i].step for i in membership} >= {REMOVE} | (
        {"await-auto-join"} if quorum == "dynamic-auto-join" else {ADD}
    )
    assert len({steps[i].at_s for i in membership}) == 2 and [0] in units


def test_from_static_kraft_version_goes_to_1_and_every_node_is_reconfigured_first():
    steps = quorum_schedule("kraft", 300, 4, "static-to-dynamic")
    assert steps[0].step == FEATURES and steps[0].node.startswith("b")
    assert steps[0].params == {
        "action": "upgrade",
        "feature": "kraft.version",
        "level": 1,
        "dry_run": False,
    }
    assert sorted(s.node for s in steps if s.step == CONFIGURE) == [
        "b1", "b2", "b3", "c1", "c2", "c3"
    ]  # fmt: skip
    assert [s.step for s in steps[7:]] == [REMOVE, REPROVISION, ADD]
    assert [s.at_s for s in steps] == sorted(s.at_s for s in steps)


def test_quorum_steps_come_after_an_upgrades_and_replay_from_plan_json(tmp_path):
    spec = spec_from_dict({"quorum": "dynamic", "version": "3.9", "upgrade_to": "4.1"})
    plan = build_plan(spec, 5)
    assert [s.step for s in plan.steps_of("upgrade")[-2:]] == [REMOVE, ADD]
    assert plan.steps_of("upgrade")[0].step == "roll"
    assert build_plan(spec, 5).to_json() == plan.to_json()
    (tmp_path / "plan.json").write_text(plan.to_json())
    assert load_plan(tmp_path).steps_of("upgrade") == plan.steps_of("upgrade")
    assert json.loads(plan.to_json())["spec"]["quorum"] == "dynamic"


def test_the_spec_refuses_a_quorum_kafka_cannot_have():
    with pytest.raises(SpecError, match=r"--quorum: dynamic needs Kafka 3\.9 or newer"):
        spec_from_dict({"quorum": "dynamic", "version": "3.8"})
    with pytest.raises(SpecError, match="unknown quorum"):
        spec_from_dict({"quorum": "joint"})


# Carrying them out against a scripted Kafka -----------------------------------------------------
STATUS = (
    "LeaderId:               {leader}\nLeaderEpoch:            {epoch}\n"
    "HighWatermark:          90\nCurrentVoters:          [{voters}]\nCurrentObservers:       []\n"
)


def status(voters: list[tuple[int, str]], leader: int = 2, epoch: int = 4) -> str:
    text = ", ".join(f'{{"id": {i}, "directoryId": "{d}", "endpoints": []}}' for i, d in voters)
    return STATUS.format(leader=leader, epoch=epoch, voters=text)


class Kafka:
    """The voter set, and what each tool invocation answers (scripted per subcommand)."""

    def __init__(self, answers: dict[str, list[tuple[int, str, str]]]) -> None:
        self.voters = [(1, D1), (2, D2), (3, D3)]
        self.answers = answers
        self.calls: list[str] = []

    def run(self, node: str, cmd: list[str]) -> ExecResult:
        sub = next(a for a in ("describe", "remove-controller", "add-controller") if a in cmd)
        self.calls.append(f"{sub}@{node}")
        if sub == "describe":
            return ExecResult(0, status(self.voters), "")
        code, out, err = self.answers[sub].pop(0)
        if code == 0 and sub == "remove-controller":
            self.voters = [v for v in self.voters if v[0] != 3]
        if code == 0 and sub == "add-controller":
            self.voters.append((3, NEW))
        return ExecResult(code, out, err)


class FakeNode:
    def __init__(self, spec: Any, kafka: Kafka) -> None:
        self.spec, self.kafka = spec, kafka
        self.files: dict[str, str] = {f"{qs.CONF_DIR}/server.properties": "node.id=3\n"}
        self.files[qs.META_PROPERTIES] = f"node.id=3\ndirectory.id={NEW}\n"
        self.running = True
        self.events: list[str] = []

    @property
    def name(self) -> str:
        return self.spec.name

    def exec(self, cmd: list[str], timeout: float | None = None) -> ExecResult:
        return self.kafka.run(self.name, cmd)

    def put_file(self, path: str, content: str) -> None:
        self.files[path] = content

    def put_files(self, files: dict[str, str]) -> None:
        self.files.update(files)
        self.events.append("put " + ",".join(sorted(files)))

    def get_file(self, path: str) -> bytes:
        return self.files[path].encode()

    def is_running(self) -> bool:
        return self.running

    def stop(self, timeout: float = 30) -> None:
        self.running = False
        self.events.append("stop")

    def start(self) -> None:
        self.running = True
        self.events.append("start")


def jmx(node: Any) -> dict[str, Any]:
    leader = 2
    return {"raft": {"state": "follower", "leader": leader, "epoch": 4, "high_watermark": 9}}


@pytest.fixture(autouse=True)
def no_jmx(monkeypatch):
    monkeypatch.setattr(qs, "node_sample", jmx)
    monkeypatch.setattr(qs, "quorum_agreed", lambda nodes: (True, {"leader": 2, "epoch": 4}))


def drive(tmp: Path, topology: str, steps: list[UpgradeStep], kafka: Kafka, timeout: float = 5):
    topo = build_topology(topology, quorum="dynamic")
    info = ClusterInfo(topo, "3.9.2", "fast", "cid")
    dist = KafkaDist("3.9.2", Path("/x"), {"metadata_quorum": "Q", "kafka": "K", "storage": "S"})
    nodes = {n.name: FakeNode(n, kafka) for n in topo.nodes}
    rec = Recorder(tmp / "history.jsonl", "test")
    handlers = QuorumSteps(info).handlers()
    driver = UpgradeDriver(steps, info, {"3.9.2": dist}, nodes, rec, None, handlers, timeout)  # type: ignore[arg-type]
    driver.start()
    driver.finished.wait(60)
    driver.stop()
    final = final_observation(driver)
    rec.close()
    ops = [op for op in read_history(tmp / "history.jsonl").ops if op["type"] != "invoke"]
    return ops, nodes, final


OK_REMOVE = (0, "[x] INFO\nRemoved  KRaft controller 3 with directory id " + D3 + "\n", "")
OK_ADD = (0, f"Added controller 3 with directory id {NEW} and endpoints: C://h:9093\n", "")
BUSY = (
    1,
    "",
    "RequestTimedOutException: Aborted add voter operation for X since it is lagging behind",
)
UNKNOWN = (1, "", "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node")
GONE = (1, "", "VoterNotFoundException: Cannot remove voter ReplicaKey(id=3)")
DUPLICATE = (1, "", "DuplicateVoterException: The voter id is already part of the set of voters")


def kraft_steps() -> list[UpgradeStep]:
    return [
        UpgradeStep(0, REMOVE, "c3"),
        UpgradeStep(0, REPROVISION, "c3"),
        UpgradeStep(0, ADD, "c3"),
    ]


def test_remove_reprovision_add_each_record_what_they_observed(tmp_path):
    kafka = Kafka({"remove-controller": [OK_REMOVE], "add-controller": [BUSY, OK_ADD]})
    ops, nodes, final = drive(tmp_path, "kraft", kraft_steps(), kafka)
    assert [(op["f"], op["type"]) for op in ops] == [
        (REMOVE, "ok"), (REPROVISION, "ok"), (ADD, "ok"), ("describe-quorum", "ok")
    ]  # fmt: skip
    removed, wiped, added = (op["value"] for op in ops[:3])
    assert (removed["node_id"], removed["directory_id"]) == (3, D3)
    assert removed["voters"] == [[1, D1], [2, D2]] and removed["before"]["voters"][2] == [3, D3]
    assert removed["output"].startswith("Removed") and "INFO" not in removed["output"]
    assert set(removed["at_ack"]) == {"1", "2", "3"} and removed["at_ack"]["1"]["epoch"] == 4
    assert wiped["wiped"] == "/var/lib/kafka/data"
    assert nodes["c3"].events[0] == "stop" and nodes["c3"].events[-1] == "start"
    assert qs.WIPE_MARKER in nodes["c3"].events[1]
    assert added["directory_id"] == NEW and added["attempts"] == 2 and [3, NEW] in added["voters"]
    assert final["voters"] == [[1, D1], [2, D2], [3, NEW]]
    # The removal ran outside the node it removes; the addition inside the node it adds.
    assert kafka.calls.index("remove-controller@b1") >= 0
    assert all(c.endswith("@c3") for c in kafka.calls if c.startswith("add-controller"))
    assert "retries=0" in nodes["c3"].files[qs.ADD_CONFIG]
    # add-controller reads the node's own configuration, as re-provisioned (dynamic).
    assert nodes["c3"].files[qs.ADD_CONFIG].startswith("process.roles=controller\nnode.id=3\n")
    assert "controller.quorum.bootstrap.servers=" in nodes["c3"].files[qs.ADD_CONFIG]


def test_a_refusal_after_an_attempt_of_unknown_outcome_is_info_not_fail(tmp_path):
    kafka = Kafka({"remove-controller": [UNKNOWN, GONE]})
    ops, _, _ = drive(tmp_path, "kraft-combined", [UpgradeStep(0, REMOVE, "n3")], kafka)
    assert ops[0]["type"] == "info" and "may have made the change" in ops[0]["error"]


def test_a_refusal_with_nothing_attempted_before_is_fail_and_later_steps_are_not_attempted(
    tmp_path,
):
    kafka = Kafka({"add-controller": [DUPLICATE]})
    steps = [UpgradeStep(0, ADD, "n3"), UpgradeStep(0, REMOVE, "n3")]
    ops, _, _ = drive(tmp_path, "kraft-combined", steps, kafka)
    assert ops[0]["type"] == "fail" and "refused" in ops[0]["error"]
    assert ops[1]["type"] == "fail" and "not attempted" in ops[1]["error"]


def test_attempts_refused_until_the_timeout_definitely_did_not_happen(tmp_path):
    kafka = Kafka({"add-controller": [BUSY] * 20})
    ops, _, _ = drive(tmp_path, "kraft-combined", [UpgradeStep(0, ADD, "n3")], kafka, timeout=1.2)
    assert ops[0]["type"] == "fail" and "no attempt can have made" in ops[0]["error"]


def test_attempts_of_unknown_outcome_until_the_timeout_are_info(tmp_path):
    kafka = Kafka({"remove-controller": [UNKNOWN] * 20})
    ops, _, _ = drive(
        tmp_path, "kraft-combined", [UpgradeStep(0, REMOVE, "n3")], kafka, timeout=1.2
    )
    assert ops[0]["type"] == "info" and "outcome is unknown" in ops[0]["error"]


def test_a_node_that_is_no_voter_is_not_removed(tmp_path):
    kafka = Kafka({})
    kafka.voters = [(1, D1), (2, D2)]
    ops, _, _ = drive(tmp_path, "kraft-combined", [UpgradeStep(0, REMOVE, "n3")], kafka)
    assert ops[0]["type"] == "fail" and "is not a voter" in ops[0]["error"]
    assert not any(c.startswith("remove-controller") for c in kafka.calls)


# Auto-join (KIP-1186) ----------------------------------------------------------------------------
def test_an_auto_joining_quorum_stops_removes_reprovisions_and_waits_for_the_join():
    steps = quorum_schedule("kraft", 150, 3, "dynamic-auto-join")
    assert [s.step for s in steps] == [qs.STOP, REMOVE, REPROVISION, qs.AWAIT_JOIN]
    assert len({s.node for s in steps}) == 1 and steps[0].node.startswith("c")
    # The same draws as a dynamic quorum's: only the steps differ.
    dynamic = quorum_schedule("kraft", 150, 3, "dynamic")
    assert [s.at_s for s in dynamic] == [s.at_s for s in steps[1:]]


class JoiningKafka(Kafka):
    """A controller that, once started wiped, adds itself: no add-controller is ever asked."""

    def __init__(self, answers: dict[str, list[tuple[int, str, str]]]) -> None:
        super().__init__(answers)
        self.node: FakeNode | None = None

    def run(self, node: str, cmd: list[str]) -> ExecResult:
        c3 = self.node
        wiped = c3 is not None and any(e.startswith("put") for e in c3.events)
        if wiped and c3.running and (3, NEW) not in self.voters:
            self.voters.append((3, NEW))
        return super().run(node, cmd)


def test_the_auto_join_is_observed_not_asked(tmp_path):
    kafka = JoiningKafka({"remove-controller": [OK_REMOVE]})
    steps = [
        UpgradeStep(0, qs.STOP, "c3"),
        UpgradeStep(0, REMOVE, "c3"),
        UpgradeStep(0, REPROVISION, "c3"),
        UpgradeStep(0, qs.AWAIT_JOIN, "c3"),
    ]
    topo = build_topology("kraft", quorum="dynamic-auto-join")
    info = ClusterInfo(topo, "4.4.0", "fast", "cid")
    dist = KafkaDist("4.4.0", Path("/x"), {"metadata_quorum": "Q", "kafka": "K", "storage": "S"})
    nodes = {n.name: FakeNode(n, kafka) for n in topo.nodes}
    kafka.node = nodes["c3"]
    rec = Recorder(tmp_path / "history.jsonl", "test")
    handlers = QuorumSteps(info).handlers()
    driver = UpgradeDriver(steps, info, {"4.4.0": dist}, nodes, rec, None, handlers, 5)  # type: ignore[arg-type]
    driver.start()
    driver.finished.wait(60)
    driver.stop()
    rec.close()
    ops = [op for op in read_history(tmp_path / "history.jsonl").ops if op["type"] != "invoke"]
    assert [(op["f"], op["type"]) for op in ops] == [
        (qs.STOP, "ok"), (REMOVE, "ok"), (REPROVISION, "ok"), (qs.AWAIT_JOIN, "ok")
    ]  # fmt: skip
    stopped, _, wiped, joined = (op["value"] for op in ops)
    assert stopped["was_running"] is True and wiped["was_running"] is False
    assert joined["directory_id"] == NEW and [3, NEW] in joined["voters"]
    assert not any(c.startswith("add-controller") for c in kafka.calls)
    # Its re-provisioned configuration asks it to join by itself.
    rendered = "".join(c for e, c in nodes["c3"].files.items() if e.endswith("server.properties"))
    assert "controller.quorum.auto.join.enable=true" in rendered


def test_only_controllers_of_an_auto_joining_quorum_are_told_to_join():
    from clusters.config import server_properties

    topo = build_topology("kraft", quorum="dynamic-auto-join")
    assert (
        server_properties(topo, topo.node("c1"), "fast")["controller.quorum.auto.join.enable"]
        == "true"
    )
    assert "controller.quorum.auto.join.enable" not in server_properties(
        topo, topo.node("b1"), "fast"
    )
    plain = build_topology("kraft", quorum="dynamic")
    assert "controller.quorum.auto.join.enable" not in server_properties(
        plain, plain.node("c1"), "fast"
    )
