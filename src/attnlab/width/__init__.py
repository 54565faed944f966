"""Infinite-width limit of one multi-head attention layer (Sakai, Karakida, Imaizumi, NeurIPS 2025, arXiv:2506.00846).

Public surface:

* :mod:`attnlab.width.finite` -- brute-force reference sampler, the model exactly as the official code runs it;
* :mod:`attnlab.width.exact` -- exact fast samplers of the same finite-width law, cost free of n (spec 4.3);
* :mod:`attnlab.width.limit` -- the n -> infinity law (Gaussian conditional on Gaussian scores), H -> infinity,
  limit constants by quadrature;
* :mod:`attnlab.width.distances` -- official KDE-KL, KS and W1 with bootstrap intervals, Rao-Blackwellised densities.
"""

from attnlab.width.distances import bootstrap_ks_w1 as bootstrap_ks_w1
from attnlab.width.distances import kde_kl as kde_kl
from attnlab.width.distances import ks_w1 as ks_w1
from attnlab.width.distances import rb_density as rb_density
from attnlab.width.exact import sample_first_token as sample_first_token
from attnlab.width.exact import sample_first_token_sweep as sample_first_token_sweep
from attnlab.width.exact import sample_scores as sample_scores
from attnlab.width.exact import sample_tokens as sample_tokens
from attnlab.width.finite import sample_reference as sample_reference
from attnlab.width.finite import sample_reference_scores as sample_reference_scores
from attnlab.width.limit import input_gram as input_gram
from attnlab.width.limit import limit_moments as limit_moments
from attnlab.width.limit import sample_limit_first as sample_limit_first
from attnlab.width.limit import sample_limit_tokens as sample_limit_tokens

__all__ = ["bootstrap_ks_w1", "kde_kl", "ks_w1", "rb_density", "sample_first_token", "sample_first_token_sweep",
           "sample_scores", "sample_tokens", "sample_reference", "sample_reference_scores", "input_gram",
           "limit_moments", "sample_limit_first", "sample_limit_tokens"]
