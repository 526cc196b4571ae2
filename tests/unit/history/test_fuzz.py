"""Malformed, truncated and mangled histories: one HistoryError or a result, never a traceback."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.table_check import check_table
from history.columnar import to_table
from history.errors import HistoryError
from history.reader import parse_history
from tests.unit.checkers.model import action_lists, run_model

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([2**63, -(2**70)])
    | st.floats(allow_nan=False)
    | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=6,
)


def check_bytes(data: bytes) -> None:
    """Read and check; the only exception allowed is a HistoryError naming the place."""
    try:
        history = parse_history(data, "fuzz.jsonl")
        check_table(to_table(history))
    except HistoryError as e:
        assert str(e).startswith("fuzz.jsonl")
        assert "\n" not in str(e)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(data):
    check_bytes(data)


@settings(max_examples=100)
@given(action_lists, st.integers(0, 10_000))
def test_any_truncation_reads_or_says_why(acts, cut):
    data = run_model(acts).h.jsonl()
    check_bytes(data[: cut % (len(data) + 1)])


@settings(max_examples=300)
@given(action_lists, st.data())
def test_mangled_fields_are_reported_or_checked(acts, data):
    lines = run_model(acts).h.jsonl().decode().splitlines()
    i = data.draw(st.integers(1, len(lines) - 1), label="line")
    op = json.loads(lines[i])
    field = data.draw(
        st.sampled_from([*op.keys(), "value", "rebalance_log", "wall", "node", "error"]),
        label="field",
    )
    op[field] = data.draw(json_values, label="new value")
    lines[i] = json.dumps(op)
    check_bytes(("\n".join(lines) + "\n").encode())


@settings(max_examples=200)
@given(action_lists, st.data())
def test_mangled_queue_values_are_reported_or_checked(acts, data):
    """Deep edits inside send/poll values, where a checker might trip over odd shapes."""
    lines = run_model(acts).h.jsonl().decode().splitlines()
    queue = [i for i, line in enumerate(lines) if '"value": [[' in line]
    if not queue:
        return
    i = data.draw(st.sampled_from(queue), label="line")
    op = json.loads(lines[i])
    mop = data.draw(st.integers(0, len(op["value"]) - 1), label="mop")
    path = op["value"][mop]
    pos = data.draw(st.integers(0, len(path) - 1), label="position")
    path[pos] = data.draw(json_values | st.integers(-2, 10_000), label="new")
    lines[i] = json.dumps(op)
    check_bytes(("\n".join(lines) + "\n").encode())
