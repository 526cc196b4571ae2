"""ZooKeeper-mode controller epochs from the brokers' logs (run dir `logs/<node>/stdout.log`).

parse: log lines -> elections, resignations, requests acted on or refused; rules: the epoch
rules and the notes measuring how long a deposed controller went on; check: one run directory.
"""
