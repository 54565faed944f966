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
float64 (:func:`attnlab.runtime.float64`).
"""

from attnlab.runtime import float64 as _float64
from attnlab.sakai import distances as _distances
from attnlab.sakai import joint as _joint
from attnlab.sakai import kernel as _kernel
from attnlab.sakai import limit as _limit
from attnlab.sakai import reference as _reference
from attnlab.sakai import sampler as _sampler
from attnlab.sakai.kernel import Kernel as Kernel
from attnlab.sakai.model import ACTIVATIONS as ACTIVATIONS
from attnlab.sakai.model import LAYERS as LAYERS
from attnlab.sakai.model import psi as psi

sample_reference = _float64(_reference.sample_reference)
sample_reference_first = _float64(_reference.sample_reference_first)
sample_reference_scores = _float64(_reference.sample_reference_scores)
sample_first_token = _float64(_sampler.sample_first_token)
sample_first_token_sweep = _float64(_sampler.sample_first_token_sweep)
sample_tokens = _float64(_sampler.sample_tokens)
sample_scores = _float64(_sampler.sample_scores)
input_gram = _float64(_limit.input_gram)
sample_limit_first = _float64(_limit.sample_limit_first)
sample_limit_tokens = _float64(_limit.sample_limit_tokens)
limit_moments = _float64(_limit.limit_moments)
kde_kl = _float64(_distances.kde_kl)
ks_w1 = _float64(_distances.ks_w1)
bootstrap_ks_w1 = _float64(_distances.bootstrap_ks_w1)
rb_density = _float64(_distances.rb_density)
sample_reference_stack = _float64(_reference.sample_reference_stack)
sample_joint_limit = _float64(_joint.sample_joint_limit)
sample_network = _float64(_joint.sample_network)
projection_excess_kurtosis = _float64(_joint.projection_excess_kurtosis)
token_kernel = _float64(_kernel.token_kernel)
attention_kernel = _float64(_kernel.attention_kernel)
attention_blocks = _float64(_kernel.attention_blocks)
dense_kernel = _float64(_kernel.dense_kernel)
relu_kernel = _float64(_kernel.relu_kernel)
erf_kernel = _float64(_kernel.erf_kernel)
stack_kernel = _float64(_kernel.stack_kernel)
pooled_kernel = _float64(_kernel.pooled_kernel)

__all__ = ["ACTIVATIONS", "psi", "sample_reference", "sample_reference_first", "sample_reference_scores",
           "sample_first_token", "sample_first_token_sweep", "sample_tokens", "sample_scores", "input_gram",
           "sample_limit_first", "sample_limit_tokens", "limit_moments", "kde_kl", "ks_w1", "bootstrap_ks_w1",
           "rb_density", "LAYERS", "Kernel", "sample_reference_stack", "sample_joint_limit", "sample_network",
           "projection_excess_kurtosis", "token_kernel", "attention_kernel", "attention_blocks", "dense_kernel",
           "relu_kernel", "erf_kernel", "stack_kernel", "pooled_kernel"]
