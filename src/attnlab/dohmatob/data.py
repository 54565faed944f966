r"""Dohmatob's parameterisation of the SLR data (Section 3.1, eqs. 3-8): the secret token
``x_{J0} ~ N(c sqrt(d) u*, gamma^2 I)`` with ``c = sqrt(1 - gamma^2)``, noise tokens ``N(0, I)``,
``y = sigma(x_{J0} . v*) + eps xi``, J0 uniform.

With ``gamma = 1/sqrt(2)`` and the linear link this is Marion et al.'s model (:func:`attnlab.slr.data.sample_slr`,
same law; u*, v* = k*, v*). Both samplers are :func:`attnlab.slr.data.sample_tokens` (and its in-frame twin) with
this paper's signal mean and link.
"""

from __future__ import annotations

import jax.numpy as jnp

from attnlab.dohmatob.model import get_link, signal_mean_scale
from attnlab.slr.data import SLRBatch, sample_tokens, sample_tokens_in_frame

__all__ = ["sample_dohmatob", "sample_dohmatob_in_frame"]


def sample_dohmatob(key, u_star, v_star, n: int, L: int, gamma, eps=0.0, link="linear") -> SLRBatch:
    r"""``n`` sequences in R^d: ``x_{J0} ~ N(c sqrt(d) u*, gamma^2 I)``, ``c = sqrt(1 - gamma^2)`` (eq. 4), noise
    tokens ``N(0, I)``, ``y = sigma(x_{J0} . v*) + eps xi``, J0 uniform.

    gamma must lie in (0, 1); the link is a name of :data:`attnlab.dohmatob.model.LINKS` or a callable.
    """
    c = signal_mean_scale(gamma)
    sigma = get_link(link)
    d = u_star.shape[-1]
    return sample_tokens(key, u_star, v_star, n, L, gamma, eps, c * jnp.sqrt(d), sigma)


def sample_dohmatob_in_frame(key, n: int, L: int, gamma, eps, d, link="linear"):
    """Coordinates of Dohmatob's tokens in the frame ``(u*, v*, e1, e2)``: the same law as projecting
    :func:`sample_dohmatob` onto an orthonormal frame whose first two vectors are u*, v*.

    Returns ``(Z, y)``: ``Z`` of shape (n, L, 4) and the labels ``y`` (n,). The predictor of any (u, v) in the span
    of the frame depends on the tokens only through ``Z``, so a Monte Carlo risk costs O(n L), whatever d. The
    normals of Z come from :func:`attnlab._random.normal` (Threefry + Box-Muller, float64, exact in law): the Monte
    Carlo risks are bound by drawing them, and that generator avoids the float64 ``erf_inv`` of
    ``jax.random.normal`` (see :mod:`attnlab._random`).
    """
    from attnlab._random import normal

    c = signal_mean_scale(gamma)
    sigma = get_link(link)
    Z, y, _ = sample_tokens_in_frame(key, n, L, gamma, eps, c * jnp.sqrt(d), sigma, normal)
    return Z, y
