"""What the per-key checks need to know from outside their key, gathered before the shuffle.

Both inputs are small (info sends are rare, assign/subscribe/crash ops are few), so they are
collected to the driver and shipped with the per-key function. `queue_context` is the one place
a QueueContext is made: every engine answers the same two questions about its elements
(ElementFacts) in its own way, and this module makes the context from the answers.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from checkers.families.queue.elem import Elem
from history.format import FAIL, INFO, JEPSEN, REWIND, UNDECLARED

# The reset op name abort_resets gives an op whose polls moved the consumer unseen.
ABORT = "abort"


@dataclass(frozen=True)
class Reset:
    """A consumer whose position may legitimately jump: `keys` it keeps, None for all forgotten."""

    index: int
    keys: frozenset[int] | None
    # Only the consumer's position is lost (an op whose polls went unrecorded): the process's
    # sends keep their order (Jepsen's nonmonotonic-send-cases skips failed ops too).
    polls_only: bool = False


@dataclass(frozen=True)
class QueueContext:
    # info ops with a send some poll returned from its key: they did happen, so all their sends
    # count.
    committed_info: frozenset[int] = frozenset()
    # Per process, in index order: assign/subscribe (keeps the listed keys) and crash (keeps none).
    resets: dict[str, tuple[Reset, ...]] = field(default_factory=dict)
    # Consumers subscribe (consumer groups) rather than assign partitions themselves.
    subscribe: bool = False
    # Transactional runs whose transactional.id belongs to the worker slot (process mod slots):
    # the number of slots, for the fenced-producer-read rule (queue/rules/fencing.py); None: not
    # judged.
    slots: int | None = None
    # Where the history's writer leaves a consumer after an aborted transaction
    # (history.format.CONSUMER_AFTER_ABORT): decides which op a poll continues from.
    after_abort: str = UNDECLARED
    # The history's producers are idempotent and pipelined (history.format.idempotent_producers):
    # one producer's acknowledged sends to a partition are judged in its send order
    # (rules/producer_order.py); False: no such claim, the rule finds nothing.
    producers: bool = False

    def keeps_position(self, op_type: str) -> bool:
        """Does a poll op of this (non-ok) type leave the process where its last ok poll of the
        key ended? Then its polls continue from there, and so does the next op's."""
        if self.after_abort == REWIND:
            return op_type == FAIL
        if self.after_abort == JEPSEN:
            return op_type in (FAIL, INFO)
        return False

    def reset_between(
        self, process: str, key: int, after: int, before: int, kind: str = "poll"
    ) -> bool:
        """Did `process` lose its `kind` ("poll" or "send") position on `key` between ops
        `after` and `before`?"""
        resets = self.resets.get(process, ())
        lo = bisect.bisect_right(resets, after, key=lambda r: r.index)
        for r in resets[lo:]:
            if r.index >= before:
                break
            if r.polls_only and kind != "poll":
                continue
            if r.keys is None or key not in r.keys:
                return True
        return False


class ElementFacts(Protocol):
    """The cross-key facts an engine reads from its own form of the elements."""

    def info_sends(self) -> list[tuple[int, int, int]]:
        """(op index, key, value) of every send with a value in an `info` op."""
        ...

    def polled_among(self, values: list[int]) -> Iterable[tuple[int, int]]:
        """(key, value) of polls that returned one of `values` (more pairs are harmless)."""
        ...

    def sends_among(self, values: list[int]) -> list[tuple[int, Elem]]:
        """(key, send) of every send of one of `values`, whatever its op's outcome: asked after
        the check, for the few values polls returned from a key nobody sent them to
        (rules/reads.attribute_elsewhere)."""
        ...


Resets = list[tuple[str, int, str, list[int] | None]]


def queue_context(
    facts: ElementFacts,
    resets: Resets,
    slots: int | None = None,
    after_abort: str = UNDECLARED,
    producers: bool = False,
) -> QueueContext:
    """The context of one check: which info sends happened, from `facts`; the rest as given
    (build_context)."""
    sends = facts.info_sends()
    # Info sends are few and polls many: only the polls of the info sends' values are asked for.
    polled = facts.polled_among(sorted({v for _, _, v in sends})) if sends else []
    return build_context(sends, polled, resets, slots, after_abort, producers)


def build_context(
    info_sends: Iterable[tuple[int, int, int]],
    polled: Iterable[tuple[int, int]],
    reset_ops: Resets,
    slots: int | None = None,
    after_abort: str = UNDECLARED,
    producers: bool = False,
) -> QueueContext:
    """`info_sends`: (op index, key, value) of sends in info ops; `polled`: every (key, value)
    any poll returned (or just those among the info sends'). Pairs, not values: kchaos's values
    are unique in the run, Jepsen's only within a key, so a value read from another key proves
    nothing; `reset_ops`: (process, index, f,
    keys) of assign/subscribe/crash completions that were not `fail` (and, for UNDECLARED
    histories, `abort_resets`); `slots`, `after_abort`, `producers`: see QueueContext."""
    seen = set(polled)
    committed = frozenset(i for i, k, v in info_sends if (k, v) in seen)
    by_process: dict[str, list[Reset]] = {}
    subscribe = False
    for process, index, f, keys in reset_ops:
        subscribe = subscribe or f == "subscribe"
        kept = None if f == "crash" or keys is None else frozenset(keys)
        by_process.setdefault(process, []).append(Reset(index, kept, polls_only=f == ABORT))
    resets = {p: tuple(sorted(rs, key=lambda r: r.index)) for p, rs in by_process.items()}
    return QueueContext(
        committed_info=committed,
        resets=resets,
        subscribe=subscribe,
        slots=slots,
        after_abort=after_abort,
        producers=producers,
    )


def abort_resets(processes: Iterable[str], indices: Iterable[int]) -> Resets:
    """Reset ops for queue ops whose polls moved the consumer unseen (check.queue_resets says
    which): they forget the consumer's position, not the process's send order."""
    return [(p, i, ABORT, None) for p, i in zip(processes, indices, strict=True)]
