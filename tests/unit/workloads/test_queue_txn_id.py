"""The transactional.id belongs to the worker slot, so a replacing process fences its zombie."""

from __future__ import annotations

from harness.interpreter import ProcessIds
from workloads.queue import transactional_id


def test_a_retired_process_and_its_replacement_share_the_id_and_slots_do_not():
    ids = ProcessIds(4)
    p = 2
    chain = [p]
    for _ in range(3):
        chain.append(ids.retire(chain[-1]))
    assert {transactional_id("r", q, 4) for q in chain} == {"kchaos-r-slot2"}
    assert len({transactional_id("r", q, 4) for q in range(4)}) == 4
