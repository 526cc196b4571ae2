"""Issue 33's example nightly campaign plans offline: every client fault kind, on both clients
and on 3.9 and 4.4, one fault of each kind a cell names, long enough apart for a `long` length
to outlast the transaction's timeout before the step's stop."""

from __future__ import annotations

from pathlib import Path

from harness.campaign.spec import load_campaign
from harness.plan import build_plan
from harness.spec import spec_from_dict
from nemesis.client import MENU, lengths

CAMPAIGN = Path(__file__).resolve().parents[3] / "examples" / "campaigns"
TXN = {
    "transaction.timeout.ms": 15000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
}


def test_every_client_kind_runs_on_both_clients_and_both_releases_and_outlasts_its_timeout():
    cells = load_campaign(CAMPAIGN / "client-faults-nightly.yaml").cells
    drawn: dict[tuple[str, str], set[str]] = {}
    for cell in cells:
        plan = build_plan(spec_from_dict(dict(cell.options), fresh=True), cell.seed)
        starts = [f for f in plan.faults if f.action == "start"]
        named = {n.split(":")[1] for n in cell.options["nemesis"]}
        assert {f.kind for f in starts} == named, cell.name
        key = (cell.options.get("client", "librdkafka"), cell.options["version"])
        drawn.setdefault(key, set()).update(named)
        # The step's stop comes no earlier than the longest length: a long fault ends by itself.
        interval = cell.options["nemesis_interval"]
        assert interval > lengths(TXN)["long"]
    kinds = {k.name for k in MENU.kinds}
    assert drawn == {(c, v): kinds for c in ("librdkafka", "java") for v in ("3.9", "4.4")}
