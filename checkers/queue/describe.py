"""The finding builders under the names older callers know (tests/unit/history/test_names.py):
each now lives beside its rule in rules/, where both of the rule's forms word their findings."""

from checkers.queue.order import LogView
from checkers.queue.rules.fencing import fenced_producer_read
from checkers.queue.rules.internal_order import internal_pair
from checkers.queue.rules.offsets import duplicate, inconsistent_offsets
from checkers.queue.rules.process_order import process_pair
from checkers.queue.rules.reads import g1a, garbage_read, lost_write, precommitted_read, unseen

__all__ = [
    "LogView",
    "duplicate",
    "fenced_producer_read",
    "g1a",
    "garbage_read",
    "inconsistent_offsets",
    "internal_pair",
    "lost_write",
    "precommitted_read",
    "process_pair",
    "unseen",
]
