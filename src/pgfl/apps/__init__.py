"""The applications above the backends: a run, the privacy–utility frontier, the audit.

:mod:`~pgfl.apps.runner` runs an experiment's plan on a backend and writes its results;
:mod:`~pgfl.apps.frontier` runs every registered scheme at equal ε (``pgfl reproduce
frontier``, ``frontier-adversary``); :mod:`~pgfl.apps.audit` attacks the engine's own
messages. They use :mod:`pgfl.experiments` (configurations, plans, results) and
:mod:`pgfl.backends` (where a batch runs), which never import them.
"""
