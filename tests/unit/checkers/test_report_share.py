"""The report's share-group section (checkers/report/share.py): deliveries per record,
redeliveries by what came before them, lock expiries, archived records and each consumer's
deliveries, from hand-written share histories and generated ones."""

from __future__ import annotations

import base64
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.report.share import LOCK_EXPIRED, load_share
from tests.unit.checkers.histories import H

SUB = {"group": "g", "topic": "kchaos-share", "ack_mode": "explicit"}
REFUSED = f"{LOCK_EXPIRED}: The record state is invalid."
HEADER = {"share": {"group": "g", "topic": "kchaos-share", "lock_ms": 2000, "delivery_limit": 3}}


class S(H):
    def __init__(self, **header: Any) -> None:
        super().__init__(**{**HEADER, **header})

    def subscribe(self, p: int) -> S:
        self.op(p, "share-subscribe", SUB, "ok", SUB)
        return self

    def deliver(self, p: int, records: list[list[Any]], carried: list[list[Any]] = ()) -> S:
        acks = [list(a) for a in carried]
        out = {"acks": acks, "records": records, "handed": self.clock, "lock_ms": 2000}
        self.op(p, "share-poll", {"acks": acks}, "ok", {**out, "acked": []})
        return self

    def ack(self, p: int, acks: list[list[Any]], said: str = "ok", held: list = ()) -> S:
        key = acks[0][0]
        value = {"acks": acks, **({"held": list(held)} if held else {})}
        out = {**value, "commit": {str(key): said}, "committed": self.clock, "acked": []}
        self.op(p, "share-ack", value, "ok", out)
        return self


def _history() -> S:
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 1, 101, 1], [0, 2, 102, 1]])
    h.ack(2, [[0, 1, "release"]], held=[[0, 2]])  # (0, 2) left past its lock
    h.ack(2, [[0, 2, "accept"]], said=REFUSED)  # too late: refused
    h.nemesis("start-kill", {"kind": "one", "targets": ["n1"]})
    h.deliver(3, [[0, 1, 101, 2], [0, 2, 102, 2]])
    h.ack(3, [[0, 1, "accept"], [0, 2, "reject"]])
    h.nemesis("stop-kill", {"kind": "one", "restarted": ["n1"]})
    # (0, 3): released at every delivery up to the limit (3), so archived; (0, 4) is accepted
    # at its third delivery, so not archived.
    for count in (1, 2, 3):
        h.deliver(2, [[0, 3, 103, count], [0, 4, 104, count]])
        last = "accept" if count == 3 else "release"
        h.ack(2, [[0, 3, "release"], [0, 4, last]])
    return h


def test_the_numbers_of_a_hand_written_share_run(tmp_path):
    section = load_share(_history().write(tmp_path), 60.0)
    assert section is not None
    n = section.numbers
    assert (n["deliveries"], n["records"], n["redeliveries"]) == (10, 4, 6)
    assert n["counted_above_one"] == 6
    assert n["counts"] == [{"count": 2, "records": 2}, {"count": 3, "records": 2}]
    assert (n["limit"], n["reached_limit"], n["archived_at_limit"]) == (3, 2, 1)
    assert n["rejected_records"] == 1
    assert n["held"] == 1 and n["lock_expired_refusals"] == 1
    # (0,1) after its RELEASE; (0,2) after the refused late ACCEPT; (0,3) twice and (0,4) twice
    # after a RELEASE.
    assert n["after"] == {"nothing": 0, "accept": 1, "release": 5, "reject": 0, "renew": 0}
    assert n["outcomes"] == {"ok": 9, LOCK_EXPIRED: 1}
    by = {int(c["process"]): c for c in n["consumers"]}
    assert by[2]["deliveries"] == 8 and by[3]["deliveries"] == 2 and by[3]["redelivered"] == 2
    assert by[2]["refused"] == 1 and by[2]["release"] == 6 and by[3]["reject"] == 1
    assert set(section.rates) == {"consumer 2", "consumer 3"}
    assert sum(section.rates["consumer 2"]) == 8


def test_a_redelivery_with_nothing_sent_since_is_a_lock_left_to_expire(tmp_path):
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[1, 5, 7, 1]]).deliver(3, [[1, 5, 7, 2]]).ack(3, [[1, 5, "accept"]])
    n = load_share(h.write(tmp_path), 10.0).numbers  # type: ignore[union-attr]
    assert n["after"]["nothing"] == 1 and n["redeliveries"] == 1


def test_the_report_shows_the_section_with_its_plot(tmp_path):
    _history().write(tmp_path)
    check(tmp_path, engine="pandas")
    html = (tmp_path / "report.html").read_text()
    assert '<h2 id="share">Share group (KIP-932)</h2>' in html
    assert "10 deliveries of 4 records" in html and "6 redeliveries" in html
    section = html.split('<h2 id="share">', 1)[1].split("<h2>Faults</h2>", 1)[0]
    [plot] = re.findall(r'src="data:image/png;base64,([^"]+)"', section)
    assert base64.b64decode(plot)[:4] == b"\x89PNG"


def test_a_run_without_share_ops_has_no_section(tmp_path):
    h = H().send(0, 1, 10, 0)
    assert load_share(h.write(tmp_path), 5.0) is None
    check(tmp_path, engine="pandas")
    assert 'id="share"' not in (tmp_path / "report.html").read_text()


# Generated share runs: the section's counts add up however the records went -----------------
_EVENTS = st.lists(
    st.tuples(
        st.integers(2, 4),  # consumer
        st.integers(0, 5),  # offset of partition 0
        st.sampled_from(["accept", "release", "reject", "renew", None]),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(_EVENTS)
def test_generated_runs_add_up(tmp_path_factory, events):
    h = S()
    for p in (2, 3, 4):
        h.subscribe(p)
    count: dict[int, int] = {}
    for p, offset, ack in events:
        count[offset] = count.get(offset, 0) + 1
        h.deliver(p, [[0, offset, offset, count[offset]]])
        if ack is not None:
            h.ack(p, [[0, offset, ack]])
    n = load_share(h.write(tmp_path_factory.mktemp("share")), 30.0).numbers  # type: ignore[union-attr]
    assert n["deliveries"] == len(events) and n["records"] == len(count)
    assert n["redeliveries"] == len(events) - len(count) == sum(n["after"].values())
    assert sum(c["records"] for c in n["counts"]) == len(count)
    assert {c["count"]: c["records"] for c in n["counts"]} == {
        c: sum(1 for v in count.values() if v == c) for c in set(count.values())
    }
    assert 0 <= n["archived_at_limit"] <= n["reached_limit"]
    assert n["reached_limit"] == sum(1 for v in count.values() if v >= 3)
    assert sum(c["deliveries"] for c in n["consumers"]) == len(events)


def test_malformed_share_values_are_skipped_not_a_traceback(tmp_path):
    h = S().subscribe(2)
    h.deliver(2, [[0, 1, 101, 1], "junk", [0, "x", 1, 1], [0, 2, 102]])
    h.op(2, "share-ack", {"acks": [[0, 1, "accept"], "junk"]}, "ok", {"acks": [], "acked": 3})
    n = load_share(h.write(tmp_path), 5.0).numbers  # type: ignore[union-attr]
    assert n["deliveries"] == 1 and n["records"] == 1
