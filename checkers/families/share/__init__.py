"""KIP-932's share groups: the share workload's deliveries and acknowledgements
(docs/history.md, "The share workload"), read by history/share.py into rows and with the rest of
a share run by run.py; one module per rule (finality, at_least_once, locks, counts, ordering,
committed, start_offsets), all run by checks.py.
"""
