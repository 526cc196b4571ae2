"""The transactional.id belongs to the worker slot, so a replacing process fences its zombie."""

from __future__ import annotations

from harness.run.workers import ProcessIds
from history.format import TXN_ID_PER_SLOT
from workloads.queue import transactional_id


def test_a_retired_process_and_its_replacement_share_the_id_and_slots_do_not():
    ids = ProcessIds(4)
    p = 2
    chain = [p]
    for _ in range(3):
        chain.append(ids.retire(chain[-1]))
    assert {transactional_id("r", q, 4) for q in chain} == {"kchaos-r-slot2"}
    assert len({transactional_id("r", q, 4) for q in range(4)}) == 4


def test_the_plan_states_the_form_the_workload_uses():
    """The checker judges fencing from the history only when the plan says ids are per slot."""
    from harness.plan import build_plan
    from harness.spec import RunSpec

    form = build_plan(RunSpec.of(txn=True, concurrency=3), 1).generator["transactional_id"]
    assert form == TXN_ID_PER_SLOT
    assert transactional_id("r", 7, 3) == form.replace("<run>", "r").replace(
        "<process mod concurrency>", str(7 % 3)
    )
