"""Infinite-width limit of one multi-head attention layer (Sakai, Karakida, Imaizumi, NeurIPS 2025, arXiv:2506.00846).

Public surface:

* :mod:`attnlab.sakai.reference` -- brute-force reference sampler, the model exactly as the official code runs it;
* :mod:`attnlab.sakai.sampler` -- exact fast samplers of the same finite-width law, cost free of n (spec 4.3);
* :mod:`attnlab.sakai.limit` -- the n -> infinity law (Gaussian conditional on Gaussian scores), H -> infinity,
  limit constants by quadrature;
* :mod:`attnlab.sakai.distances` -- official KDE-KL, KS and W1 with bootstrap intervals, Rao-Blackwellised densities.
"""

from attnlab.sakai.distances import bootstrap_ks_w1 as bootstrap_ks_w1
from attnlab.sakai.distances import kde_kl as kde_kl
from attnlab.sakai.distances import ks_w1 as ks_w1
from attnlab.sakai.distances import rb_density as rb_density
from attnlab.sakai.limit import input_gram as input_gram
from attnlab.sakai.limit import limit_moments as limit_moments
from attnlab.sakai.limit import sample_limit_first as sample_limit_first
from attnlab.sakai.limit import sample_limit_tokens as sample_limit_tokens
from attnlab.sakai.reference import sample_reference as sample_reference
from attnlab.sakai.reference import sample_reference_scores as sample_reference_scores
from attnlab.sakai.sampler import sample_first_token as sample_first_token
from attnlab.sakai.sampler import sample_first_token_sweep as sample_first_token_sweep
from attnlab.sakai.sampler import sample_scores as sample_scores
from attnlab.sakai.sampler import sample_tokens as sample_tokens

__all__ = ["bootstrap_ks_w1", "kde_kl", "ks_w1", "rb_density", "sample_first_token", "sample_first_token_sweep",
           "sample_scores", "sample_tokens", "sample_reference", "sample_reference_scores", "input_gram",
           "limit_moments", "sample_limit_first", "sample_limit_tokens"]
