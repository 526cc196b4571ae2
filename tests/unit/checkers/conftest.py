import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test session: starting one costs seconds."""
    from checkers.scan.spark_session import spark_session

    session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def kinds_are_listed(monkeypatch):
    """Every finding checkers/ makes during a test has a kind checkers/core/kinds.py lists: the
    checkers run over each test's histories, and a kind nobody listed fails that test."""
    from checkers.core.findings import Finding
    from checkers.core.kinds import BY_NAME

    made: set[str] = set()
    init = Finding.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        # Only what the checkers build: tests build findings of made-up kinds, and
        # dataclasses.replace rebuilds a finding whose kind was seen when it was made.
        if sys._getframe(1).f_globals.get("__name__", "").startswith("checkers."):
            made.add(self.kind)

    monkeypatch.setattr(Finding, "__init__", recording)
    yield
    unlisted = sorted(made - set(BY_NAME))
    if unlisted:
        pytest.fail(f"kinds reported but not listed in checkers/core/kinds.py: {unlisted}")
