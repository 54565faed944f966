"""Infinite-width limit of one multi-head attention layer at 1/sqrt(n) scaling: Sakai, Karakida, Imaizumi,
"Infinite-Width Limit of a Single Attention Layer: Analysis via Tensor Programs" (NeurIPS 2025, arXiv:2506.00846).

* ``model`` -- the input activation psi (clip, ReLU, identity) and the model's argument checks (Example 3.1);
* ``reference`` -- the brute-force sampler: the finite-width layer exactly as the paper's Algorithm 1 runs it;
* ``sampler`` -- exact width-free samplers of the same finite-width law (cost free of the width n);
* ``limit`` -- the n -> infinity law (Gaussian conditional on Gaussian similarity scores) and H -> infinity;
* ``distances`` -- KDE-KL as in the official code, KS and W1 with bootstrap intervals, Rao-Blackwellised densities;
* ``native`` -- the C kernels of the sampler, the reference statistic and the distances (``implementation``);
* ``presets``, ``figures`` -- the paper's experiments (Figs. 1-3, 5) and their figures;
* ``joint`` -- beyond the paper: the joint law of the outputs over many sequences (finite H, Gaussian given the heads'
  scores) for deep stacks, at infinite width and exactly at finite width;
* ``kernel`` -- the infinite-head kernel (NNGP) of attention at 1/sqrt(n) scaling by randomised QMC, composed with
  the dense/ReLU/erf kernel maps; ``kernel_presets``, ``regression``, ``kernel_figures`` -- its presets.

The finite model (:func:`sample_reference`, :func:`sample_first_token`) and its infinite-width law
(:func:`sample_limit_first`, :func:`limit_moments`) take the same arguments (``n_heads``, ``n_tokens``,
``activation``), so a check of one against the other compares the same layer. Notation: the paper's width n, heads
H, sequence length s (our ``n_tokens``), per-head width n_H (our ``head_width``). The functions below compute in
float64 (:func:`attnlab.runtime.float64`) and check their arguments first (their own checks, or
:mod:`attnlab.sakai.domain`'s): a one-line ValueError names an argument outside the domain.
"""

from attnlab._validate import public as _public
from attnlab.sakai import distances as _distances
from attnlab.sakai import domain as _domain
from attnlab.sakai import joint as _joint
from attnlab.sakai import kernel as _kernel
from attnlab.sakai import limit as _limit
from attnlab.sakai import model as _model
from attnlab.sakai import reference as _reference
from attnlab.sakai import sampler as _sampler
from attnlab.sakai.kernel import Kernel as Kernel
from attnlab.sakai.model import ACTIVATIONS as ACTIVATIONS
from attnlab.sakai.model import LAYERS as LAYERS

psi = _public(_model.psi, _domain.psi)
sample_reference = _public(_reference.sample_reference)
sample_reference_first = _public(_reference.sample_reference_first)
sample_reference_scores = _public(_reference.sample_reference_scores)
sample_first_token = _public(_sampler.sample_first_token)
sample_first_token_sweep = _public(_sampler.sample_first_token_sweep)
sample_tokens = _public(_sampler.sample_tokens)
sample_scores = _public(_sampler.sample_scores)
input_gram = _public(_limit.input_gram)
sample_limit_first = _public(_limit.sample_limit_first)
sample_limit_tokens = _public(_limit.sample_limit_tokens)
limit_moments = _public(_limit.limit_moments)
kde_kl = _public(_distances.kde_kl, _domain.kde_kl)
ks_w1 = _public(_distances.ks_w1, _domain.ks_w1)
bootstrap_ks_w1 = _public(_distances.bootstrap_ks_w1, _domain.bootstrap_ks_w1)
rb_density = _public(_distances.rb_density, _domain.rb_density)
sample_reference_stack = _public(_reference.sample_reference_stack)
sample_joint_limit = _public(_joint.sample_joint_limit)
sample_network = _public(_joint.sample_network)
projection_excess_kurtosis = _public(_joint.projection_excess_kurtosis)
token_kernel = _public(_kernel.token_kernel)
attention_kernel = _public(_kernel.attention_kernel)
attention_blocks = _public(_kernel.attention_blocks)
dense_kernel = _public(_kernel.dense_kernel)
relu_kernel = _public(_kernel.relu_kernel)
erf_kernel = _public(_kernel.erf_kernel)
stack_kernel = _public(_kernel.stack_kernel)
pooled_kernel = _public(_kernel.pooled_kernel)

__all__ = ["ACTIVATIONS", "psi", "sample_reference", "sample_reference_first", "sample_reference_scores",
           "sample_first_token", "sample_first_token_sweep", "sample_tokens", "sample_scores", "input_gram",
           "sample_limit_first", "sample_limit_tokens", "limit_moments", "kde_kl", "ks_w1", "bootstrap_ks_w1",
           "rb_density", "LAYERS", "Kernel", "sample_reference_stack", "sample_joint_limit", "sample_network",
           "projection_excess_kurtosis", "token_kernel", "attention_kernel", "attention_blocks", "dense_kernel",
           "relu_kernel", "erf_kernel", "stack_kernel", "pooled_kernel"]
