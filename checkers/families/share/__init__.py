"""KIP-932's share groups: the share workload's deliveries and acknowledgements
(docs/history.md, "The share workload"), read by history/share.py into rows; finality.py: a
record accepted or rejected with success is never acquired again.
"""
