"""The jvm package without Docker: its menu, the rule text it generates, hook lookup against the
real cached jars of 3.9.2 and 4.x, and start/stop/heal against in-memory nodes whose "JVM"
keeps Byteman rules."""

from __future__ import annotations

import json
import random
import zipfile

import pytest

from clusters.byteman import LoadedRule, NoListener, Rule
from clusters.capabilities import ExecResult, Rules
from clusters.topology import TOPOLOGIES, build_topology
from history.effects import (
    BROKER,
    CONTROLLER,
    EFFECTS,
    RESTARTED,
    STALLED,
    legacy_effects,
    op_effects,
)
from nemesis import jvm
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, NotApplied
from nemesis.registry import HEAL_ORDER, MENUS, NEMESES, build
from tests.kafka_jars import kafka_libs
from tests.unit.nemesis.fake_node import FakeNode


def cached(version: str) -> str:
    """A release whose jars the hook lookup reads, fetched when this machine lacks it."""
    kafka_libs(version)
    return version


class JvmNode(FakeNode):
    """A FakeNode whose JVM runs a given Kafka version and keeps Byteman rules in memory."""

    def __init__(self, spec, version: str = "3.9.2", listener: bool = True):
        super().__init__(spec)
        self.version = version
        self.listener = listener
        self.rules: dict[str, Rule] = {}
        self.output = ""
        self.on_load = None  # what the "JVM" does when rules arrive (an fsync-error halt)

    def exec(self, cmd, timeout=None):
        if cmd == ["cat", "/proc/1/cmdline"]:
            assert self.running
            args = ["java", "-cp", f"/opt/kafka/dists/{self.version}/libs/*", "kafka.Kafka"]
            return ExecResult(0, "\0".join(args) + "\0", "")
        return super().exec(cmd, timeout)

    def _agent(self) -> None:
        if not (self.running and self.listener):
            raise NoListener(f"no Byteman listener at {self.ip}:9091")

    def load_rules(self, rules):
        self._agent()
        self.rules.update({r.name: r for r in rules})
        if self.on_load:
            self.on_load(self)
        return [r.name for r in rules]

    def delete_rules(self, names):
        self._agent()
        return [n for n in names if self.rules.pop(n, None)]

    def delete_all_rules(self):
        self._agent()
        gone, self.rules = sorted(self.rules), {}
        return gone

    def loaded_rules(self):
        self._agent()
        return [
            LoadedRule(r.name, r.target_class, r.method, (f"{r.target_class}.{r.method}() void",))
            for r in self.rules.values()
        ]

    def logs(self, tail=None):
        return self.output

    def start(self):
        super().start()
        self.rules = {}  # a new JVM holds no rules


def context(kind="kraft-combined", version="3.9.2", **leaders):
    topo = build_topology(kind, cluster="x")
    nodes = {n.name: JvmNode(n, version) for n in topo.nodes}
    hints = {"partition_leaders": leaders} if leaders else {}
    return FaultContext(topology=topo, nodes=nodes, hints=hints)


def step(kind, target=None, action="start", seed=42, **params):
    return FaultStep(0, action, "jvm", kind, target, seed, params)


# The menu


def test_the_package_is_registered_and_healed_on_every_path():
    assert NEMESES["jvm"] is jvm.JvmNemesis and MENUS["jvm"] is jvm.MENU
    assert set(HEAL_ORDER) == set(NEMESES), "heal_cluster reaches every package"


@pytest.mark.parametrize("topology", TOPOLOGIES)
def test_zookeeper_mode_offers_only_the_disk_kinds(topology):
    names = [k.name for k in jvm.MENU.kinds_for(topology)]
    if topology == "zk":
        assert names == ["slow-disk", "fsync-error"]
    else:
        assert names == ["controller-stall", "heartbeat-delay", "slow-disk", "fsync-error"]


def test_a_drawn_fault_lasts_its_interval_and_reads_its_kinds_parameters():
    rng = random.Random(5)
    seen = {}
    for _ in range(200):
        start, stop = jvm.MENU.draw(rng, "kraft-combined", 7.5, 10.0, 17.5)
        assert start.target is None and start.params == stop.params
        seen[start.kind] = start.params
        jvm.JvmNemesis().check(start)
    assert seen["controller-stall"] == {"stall_s": 7.5}
    assert seen["fsync-error"] == {"for_s": 7.5}
    assert seen["heartbeat-delay"]["delay_ms"] in (1000, 4000, 12000)
    assert seen["slow-disk"]["delay_ms"] in (10, 100, 1000)


def test_check_fills_defaults_and_refuses_what_cannot_be_done():
    nem = jvm.JvmNemesis()
    assert nem.check(step("controller-stall")) == {"stall_s": 10.0}
    assert nem.check(step("heartbeat-delay")) == {"delay_ms": 4000.0, "for_s": 60.0}
    assert nem.check(step("slow-disk", delay_ms=5)) == {"delay_ms": 5.0, "for_s": 60.0}
    with pytest.raises(NemesisError, match="stall_s must be positive, got 0"):
        nem.check(step("controller-stall", stall_s=0))
    with pytest.raises(NemesisError, match="does not read delay_ms"):
        nem.check(step("fsync-error", delay_ms=3))
    with pytest.raises(NemesisError, match="unknown jvm kind 'gc-pause'"):
        nem.check(step("gc-pause"))


# The rules


HOOK = jvm.FoundHook("flush", "org.apache.kafka.common.record.FileRecords", "flush", "x.jar")


def test_a_stall_blocks_until_its_deadline_and_never_past_it():
    hooks = jvm.hooks_for("controller-stall", cached("3.9.2"))
    rules = jvm.rules_for("controller-stall", hooks, {"stall_s": 8}, 1700000008000, "0000002a")
    assert [r.name for r in rules] == [
        "kchaos controller-stall 0000002a write-event",
        "kchaos controller-stall 0000002a read-event",
        "kchaos controller-stall 0000002a control-event",
    ]
    assert rules[0].text() == (
        "RULE kchaos controller-stall 0000002a write-event\n"
        "CLASS org.apache.kafka.controller.QuorumController$ControllerWriteEvent\n"
        "METHOD run\n"
        "AT ENTRY\n"
        "IF System.currentTimeMillis() < 1700000008000L\n"
        "DO delay(Math.max(1L, 1700000008000L - System.currentTimeMillis()))\n"
        "ENDRULE\n"
    )


def test_a_delay_waits_delay_ms_but_not_past_the_deadline():
    (rule,) = jvm.rules_for("heartbeat-delay", (HOOK,), {"delay_ms": 4000.0}, 5000, "1")
    assert rule.condition == "System.currentTimeMillis() < 5000L"
    assert rule.action == (
        "delay(Math.max(1L, Math.min(4000L, 5000L - System.currentTimeMillis())))"
    )


def test_an_fsync_error_throws_the_io_exception_flush_declares_with_the_steps_tag():
    (rule,) = jvm.rules_for("fsync-error", (HOOK,), {"for_s": 5}, 5000, "0000002a")
    assert rule.action == (
        'throw new java.io.IOException("kchaos fsync-error 0000002a: injected by kchaos '
        'through Byteman")'
    )
    assert rule.text().count("\n") == 7


# Hook lookup in the real jars


def test_controller_stall_hooks_the_quorum_controllers_own_events_on_both_lines():
    for version in (cached("3.9.2"), cached("4.3.1")):
        hooks = jvm.hooks_for("controller-stall", version)
        assert [(h.cls, h.method, h.jar) for h in hooks] == [
            (
                f"org.apache.kafka.controller.QuorumController${c}",
                "run",
                f"kafka-metadata-{version}.jar",
            )
            for c in ("ControllerWriteEvent", "ControllerReadEvent", "ControllerEvent")
        ]


def test_the_heartbeat_send_moved_from_scala_to_java():
    (old,) = jvm.hooks_for("heartbeat-delay", cached("3.9.2"))
    assert old.record() == {
        "role": "heartbeat-send",
        "class": "kafka.server.BrokerLifecycleManager",
        "method": "kafka$server$BrokerLifecycleManager$$sendBrokerHeartbeat",
        "jar": "kafka_2.13-3.9.2.jar",
    }
    (mid,) = jvm.hooks_for("heartbeat-delay", cached("4.1.2"))
    assert mid.cls == "kafka.server.BrokerLifecycleManager"
    (new,) = jvm.hooks_for("heartbeat-delay", cached("4.3.1"))
    assert (new.cls, new.method, new.jar) == (
        "org.apache.kafka.server.BrokerLifecycleManager",
        "sendBrokerHeartbeat",
        "kafka-server-4.3.1.jar",
    )


def test_the_disk_hooks_follow_file_records_into_record_internal():
    old = jvm.hooks_for("slow-disk", cached("3.9.2"))
    new = jvm.hooks_for("slow-disk", cached("4.3.1"))
    assert [(h.role, h.cls) for h in old] == [
        ("append", "org.apache.kafka.common.record.FileRecords"),
        ("flush", "org.apache.kafka.common.record.FileRecords"),
    ]
    internal = "org.apache.kafka.common.record.internal.FileRecords"
    assert [(h.role, h.cls, h.jar) for h in new] == [
        ("append", internal, "kafka-clients-4.3.1.jar"),
        ("flush", internal, "kafka-clients-4.3.1.jar"),
    ]


def test_4_4_0_has_every_hook_where_4_3_1_has_it():
    # Skipped where 4.4.0 was never fetched (CI, `make setup`): docs/nemesis.md's table says why.
    for kind in jvm.HOOKS:
        old = jvm.hooks_for(kind, cached("4.3.1"))
        new = jvm.hooks_for(kind, cached("4.4.0"))
        assert [(h.role, h.cls, h.method) for h in new] == [(h.role, h.cls, h.method) for h in old]
        assert [h.jar for h in new] == [h.jar.replace("4.3.1", "4.4.0") for h in old]


@pytest.mark.slow  # fetches five releases from Maven Central on a fresh machine
@pytest.mark.parametrize("version", ["3.3.2", "3.4.1", "3.5.2", "3.6.2", "3.7.2"])
def test_every_release_before_3_8_has_every_hook(version):
    for kind in jvm.HOOKS:
        assert [h.role for h in jvm.hooks_for(kind, cached(version))] == [
            h.role for h in jvm.HOOKS[kind]
        ]
    stall = jvm.hooks_for("controller-stall", version)
    control = "ControlEvent" if version == "3.3.2" else "ControllerEvent"
    assert stall[-1].cls == f"org.apache.kafka.controller.QuorumController${control}"


def test_3_3s_control_events_are_hooked_under_their_old_name(tmp_path):
    libs = tmp_path / "libs"
    libs.mkdir()
    jar = libs / "kafka-metadata-3.3.2.jar"
    real = kafka_libs("3.9.2") / "kafka-metadata-3.9.2.jar"
    qc = "org/apache/kafka/controller/QuorumController$"
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(jar, "w") as dst:
        for name in ("ControllerWriteEvent", "ControllerReadEvent"):
            dst.writestr(f"{qc}{name}.class", src.read(f"{qc}{name}.class"))
        # The 3.3 class had the 3.4 class's shape: an Event whose run() handles it.
        dst.writestr(f"{qc}ControlEvent.class", _renamed(src.read(f"{qc}ControllerEvent.class")))
    hooks = jvm.find_hooks("controller-stall", libs, "3.3.2")
    assert [(h.role, h.cls.rsplit("$", 1)[1], h.method) for h in hooks] == [
        ("write-event", "ControllerWriteEvent", "run"),
        ("read-event", "ControllerReadEvent", "run"),
        ("control-event", "ControlEvent", "run"),
    ]


def _renamed(class_file: bytes) -> bytes:
    """The class file with ControllerEvent's own name changed to ControlEvent in its constant
    pool (a UTF8 entry: 2-byte length, then the bytes)."""
    old = b"org/apache/kafka/controller/QuorumController$ControllerEvent"
    new = b"org/apache/kafka/controller/QuorumController$ControlEvent"
    return class_file.replace(len(old).to_bytes(2, "big") + old, len(new).to_bytes(2, "big") + new)


def test_a_version_without_the_hooked_method_cannot_take_the_kind(tmp_path):
    libs = tmp_path / "libs"
    libs.mkdir()
    with zipfile.ZipFile(libs / "kafka-clients-9.9.9.jar", "w") as zf:
        zf.writestr("org/apache/kafka/common/utils/Time.class", b"")
    with pytest.raises(
        NemesisError,
        match=r"^Kafka 9\.9\.9 cannot take jvm fsync-error: its jars have no "
        r"org\.apache\.kafka\.common\.record\.internal\.FileRecords\.flush or "
        r"org\.apache\.kafka\.common\.record\.FileRecords\.flush to hook$",
    ):
        jvm.find_hooks("fsync-error", libs, "9.9.9")


def test_a_version_not_in_the_cache_is_refused_in_one_sentence():
    with pytest.raises(NemesisError, match=r"Kafka 0\.0\.1 is not in this host's cache"):
        jvm.hooks_for("slow-disk", "0.0.1")


# Start, stop and heal against in-memory nodes


def test_a_slow_disk_on_a_partition_leader_loads_its_rules_there_and_records_the_hooks():
    ctx, nem = context(**{"t-0": 2}), jvm.JvmNemesis()
    got = nem.start(ctx, step("slow-disk", delay_ms=50, for_s=30))
    json.dumps(got)
    assert got["targets"] == ["n2"] and got["resolved_by"] == {"partition": "t-0"}
    assert got["hooks"]["n2"]["version"] == "3.9.2"
    assert [h["method"] for h in got["hooks"]["n2"]["hooks"]] == ["append", "flush"]
    assert got["rules"] == {
        "n2": ["kchaos slow-disk 0000002a append", "kchaos slow-disk 0000002a flush"]
    }
    assert got["injected"]["n2"]["kchaos slow-disk 0000002a append"] == [
        "org.apache.kafka.common.record.FileRecords.append() void"
    ]
    assert got["delay_ms"] == 50 and got["for_s"] == 30
    assert set(ctx.nodes["n2"].rules) == set(got["rules"]["n2"])
    assert not ctx.nodes["n1"].rules and not ctx.nodes["n3"].rules
    stopped = nem.stop(ctx, step("slow-disk", action="stop"))
    assert stopped == {"kind": "slow-disk", "unloaded": {"n2": got["rules"]["n2"]}}
    assert not ctx.nodes["n2"].rules


def test_nodes_on_different_versions_get_each_their_own_hooks():
    cached("3.9.2")
    ctx = context(kind="kraft")
    ctx.nodes["b2"].version = cached("4.3.1")
    got = jvm.JvmNemesis().start(ctx, step("heartbeat-delay", target="all", for_s=5))
    assert got["targets"] == ["b1", "b2", "b3"] and got["resolved_by"] == {
        "among": ["b1", "b2", "b3"]
    }
    assert got["hooks"]["b1"]["hooks"][0]["class"] == "kafka.server.BrokerLifecycleManager"
    assert got["hooks"]["b2"]["hooks"][0]["class"] == (
        "org.apache.kafka.server.BrokerLifecycleManager"
    )
    assert got["hooks"]["b2"]["version"] == "4.3.1"


def test_counting_selectors_count_among_the_nodes_the_kind_can_hook():
    ctx = context(kind="kraft")
    got = jvm.JvmNemesis().start(ctx, step("controller-stall", target="minority", stall_s=1))
    assert got["targets"][0].startswith("c") and len(got["targets"]) == 1


def test_a_target_that_runs_no_hooked_code_is_not_applied_and_touches_nothing():
    ctx = context(kind="kraft", **{"t-0": "b1"})
    with pytest.raises(NotApplied, match="target partition-leader \\(b1\\) does not run"):
        jvm.JvmNemesis().start(ctx, step("controller-stall", target="partition-leader"))
    assert not any(n.rules for n in ctx.nodes.values())


def test_a_jvm_without_the_agent_fails_the_step_before_any_rule_is_loaded(monkeypatch):
    monkeypatch.setattr(jvm, "LISTENER_WAIT_S", 0.3)
    ctx = context()
    ctx.nodes["n3"].listener = False
    with pytest.raises(NotApplied, match="node n3: no Byteman listener"):
        jvm.JvmNemesis().start(ctx, step("slow-disk", target="all"))
    assert not any(n.rules for n in ctx.nodes.values())


def test_a_listener_that_opens_a_moment_late_is_waited_for():
    ctx = context()
    node = ctx.nodes["n1"]
    node.listener = False
    asked = []
    real = node.loaded_rules

    def late():
        asked.append(1)
        node.listener = len(asked) > 2
        return real()

    node.loaded_rules = late
    got = jvm.JvmNemesis().start(ctx, step("slow-disk", target="all", for_s=3))
    assert "n1" in got["rules"] and len(asked) >= 3


def test_a_node_kind_without_rules_is_refused_by_name():
    ctx = context()
    ctx.nodes["n1"] = FakeNode(ctx.topology.node("n1"))
    assert not isinstance(ctx.nodes["n1"], Rules)
    with pytest.raises(NotApplied, match=r"n1 \(FakeNode\) lacks Rules"):
        jvm.JvmNemesis().start(ctx, step("slow-disk", target="all"))


# What Kafka 3.9.2 logged when flush threw on a voter (seen on a real node).
HALT_LOG = """[2026-11-24 09:59:26,901] INFO [RaftManager id=3] Completed transition (org.apache.kafka.raft.QuorumState)
[2026-11-24 09:59:27,179] ERROR Encountered fatal fault: Unexpected error in raft IO thread (org.apache.kafka.server.fault.ProcessTerminatingFaultHandler)
org.apache.kafka.common.errors.KafkaStorageException: Error while flushing log for __cluster_metadata-0 in dir /var/lib/kafka/data with offset 97 (exclusive) and recovery point 97
Caused by: java.io.IOException: kchaos fsync-error 0000002a: injected by kchaos through Byteman
	at org.apache.kafka.common.record.FileRecords.flush(FileRecords.java:197)
	at kafka.log.LogSegment.flush(LogSegment.scala:500)
"""  # noqa: E501


def test_the_reaction_is_the_statement_that_carried_the_injected_exception():
    assert jvm.reaction(HALT_LOG, "0000002a") == [
        "[2026-11-24 09:59:27,179] ERROR Encountered fatal fault: Unexpected error in raft IO "
        "thread (org.apache.kafka.server.fault.ProcessTerminatingFaultHandler)",
        "org.apache.kafka.common.errors.KafkaStorageException: Error while flushing log for "
        "__cluster_metadata-0 in dir /var/lib/kafka/data with offset 97 (exclusive) and recovery "
        "point 97",
        "Caused by: java.io.IOException: kchaos fsync-error 0000002a: injected by kchaos through "
        "Byteman",
    ]
    assert jvm.reaction(HALT_LOG, "00000001") == []


def test_fsync_error_records_the_halt_and_stop_starts_the_node_again():
    ctx = context(**{"t-0": 1})

    def halt(node):
        node.output = HALT_LOG
        node.running = False

    ctx.nodes["n1"].on_load = halt
    nem = jvm.JvmNemesis()
    got = nem.start(ctx, step("fsync-error", for_s=5))
    assert got["targets"] == ["n1"]
    assert got["node_did"]["n1"]["exited"] is True
    assert got["node_did"]["n1"]["log"][-1].startswith("Caused by: java.io.IOException: kchaos")
    stopped = nem.stop(ctx, step("fsync-error", action="stop"))
    assert stopped["restarted"] == ["n1"] and ctx.nodes["n1"].running
    assert stopped["node_did"]["n1"]["running"] is False
    assert stopped["unloaded"] == {}  # the halted JVM took its rule with it
    written = op_effects("stop-jvm", stopped, ["n1", "n2", "n3"])
    assert [(e.effect, e.nodes) for e in written] == [(RESTARTED, frozenset({"n1"}))]
    rest = {k: v for k, v in stopped.items() if k != EFFECTS}
    assert legacy_effects("stop-jvm", rest, ["n1", "n2", "n3"]) == written


@pytest.mark.parametrize(
    ("kind", "side"),
    [("controller-stall", CONTROLLER), ("heartbeat-delay", BROKER), ("slow-disk", None)],
)
def test_a_start_says_it_stalled_its_targets_code_and_whose(kind, side):
    ctx = context(kind="kraft", **{"t-0": 4})
    got = jvm.JvmNemesis().start(ctx, step(kind, target="all"))
    (e,) = written = op_effects("start-jvm", got, list(ctx.nodes))
    assert (e.effect, e.side, e.by, e.nodes) == (
        STALLED,
        side,
        "Byteman",
        frozenset(got["targets"]),
    )
    assert {e.effect for e in written} <= set(jvm.MENU.effects_of(kind))
    rest = {k: v for k, v in got.items() if k != EFFECTS}
    assert legacy_effects("start-jvm", rest, list(ctx.nodes)) == written


def test_heal_unloads_every_rule_and_starts_exited_nodes():
    ctx = context()
    ctx.nodes["n1"].rules = {"kchaos slow-disk 1 append": None, "someone else's": None}
    ctx.nodes["n2"].running = False
    ctx.nodes["n3"].listener = False  # started without the agent: nothing to heal there
    done = jvm.JvmNemesis().heal_all(ctx)
    assert done == [
        "n2: started exited node",
        "n1: unloaded Byteman rules kchaos slow-disk 1 append, someone else's",
    ]
    assert jvm.JvmNemesis().heal_all(ctx) == []


def test_heal_cluster_order_reaches_the_jvm_package_on_nodes_without_rules():
    topo = build_topology("kraft-combined", cluster="x")
    ctx = FaultContext(topology=topo, nodes={n.name: FakeNode(n) for n in topo.nodes})
    for name in HEAL_ORDER:
        assert build([name])[name].heal_all(ctx) == []


def test_a_frozen_node_is_not_asked_and_says_so():
    ctx = context()
    frozen = ctx.nodes["n2"]
    frozen.rules = {"kchaos slow-disk 1 append": None}
    frozen.is_frozen = lambda: True

    def hang():
        raise AssertionError("a frozen JVM's listener cannot answer: it must not be asked")

    frozen.loaded_rules = frozen.delete_all_rules = hang
    for name in ("n1", "n3"):
        ctx.nodes[name].is_frozen = lambda: False
    assert jvm.JvmNemesis().heal_all(ctx) == [
        "n2: frozen, any Byteman rules left to their deadline"
    ]
    stopped = jvm.JvmNemesis().stop(ctx, step("slow-disk", action="stop"))
    assert stopped == {"kind": "slow-disk", "unloaded": {}, "frozen": ["n2"]}
