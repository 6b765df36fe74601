"""Distributed DP's library parts: integer noise shares summed by secure aggregation.

Each client encodes its message as integers mod 2^b, adds an integer noise share, and
secure aggregation releases the sum (Kairouz, Liu & Steinke, arXiv:2102.06387; Agarwal,
Kairouz & Liu, arXiv:2110.04995). Three separable pieces, recomposable on their own; the
mechanism that stacks them in the engine is
:class:`pgfl.privacy.mechanisms.DistributedNoise`, its release for the accountants
:class:`pgfl.privacy.accounting.releases.DiscreteSumRelease`:

* :mod:`~pgfl.privacy.distributed.samplers` — exact integer samplers (Canonne, Kamath &
  Steinke's discrete Gaussian, an exact Poisson) from a word source: keyed words
  (simulation) or ``os.urandom`` (deployment); vectorized simulation samplers;
* :mod:`~pgfl.privacy.distributed.encoding` — clip, scale, randomized Hadamard rotation,
  (conditional) randomized rounding, codes mod 2^b, decoding; the grid's choice;
* :mod:`~pgfl.privacy.distributed.accounting` — Rényi bounds of the noisy integer sum
  (derived for sums of discrete Gaussians; KLS's Proposition 14; Skellam), its Gaussian
  dominance, subsampling, the rounding's sensitivity, and the exact 1-D mass functions
  the bounds are tested against.

>>> from pgfl.privacy.distributed import encoding, samplers
>>> encoding.padded_dim(3), samplers.exact_variance(10.0)
(4, (4, 3))
"""
