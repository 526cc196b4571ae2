"""The share workload's pure parts: its options (refused in one sentence through `kchaos run`),
its generator and plan, what it asks of the brokers, and how a share consumer draws what to do
with the records it is handed. The consumer's JVM is a stand-in here that answers as the real
one does (workloads/java/share/KchaosShare.java); tests/integration/test_run_share.py runs it on
a real cluster."""

from __future__ import annotations

import random
import shutil
from typing import Any

import pytest
from click.testing import CliRunner

from clusters.kafka_dist import load_dist, parse_version
from harness.cli import main
from harness.plan import build_plan
from harness.spec import RunSpec, validate
from history.share import ACCEPT, EXPLICIT, IMPLICIT, SHARE_ACK, SHARE_POLL, SHARE_SUBSCRIBE
from workloads.java_host import JavaError, JavaHost, conf_args
from workloads.share import (
    DEFAULT_ACKS,
    SHARE_SOURCES,
    ShareConsumer,
    ShareWorkload,
    consumer_modes,
    drained,
    node_properties_of,
    parse_acks,
)


def _plan_only(*args: str) -> Any:
    return CliRunner().invoke(
        main, ["run", "--workload", "share", "--plan-only", "--seed", "3", *args]
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--version", "4.0"], "needs Kafka 4.1 or later on every release of the run"),
        (["--share-consumers", "4"], "at most 3"),
        (["--share-acks", "accept=1,maybe=2"], "'maybe=2' is not choice=weight"),
        (["--share-acks", "accept=many"], "the weight of accept must be a whole number"),
        (["--share-acks", "accept=0,none=0"], "at least one weight must be above 0"),
        (["--share-acks", "renew=1", "--version", "4.1"], "renew needs Kafka 4.2 or later"),
        (["--share-lock-ms", "999"], "between 1000 and 60000"),
        (["--share-delivery-limit", "1"], "between 2 and 10"),
        (["--share-ack-mode", "sometimes"], "'sometimes' is not one of"),
        (["--keys", "3"], "--keys: only applies with --workload queue"),
    ],
)
def test_options_that_cannot_run_are_refused_in_one_line(args, says):
    got = _plan_only(*args)
    assert got.exit_code != 0
    lines = [line for line in got.output.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], got.output
    assert "Traceback" not in got.output


def test_share_options_are_refused_for_another_workload():
    got = CliRunner().invoke(main, ["run", "--plan-only", "--share-lock-ms", "3000"])
    assert got.exit_code != 0
    assert "--share-lock-ms: only applies with --workload share" in got.output


def _spec(**options: Any) -> RunSpec:
    # A spec without --version means 3.9 (a stored plan's meaning), which has no share groups.
    return validate(RunSpec.of(workload="share", **{"version": "4.4", **options}))


def _plan(seed: int, **options: Any) -> str:
    return build_plan(_spec(**options), seed).to_json()


def test_the_same_seed_gives_the_same_plan_bytes():
    assert _plan(5, nemesis=["kill"], time_limit=60.0) == _plan(
        5, nemesis=["kill"], time_limit=60.0
    )
    assert _plan(5, nemesis=["kill"], time_limit=60.0) != _plan(
        6, nemesis=["kill"], time_limit=60.0
    )


def _gen(**options: Any) -> dict[str, Any]:
    return build_plan(_spec(**options), 1).generator


def test_the_generator_states_the_group_the_rates_and_the_lock():
    gen = _gen(share_lock_ms=3000, share_delivery_limit=3, share_acks="accept=1,none=1")
    assert gen["lock_ms"] == 3000 and gen["delivery_limit"] == 3
    assert gen["acks"] == {"accept": 1, "release": 0, "reject": 0, "renew": 0, "none": 1}
    assert gen["group"] == "kchaos-<run>-share" and gen["client"] == "java"
    assert "share_version" not in gen  # on by default from 4.2
    assert ShareWorkload.format_features(gen) == {}


def test_on_41_share_groups_are_formatted_on_and_renew_is_left_out():
    gen = _gen(version="4.1")
    assert gen["acks"]["renew"] == 0 and gen["acks"]["accept"] == DEFAULT_ACKS["accept"]
    assert ShareWorkload.format_features(gen) == {"share.version": 1}
    assert _gen(version="4.2")["acks"]["renew"] == DEFAULT_ACKS["renew"]


def test_the_brokers_get_the_lock_its_floor_the_limit_and_short_sessions():
    props = node_properties_of(_gen(share_lock_ms=2500, share_delivery_limit=4))
    assert props["group.share.record.lock.duration.ms"] == "2500"
    assert props["group.share.min.record.lock.duration.ms"] == "2500"
    assert props["group.share.delivery.count.limit"] == "4"
    assert props["group.share.session.timeout.ms"] == props["group.share.min.session.timeout.ms"]
    # A long lock keeps Kafka's own floor.
    long = node_properties_of(_gen(share_lock_ms=30_000))
    assert long["group.share.min.record.lock.duration.ms"] == "15000"


def test_the_header_says_each_consumer_slots_mode():
    gen = _gen(concurrency=6, share_consumers=3)
    assert consumer_modes(gen) == [EXPLICIT, IMPLICIT, EXPLICIT]
    header = ShareWorkload.history_header(gen)
    assert header["share"]["modes"] == [EXPLICIT, IMPLICIT, EXPLICIT]
    assert header["share"]["lock_ms"] == gen["lock_ms"]
    assert consumer_modes({**gen, "ack_mode": IMPLICIT}) == [IMPLICIT] * 3


def test_rates_parse_case_and_spaces_and_default_the_rest_to_zero():
    assert parse_acks(" Accept=3, none=1") == {
        "accept": 3,
        "release": 0,
        "reject": 0,
        "renew": 0,
        "none": 1,
    }


def test_a_drain_is_complete_only_quiet_and_with_nothing_left():
    left = {"0": {"start": 5, "lag": 0}, "1": {"start": 9, "lag": None}}
    assert drained({"ended": "quiet", "start_offsets": left})
    assert not drained({"ended": "deadline", "start_offsets": left})
    assert not drained({"ended": "quiet", "start_offsets": None})
    assert not drained({"ended": "quiet", "start_offsets": {"0": {"start": 1, "lag": 3}}})


# A share consumer against a stand-in JVM ---------------------------------------------------------
class _Host:
    """Answers the share commands as KchaosShare.java does; `polls` are the records each poll
    hands over; every request is kept."""

    def __init__(self, polls: list[list[list[int]]]) -> None:
        self.polls = list(polls)
        self.calls: list[tuple[Any, ...]] = []

    def handle(self, listener: Any = None) -> int:
        return 1

    def forget(self, h: int) -> None:
        pass

    def call(self, cmd: str, h: int, *args: Any, timeout: float) -> Any:
        self.calls.append((cmd, *args))
        if cmd == "share-poll":
            recs = self.polls.pop(0) if self.polls else []
            return {"recs": recs, "handed": 7, "lock_ms": 2000, "acked": []}
        if cmd == "share-ack":
            return {"commit": {"0": "ok"}, "committed": 9, "acked": [[0, [1], "ok"]]}
        return True


class _Wl:
    def __init__(self, acks: dict[str, int]) -> None:
        self.gen = {
            "acks": acks,
            "sync_commit_percent": 50,
            "poll_timeout_ms": 500,
            "poll_max_records": 50,
        }
        self.group, self.topic, self.bootstrap = "g", "kchaos-share", "10.0.0.1:9092"
        self.lock_s = 2.0
        self.side_recorder = None


def _consumer(mode: str, acks: dict[str, int], polls: list[list[list[int]]], seed: int = 1):
    c = ShareConsumer(_Wl(acks), _Host(polls), 4, random.Random(seed), mode)  # type: ignore[arg-type]
    slept: list[float] = []
    c.sleep = slept.append
    return c, slept


def _run(c: ShareConsumer, n: int) -> list[tuple[str, Any, str]]:
    assert c.setup_op is not None and c.setup_op.f == SHARE_SUBSCRIBE
    assert c.open(c.setup_op).type == "ok"
    out = []
    for _ in range(n):
        op = c.next_op()
        done = c.apply(op)
        out.append((op.f, op.value, done.type))
    return out


RECORDS = [[0, 1, 101, 1], [0, 2, 102, 1], [0, 3, 103, 2]]


def test_an_explicit_consumer_holds_a_record_past_its_lock_then_accepts_it():
    c, slept = _consumer(EXPLICIT, {"accept": 1, "none": 1}, [RECORDS])
    ops = _run(c, 4)
    assert ops[0][0] == SHARE_POLL and ops[0][1] == {"acks": []}
    first, late = ops[1], ops[2]
    assert first[0] == SHARE_ACK and first[1]["held"]
    held = first[1]["held"]
    # Every record either acknowledged now or held, never both.
    now = [a[:2] for a in first[1]["acks"]]
    assert sorted(now + held) == [r[:2] for r in RECORDS] and not set(map(tuple, now)) & set(
        map(tuple, held)
    )
    assert late[0] == SHARE_ACK and late[1] == {"acks": [[k, o, ACCEPT] for k, o in held]}
    # Away for longer than the lock before the late acknowledgement, and only then.
    assert slept == [pytest.approx(2.0 * 1.5 + 0.5)]
    assert ops[3][0] == SHARE_POLL and ops[3][1] == {"acks": []}
    # The JVM was asked to acknowledge by type, then to commit.
    acked = [call for call in c.host.calls if call[0] == "share-ack"]  # type: ignore[attr-defined]
    assert acked[1][2] == ",".join(f"{k}:{o}:ACCEPT" for k, o in held)


def test_an_implicit_consumer_accepts_the_batch_by_commit_or_with_its_next_poll():
    kinds = set()
    for seed in range(12):
        c, _ = _consumer(IMPLICIT, {"accept": 1}, [RECORDS], seed)
        ops = _run(c, 2)
        batch = [[r[0], r[1], ACCEPT] for r in RECORDS]
        if ops[1][0] == SHARE_ACK:
            assert ops[1][1] == {"acks": batch}
        else:
            assert ops[1] == (SHARE_POLL, {"acks": batch}, "ok")
        kinds.add(ops[1][0])
        # Implicit mode never calls acknowledge(): the JVM is given no acks.
        assert all(call[-1] == "" for call in c.host.calls if call[0].startswith("share-p"))  # type: ignore[attr-defined]
    assert kinds == {SHARE_ACK, SHARE_POLL}


def test_a_consumer_draws_the_same_ops_from_the_same_seed():
    rates = {"accept": 3, "release": 1, "reject": 1, "renew": 1, "none": 1}
    polls = [RECORDS, RECORDS[:1], [], RECORDS]
    a = _run(_consumer(EXPLICIT, rates, polls, 9)[0], 8)
    b = _run(_consumer(EXPLICIT, rates, polls, 9)[0], 8)
    assert a == b


def test_a_poll_that_threw_is_unknown_and_retires_the_process():
    c, _ = _consumer(EXPLICIT, {"accept": 1}, [])
    assert c.open(c.setup_op).type == "ok"  # type: ignore[arg-type]

    def refuse(cmd: str, h: int, *args: Any, timeout: float) -> Any:
        raise JavaError("IllegalStateException: boom", "other", False)

    c.host.call = refuse  # type: ignore[method-assign]
    done = c.apply(c.next_op())
    assert done.type == "info" and "IllegalStateException" in (done.error or "")


# The JVM's share commands, compiled in and answering without a cluster ---------------------------
def _share_dist():
    for version in ("4.4.0", "4.3.1", "4.2.2", "4.1.2"):
        dist = load_dist(version)
        if dist is not None and parse_version(dist.version)[:2] >= (4, 1):
            return dist
    return None


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK")
def test_the_jvm_runs_the_share_commands_it_was_compiled_with():
    dist = _share_dist()
    if dist is None:
        pytest.skip("no Kafka release with share groups assembled")
    host = JavaHost(dist, extra_sources=SHARE_SOURCES)
    try:
        h = host.handle()
        conf = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
        assert host.call("share-consumer", h, "t", 0, *conf_args(conf), timeout=30) is True
        with pytest.raises(JavaError, match="IllegalStateException: record 0:5 is not in"):
            host.call("share-ack", h, 100, "0:5:ACCEPT", timeout=30)
        assert host.call("close", h, 0, timeout=30) is True
        with pytest.raises(JavaError, match="no share consumer on handle"):
            host.call("share-poll", h, 10, "", timeout=30)
    finally:
        host.close()
