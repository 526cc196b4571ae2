"""Acknowledged writes judged against what Kafka promises when machines lose power, and every
replica's final log of every partition compared (docs/checkers.md, "Durability").

settings: the run's durability settings (the history header's `durability`, plan.json, the
committed metadata log); power: the power losses the nemesis recorded; partitions: replica
sets, ISRs and final leaders from the committed metadata log; lost: each lost acknowledged
write classified (documented behaviour, or a failure); replicas: the per-replica rules over the
final data logs and each broker's high-watermark checkpoint; check: the family's entry.
"""
