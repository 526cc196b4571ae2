"""Coverage (issue 33): which interesting states a run reached, and how often (the table is
checkers/core/states.py); count.py counts them from the history, the committed metadata log
and the faults' recorded effects, for results.json's `coverage` block and the report.
"""
