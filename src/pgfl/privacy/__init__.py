"""Privacy of GFL: the mechanisms, their accounting and secure aggregation.

* :mod:`pgfl.privacy.mechanisms` — one object per scheme (noise in the engine's round,
  what it releases, whom it protects) and the registry of their names;
* :mod:`pgfl.privacy.accounting` — releases and transcripts, accountants (``dp_accounting``
  for the tight ones), ε over iterations, calibration, the papers' bounds;
* :mod:`pgfl.privacy.secagg` — secure aggregation with real cryptography.

This package holds no command and runs no experiment.
"""
