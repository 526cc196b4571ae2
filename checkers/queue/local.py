"""The reference path: the per-key checks over a pandas frame, for small histories and tests."""

from __future__ import annotations

import pandas as pd

from checkers.queue.context import QueueContext
from checkers.queue.per_key import KeyResult, check_key


def run_local(elements: pd.DataFrame, ctx: QueueContext) -> list[KeyResult]:
    return [check_key(int(k), df, ctx) for k, df in elements.groupby("key", sort=True)]
