"""Where checkers/api.py finds `run_slots` today: the fenced-producer-read rule, with its
judgement of a run's plan, is checkers/queue/rules/fencing.py."""

from checkers.queue.rules.fencing import run_slots

__all__ = ["run_slots"]
