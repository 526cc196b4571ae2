"""Planned steps that change the cluster itself beside the workload: the ZooKeeper-to-KRaft
migration, rolling upgrades and downgrades, feature-level changes and controller membership
changes, each step an operation in the history.

Knows node handles and Kafka's tools (clusters/) and the history's names (history/); nothing of
the harness: what a driver needs of the run it is given (``family.Stage``: the cluster's
handles, the releases, the recorder). ``registry`` lists the families; each family module
declares its ``FAMILY`` (``family``: its plan.json key, how it is planned from a spec and the
seed, how it is loaded back and driven). ``recorded`` is the one shape every driver has
(``RecordedSteps``), on ``timed``'s thread; ``rolling`` is the upgrade family, whose driver
(``upgrade``) also carries out the user's feature steps (``feature_steps``) and controller
membership changes (``quorum_steps``); ``migration`` is the migration family.
"""
