"""Frozen samples of the replica integrals: teacher fields, labels and the two channel noises, drawn once
(common random numbers, so the fixed-point map is deterministic), and the student fields built from them."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs
from attnlab.duranthon.data import check_model, length_law, sample_scores_and_normals

__all__ = ["FrozenSamples", "frozen_samples"]


class FrozenSamples(NamedTuple):
    """The per-sample draws of the replica integrals, fixed once (common random numbers) by :func:`frozen_samples`,
    each (n, L_max) unless stated: ``chi`` and ``zeta``, the teacher fields ``chi* = X k*/sqrt(D)`` and
    ``zeta* = X v*/sqrt(D)``; ``y`` (n,), the labels; ``mask``, True on the valid tokens of each sequence (random
    lengths are padded to L_max); ``xi_k`` and ``xi_v``, the standard normals of the two channel noises, from which
    the student fields are ``omega^k = m_k chi* + s_k xi^k`` and ``omega^v = m_v zeta* + s_v xi^v`` with
    ``s_a = sqrt(q_a - m_a^2)`` (:mod:`attnlab.duranthon.replica`)."""

    chi: jax.Array
    zeta: jax.Array
    y: jax.Array
    mask: jax.Array
    xi_k: jax.Array
    xi_v: jax.Array


@programs.jit
def _sobol_seed(key):
    """The Sobol scrambling's seed drawn from ``key``: an integer in [0, 2^31 - 1)."""
    return jax.random.randint(key, (), 0, 2**31 - 1)


def frozen_samples(key, model: str, nu, L, n: int, noise_std: float = 0.0, qmc: bool = False) -> FrozenSamples:
    """Teacher fields, labels and the two Gaussian noises of the channel, drawn once (common random numbers).

    ``qmc=True``: randomised quasi-Monte Carlo instead, one scrambled Sobol point (scipy.stats.qmc.Sobol, Owen
    scrambling seeded from ``key``) of dimension 4 L_max + 3 per sample, mapped by inverse CDFs: the base scores,
    values and both channel noises through the Gaussian quantile, the label noise likewise, the length through the
    length law's CDF and the location uniformly on the valid tokens (spiked-SLR) or through the CDF of
    ``softmax(nu chi*)`` (max-SLR; argmax at nu = inf). Same law as the Monte Carlo draws
    (:func:`attnlab.duranthon.data.sample_scores`); n a power of 2 keeps the Sobol balance properties."""
    nu = check_model(model, nu)
    if not qmc:
        s, (xi_k, xi_v) = sample_scores_and_normals(key, model, nu, L, n, 2, noise_std)
        return FrozenSamples(s.chi, s.zeta, s.y, s.mask, xi_k, xi_v)
    from scipy.special import ndtri
    from scipy.stats import qmc as sqmc

    law = length_law(L)
    Lm = law.L_max
    seed = int(_sobol_seed(key))
    u = sqmc.Sobol(4 * Lm + 3, scramble=True, seed=seed).random(n)
    u = np.clip(u, 1e-16, 1 - 1e-16)
    g = ndtri(u[:, : 4 * Lm + 1])
    base, zeta, xi_k, xi_v, noise = (g[:, :Lm], g[:, Lm:2 * Lm], g[:, 2 * Lm:3 * Lm], g[:, 3 * Lm:4 * Lm],
                                     g[:, 4 * Lm])
    cdf_len = np.cumsum([sum(p for v, p in zip(law.values, law.probs) if v == ell) for ell in range(1, Lm + 1)])
    lengths = 1 + np.minimum(np.searchsorted(cdf_len, u[:, 4 * Lm + 1], side="right"), Lm - 1)
    mask = np.arange(Lm)[None, :] < lengths[:, None]
    ue = u[:, 4 * Lm + 2]
    if model == "spiked":
        eps = np.minimum((ue * lengths).astype(int), lengths - 1)
    else:
        if math.isinf(nu):
            eps = np.argmax(np.where(mask, base, -np.inf), axis=1)
        else:
            z = np.where(mask, nu * base, -np.inf)
            p = np.exp(z - z.max(1, keepdims=True))
            cdf = np.cumsum(p / p.sum(1, keepdims=True), axis=1)
            eps = np.minimum((cdf < ue[:, None]).sum(1), lengths - 1)
    onehot = np.arange(Lm)[None, :] == eps[:, None]
    chi = base + (math.sqrt(nu) if model == "spiked" else 0.0) * onehot
    chi, zeta = np.where(mask, chi, 0.0), np.where(mask, zeta, 0.0)
    y = np.sum(np.where(onehot, zeta, 0.0), axis=1) + noise_std * noise
    return FrozenSamples(*jax.device_put(tuple(np.ascontiguousarray(a) for a in (chi, zeta, y, mask, xi_k, xi_v))))


def _omegas(order, samples: FrozenSamples, xp=jnp):
    """The fields omega^k = m_k chi* + s_k xi^k and omega^v = m_v zeta* + s_v xi^v (zero on padded tokens) with
    s_a = sqrt(q_a - m_a^2): ``(omega^k, omega^v, s_k, s_v)``; ``xp`` is jax.numpy (traced) or numpy (host arrays,
    :func:`_host`)."""
    m_k, q_k, V_k, m_v, q_v, V_v = order
    s_k = xp.sqrt(xp.maximum(q_k - m_k**2, 0.0))
    s_v = xp.sqrt(xp.maximum(q_v - m_v**2, 0.0))
    om_k = m_k * samples.chi + s_k * samples.xi_k
    om_v = xp.where(samples.mask, m_v * samples.zeta + s_v * samples.xi_v, 0.0)
    return om_k, om_v, s_k, s_v


def _host(samples: FrozenSamples) -> FrozenSamples:
    """The frozen samples as host (NumPy) arrays: the inner solver gathers and reduces them on the host."""
    return FrozenSamples(*(np.asarray(a) for a in samples))
