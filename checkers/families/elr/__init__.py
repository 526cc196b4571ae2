"""KIP-966's Eligible Leader Replicas: every partition's leader, ISR, ELR and last known ELR as
the committed metadata log sets them (replay.py), and as each broker answered
DescribeTopicPartitions in the observer's samples (observed.py); the election and ELR rules over
the committed records (rules.py); the high watermark's advance while the committed ISR is below
min.insync.replicas (watermark.py); check.py: the entry the registry calls.
"""
