"""Workloads come from one registry: the spec, the plan and the interpreter ask it, not names."""

from __future__ import annotations

import json

import pytest

from harness.plan import build_plan
from harness.spec import RunSpec, SpecError, validate
from workloads.registry import WORKLOADS

# A release every workload runs on (a spec without --version means 3.9, before share groups).
VERSION = "4.4"


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_each_workload_states_what_a_run_needs_of_it(name):
    kind = WORKLOADS[name]
    assert name == kind.NAME
    assert kind.FINAL_KEY.startswith("final_") and kind.FINAL_SAYS
    json.dumps(kind.HISTORY_HEADER)
    gen = kind.generator(RunSpec.of(workload=name, version=VERSION).values())
    json.dumps(gen)  # plain data: it is written into plan.json
    # The harness states these; a workload's own parameters do not shadow them.
    assert not {"workload", "rate", "concurrency", "client_rng"} & set(gen)
    assert isinstance(kind.final_sentence({}), str)
    plan = build_plan(validate(RunSpec.of(workload=name, version=VERSION)), 1)
    assert plan.generator == {
        **gen,
        "workload": name,
        "rate": 50.0,
        "concurrency": 4,
        "client_rng": "random.Random('kchaos/<seed>/client/<process>')",
    }


def test_the_spec_accepts_exactly_the_registered_workloads():
    for name in WORKLOADS:
        validate(RunSpec.of(workload=name, version=VERSION))
    with pytest.raises(SpecError, match=f"valid workloads are {', '.join(WORKLOADS)}$"):
        validate(RunSpec.of(workload="observe"))


def test_the_final_sentences_say_how_much_was_read_back():
    queue, admin = WORKLOADS["queue"], WORKLOADS["admin"]
    assert queue.final_sentence({"read_acknowledged": 9, "acknowledged": 10}) == (
        "final reads read 9/10 acknowledged sends"
    )
    assert admin.final_sentence({"answered": {"n1": True, "n2": False}}) == (
        "final views from 1/2 brokers"
    )
