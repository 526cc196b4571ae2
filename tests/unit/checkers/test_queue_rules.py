"""The shape the queue checks keep: every rule module in checkers/families/queue/rules/ has both
forms and names its kinds whole; every engine is chosen in one place and builds one context."""

from __future__ import annotations

import ast
import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.core.kinds import KINDS as LISTED
from checkers.families.queue.context import queue_context
from checkers.families.queue.dispatch import ENGINE_CHOICES, ENGINE_NAMES, engine_name
from checkers.families.queue.per_key import ReferenceEngine
from checkers.families.queue.rules import KINDS, RULES
from checkers.families.queue.source import ElementSource
from checkers.families.queue.vector import LocalEngine
from history.columnar import elements
from tests.unit.checkers.model import CONCURRENCY, INJECTIONS, KEYS, action_lists, run_model


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_every_rule_module_has_its_kinds_and_both_forms(rule):
    assert isinstance(rule.KINDS, tuple) and rule.KINDS
    assert all(isinstance(k, str) for k in rule.KINDS)
    for form in ("reference", "vectorised"):
        params = list(inspect.signature(getattr(rule, form)).parameters)
        assert len(params) == 2, (rule.__name__, form, params)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_every_kind_is_spelled_whole_in_its_rules_module(rule):
    """A search for a kind's name finds the code that reports it: no kind built from parts."""
    literals = {
        node.value
        for node in ast.walk(ast.parse(inspect.getsource(rule)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert set(rule.KINDS) <= literals


def test_each_kind_belongs_to_one_rule_and_the_kinds_list_has_them_all():
    assert len(KINDS) == len(set(KINDS))
    assert set(KINDS) == {k.name for k in LISTED if "queue" in k.checkers}


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_can_be_caused_in_the_test_model(kind):
    """The model's injections are every rule's test: test_queue_model finds each by name,
    test_queue_vector and test_queue_spark hold the engines to each other on it."""
    assert kind in INJECTIONS


def test_engines_are_chosen_by_name_in_one_place():
    assert set(ENGINE_NAMES) == {"local", "spark", "reference"}
    assert set(ENGINE_NAMES) <= set(ENGINE_CHOICES)
    assert engine_name("auto") == "local"
    assert engine_name("auto", "spark://master:7077") == "spark"
    assert engine_name("pandas") == "local"
    assert [engine_name(n) for n in ENGINE_NAMES] == list(ENGINE_NAMES)
    with pytest.raises(ValueError, match="engine 'numpy'"):
        engine_name("numpy")


@settings(max_examples=100)
@given(st.lists(st.sampled_from(sorted(INJECTIONS)), max_size=3), action_lists)
def test_the_engines_facts_give_one_context(kinds, acts):
    """Each engine reads its own form of the elements; the context made from their answers is
    the same (the Spark engine's: test_queue_spark)."""
    m = run_model(acts, final_poll=False)
    for i, kind in enumerate(kinds):
        INJECTIONS[kind](m, KEYS[i % len(KEYS)])
    m.final_poll()
    source = ElementSource(elements=elements(m.table()))
    resets = [("2", 1, "assign", [0]), ("3", 2, "crash", None)]
    reference = queue_context(ReferenceEngine(source), resets, CONCURRENCY)
    assert queue_context(LocalEngine(source), resets, CONCURRENCY) == reference
