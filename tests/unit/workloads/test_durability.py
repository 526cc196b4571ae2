"""The queue topic's durability options (workloads/durability.py): each one's refusals in one
line (command line and spec file), what plan.json keeps, what the topic and the storage get, and
the history header's `durability`."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.spec import SpecError, spec_from_dict
from history.format import DURABILITY_DEFAULTS, DURABILITY_FIELD
from tests.unit.harness.test_bad_input_cli import kchaos, one_error_line, plan_only
from workloads import durability
from workloads.queue import QueueWorkload


def _plan(*args: str) -> dict:
    r = plan_only(*args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--replication", "0"], "--replication: must be a whole number between 1 and 9, not 0"),
        (["--replication", "4"], "--replication: at most 3, the kraft-combined cluster's brokers"),
        (["--replication", "4", "--topology", "kraft"], "at most 3, the kraft cluster's"),
        (["--replication", "2", "--controllers", "1"], "at most 1, the kraft-combined cluster's"),
        (["--replication", "x"], "--replication: must be a whole number"),
        (["--min-insync-replicas", "0"], "--min-insync-replicas: must be a whole number"),
        (["--min-insync-replicas", "4"], "at most the topic's replication factor 3, not 4"),
        (
            ["--replication", "2", "--min-insync-replicas", "3"],
            "--min-insync-replicas: at most the topic's replication factor 2, not 3",
        ),
        (
            ["--flush-messages", "0"],
            "--flush-messages: must be a whole number between 1 and 1000000000",
        ),
        (["--flush-messages", "-1"], "--flush-messages: must be a whole number"),
        (["--flush-messages", str(2**63)], "--flush-messages: must be a whole number between"),
        (["--elr", "yes"], "'yes' is not one of 'on', 'off'"),
        (["--elr", "on", "--version", "3.9"], "--elr: needs Kafka 4.0 or later"),
        (["--elr", "off", "--topology", "zk"], "--elr: needs a KRaft topology"),
        (
            ["--elr", "off", "--features", "eligible.leader.replicas.version=1"],
            "--elr: it sets eligible.leader.replicas.version when the storage is formatted",
        ),
        (["--elr", "on", "--features", "release-version=4.4"], "--features release-version"),
        (["--elr", "on", "--version", "4.3", "--upgrade-to", "4.4"], "--upgrade-to 4.4"),
        (["--workload", "admin", "--flush-messages", "1"], "--flush-messages: only applies"),
        (["--workload", "admin", "--unclean-leader-election"], "only applies with --workload"),
        (["--workload", "admin", "--replication", "2"], "--replication: only applies"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_a_bad_durability_option_is_one_line_naming_it(args: list[str], says: str):
    one_error_line(plan_only(*args), says)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"replication": 4}, "spec: --replication: at most 3"),
        ({"replication": "3"}, "spec: --replication: must be a number, not '3'"),
        ({"min_insync_replicas": 2.5}, "--min-insync-replicas: must be a whole number"),
        ({"flush_messages": True}, "--flush-messages: must be a number"),
        ({"unclean_leader_election": "yes"}, "--unclean-leader-election: must be true or false"),
        ({"elr": True}, "--elr: must be a string"),
        ({"elr": "maybe"}, "--elr: unknown ELR setting 'maybe': choose one of on, off"),
        ({"elr": "on", "topology": "migration"}, "--elr: needs a KRaft"),
    ],
)
def test_a_spec_files_bad_durability_is_one_sentence(data: dict, says: str):
    with pytest.raises(SpecError) as err:
        spec_from_dict(data, fresh=True)
    assert says in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_a_bad_value_in_a_spec_file_via_the_cli_has_no_traceback(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("min_insync_replicas: 3\nreplication: 2\n")
    one_error_line(kchaos("run", "--plan-only", "--spec", str(spec)), "at most the topic's")


def test_a_run_without_the_options_plans_as_before():
    plan = _plan()
    gen, spec = plan["generator"], plan["spec"]
    assert (gen["replication"], gen["min_insync_replicas"]) == (3, 2)
    for key in ("flush_messages", "unclean_leader_election", "elr"):
        assert key not in gen and key not in spec
    assert "replication" not in spec and "min_insync_replicas" not in spec


def test_given_options_reach_the_generator_and_the_spec():
    plan = _plan(
        "--flush-messages", "1", "--unclean-leader-election", "--elr", "off",
        "--replication", "2", "--min-insync-replicas", "1",
    )  # fmt: skip
    gen, spec = plan["generator"], plan["spec"]
    assert gen["flush_messages"] == 1 and gen["unclean_leader_election"] is True
    assert gen["elr"] is False
    assert (gen["replication"], gen["min_insync_replicas"]) == (2, 1)
    assert spec["elr"] == "off" and spec["replication"] == 2 and spec["flush_messages"] == 1
    assert spec["unclean_leader_election"] is True and spec["min_insync_replicas"] == 1


def test_a_smaller_cluster_gets_every_broker_and_min_isr_at_most_that():
    plan = _plan("--controllers", "1")
    assert (plan["generator"]["replication"], plan["generator"]["min_insync_replicas"]) == (1, 1)
    plan = _plan("--replication", "2")  # min ISR 2 stays: it is not more than 2
    assert (plan["generator"]["replication"], plan["generator"]["min_insync_replicas"]) == (2, 2)
    plan = _plan("--replication", "1")
    assert (plan["generator"]["replication"], plan["generator"]["min_insync_replicas"]) == (1, 1)


def test_the_header_says_every_setting_and_defaults_as_documented():
    default = QueueWorkload.history_header({"replication": 3, "min_insync_replicas": 2})
    assert default[DURABILITY_FIELD] == DURABILITY_DEFAULTS
    gen = {"replication": 3, "min_insync_replicas": 2, "flush_messages": 1,
           "unclean_leader_election": True, "elr": True}  # fmt: skip
    said = QueueWorkload.history_header(gen)[DURABILITY_FIELD]
    assert said == {
        "replication": 3,
        "min_insync_replicas": 2,
        "flush_messages": 1,
        "unclean_leader_election": True,
        "elr": True,
    }
    assert QueueWorkload.history_header({**gen, "elr": False})[DURABILITY_FIELD]["elr"] is False


def test_the_topic_and_the_storage_get_what_was_asked():
    assert durability.topic_configs({}, 2) == {
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "false",
    }
    configs = durability.topic_configs({"flush_messages": 1, "unclean_leader_election": True}, 1)
    assert configs == {
        "min.insync.replicas": "1",
        "unclean.leader.election.enable": "true",
        "flush.messages": "1",
    }
    assert QueueWorkload.format_features({}) == {}
    assert QueueWorkload.format_features({"elr": True}) == {"eligible.leader.replicas.version": 1}
    assert QueueWorkload.format_features({"elr": False}) == {"eligible.leader.replicas.version": 0}
    both = QueueWorkload.format_features({"elr": True, "txn_protocol": "classic"})
    assert both == {"transaction.version": 0, "eligible.leader.replicas.version": 1}


def test_elr_plans_on_every_release_that_has_the_feature():
    for version in ("4.0", "4.4"):
        for topology in ("kraft", "kraft-combined"):
            _plan("--elr", "on", "--version", version, "--topology", topology)


@settings(max_examples=60, deadline=None)
@given(
    topology=st.sampled_from(["kraft-combined", "kraft", "zk"]),
    controllers=st.integers(1, 9),
    replication=st.integers(1, 9),
    min_isr=st.integers(1, 9),
)
def test_replication_and_min_isr_are_refused_exactly_when_they_cannot_hold(
    topology, controllers, replication, min_isr
):
    values = SimpleNamespace(
        workload="queue", topology=topology, controllers=controllers, hosts=None,
        replication=replication, min_insync_replicas=min_isr, elr=None,
    )  # fmt: skip
    brokers = controllers if topology == "kraft-combined" else 3
    rf_given = replication != 3
    effective = min(replication, brokers)
    bad = (rf_given and replication > brokers) or (min_isr != 2 and min_isr > effective)
    try:
        durability.check(values)
    except ValueError as exc:
        assert bad, str(exc)
        assert str(exc).startswith(("--replication:", "--min-insync-replicas:"))
    else:
        assert not bad
        rf, isr = durability.replication_of(values)
        assert 1 <= isr <= rf <= brokers
