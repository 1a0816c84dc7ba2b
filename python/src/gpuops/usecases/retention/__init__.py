"""Use cases of registry retention: ``image prune`` (:mod:`.prune`) and ``image gc``
(:mod:`.gc`). A package of its own, beside ``images`` and ``releases``: prune reads the
release histories and locks (``releases``), and ``releases`` already uses ``images``."""
