"""The history: plain-data operations, the only contract between running and checking.

Writing (append-only JSON Lines, crash-safe), reading (JSONL, Parquet, Jepsen EDN) and the
columnar form the checkers scan. Imports nothing from the other kchaos packages.
"""
