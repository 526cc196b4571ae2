"""The history: plain-data operations, the only contract between running and checking.

Writing (append-only JSON Lines, crash-safe), reading (JSONL, Parquet, Jepsen EDN) and the
columnar form the checkers scan; which processes are clients (``format.is_client``). Also
the vocabulary a run is asked in (``options``: how an option is declared, by the harness, a
workload kind or a step family alike), which plan.json's spec stores. Imports nothing from the
other kchaos packages.
"""
