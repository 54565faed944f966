r"""Observables of a token cloud on S^{d-1}.

* interaction energy E_beta = (1/(2 beta N^2)) sum_{ij} exp(beta <x_i, B x_j>) (B = Q^T K; B = Id is GLPR's energy,
  B = S the energy E_S for Q^T K = V = S), in log-safe form: log E = logsumexp_{ij} beta <x_i, B x_j> - log(2 beta N^2),
  computed with the blocked kernel (never N x N);
* the bounded order parameter eps_beta = (1/beta) log((1/N^2) sum_{ij} e^{beta (<x_i, x_j> - 1)}) in [-2, 0], 0 for
  one cluster;
* |mean token| (Kuramoto), the eigenvalues of the second-moment (nematic) matrix (1/N) sum x_i x_i^T, and the mass
  fraction in E_max, tr(P_E Sigma);
* clusters: connected components of {<x_i, x_j> > cos(c beta^{-1/2})} among core tokens of a deterministic
  subsample, every token then assigned to the nearest component centre; components below a minimum
  mass are not counted (stragglers);
* the empirical density of the angle (S^1, or the azimuth on S^2) in bins.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.bruno import circle
from attnlab.bruno.attention import log_normalizer

__all__ = ["log_energy", "order_parameter", "moments", "observe_fn", "clusters", "angle_histogram", "angles",
           "fourier_chi2", "merge_times", "track_modes"]


def log_energy(x, B, beta, *, dtype=None, circle_order: int = 0):
    """log E_beta for tokens x (N, d) and matrix B (blocked, overflow-free; with ``circle_order`` > 0, tokens on the
    circle and ``B = c I``: the exact Fourier sums of :func:`attnlab.bruno.circle.log_normalizer_circle`)."""
    n, d = x.shape
    if circle_order:
        lz = circle.log_normalizer_circle(x, jnp.asarray(B)[0, 0], beta, order=circle_order)
    else:
        lz = log_normalizer(x, jnp.eye(d), jnp.asarray(B), beta, dtype=dtype)  # beta <I x_i, B x_j>
    return jax.scipy.special.logsumexp(lz) - jnp.log(2 * beta * n**2)


def order_parameter(x, beta, *, circle_order: int = 0):
    """eps_beta in [-2, 0] (B = Id; ``circle_order`` as in :func:`log_energy`, for ``c = 1``)."""
    n, d = x.shape
    if circle_order:
        lz = circle.log_normalizer_circle(x, 1.0, beta, order=circle_order)
    else:
        lz = log_normalizer(x, jnp.eye(d), jnp.eye(d), beta)
    return (jax.scipy.special.logsumexp(lz) - 2 * jnp.log(n) - beta) / beta


def moments(x, emax=None):
    """|mean|, eigenvalues of (1/N) X^T X (ascending) and, if an E_max basis (d, k) is given, tr(P_E Sigma)."""
    n = x.shape[0]
    sigma = x.T @ x / n
    out = {"mean_norm": jnp.linalg.norm(jnp.mean(x, axis=0)), "second_moment_eigs": jnp.linalg.eigvalsh(sigma)}
    if emax is not None:
        e = jnp.asarray(emax)
        out["emax_mass"] = jnp.trace(e.T @ sigma @ e)
    return out


def observe_fn(B, beta, emax=None, energy_dtype=None, on_circle: bool = False):
    """A jitted ``observe(x) -> dict`` for :func:`attnlab.bruno.integrate.simulate` (works on (N, d) or batches).
    ``on_circle``: the tokens stay on the circle (d = 2) and ``B = c I``: both log-normalisers from the exact Fourier
    sums (:mod:`attnlab.bruno.circle`) instead of the N^2 blocked kernel."""
    orders = ((circle.circle_order(beta * circle.require_circle(np.eye(2), B)), circle.circle_order(beta))
              if on_circle else (0, 0))
    B = jnp.asarray(B)

    def one(x):
        out = moments(x, emax)
        out["log_energy"] = log_energy(x, B, beta, dtype=energy_dtype, circle_order=orders[0])
        out["order_parameter"] = order_parameter(x, beta, circle_order=orders[1])
        return out

    single = jax.jit(one)
    batch = jax.jit(jax.vmap(one))
    return lambda x: batch(x) if x.ndim == 3 else single(x)


def clusters(x, beta: float, c: float = 1.0, sample: int = 2000, min_mass: float = 0.01, min_core: float = 0.01,
             refine: int = 3):
    """Cluster count, centres (k, d) and masses (k,) by connected components at angle c beta^{-1/2}.

    Components are found on every ``ceil(N / sample)``-th token, among the core tokens (at least a fraction
    ``min_core`` of the subsample, and 3, within the threshold angle: DBSCAN-style); all tokens are then
    assigned to the nearest centre (largest inner product) and centres recomputed as normalised means, then
    refined by ``refine`` mean-shift steps (mean of the tokens within the threshold angle: the mode, robust to
    stragglers). Components with mass < ``min_mass`` are dropped. Returns (count, centres, masses) sorted by
    azimuth angle of the centre.
    """
    from scipy.sparse.csgraph import connected_components  # here, not with the paper: only clustering needs it

    x = np.asarray(x, float)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"tokens must have shape (N, d) with N >= 1 (got {x.shape})")
    stride = max(1, -(-x.shape[0] // sample))
    xs = x[::stride]
    adj = (xs @ xs.T) > np.cos(c / np.sqrt(beta))
    core = adj.sum(axis=1) >= max(3, int(min_core * len(xs)))  # DBSCAN-style core tokens: stragglers do not bridge
    if core.any():
        xs, adj = xs[core], adj[np.ix_(core, core)]
    _, labels = connected_components(adj, directed=False)
    cent = np.stack([xs[labels == k].sum(0) for k in range(labels.max() + 1)])
    cent = cent / np.maximum(np.linalg.norm(cent, axis=1, keepdims=True), 1e-300)
    assign = np.argmax(x @ cent.T, axis=1)
    masses = np.bincount(assign, minlength=len(cent)) / x.shape[0]
    keep = masses >= min_mass
    cent = np.stack([x[assign == k].sum(0) for k in np.flatnonzero(keep)]) if keep.any() else cent[:0]
    cent = cent / np.linalg.norm(cent, axis=1, keepdims=True) if len(cent) else cent
    for _ in range(refine):  # mean shift: the centre is the mean of the tokens within the threshold angle (the mode)
        near = (x @ cent.T) > np.cos(c / np.sqrt(beta))
        sums = near.T.astype(float) @ x
        ok = near.any(axis=0)
        cent[ok] = sums[ok] / np.linalg.norm(sums[ok], axis=1, keepdims=True)
    masses = masses[keep]
    order = np.argsort(np.mod(np.arctan2(cent[:, 1], cent[:, 0]), 2 * np.pi)) if len(cent) else np.arange(0)
    return int(keep.sum()), cent[order], masses[order]


def angles(x):
    """Angle on S^1 (d = 2) or azimuth on S^2 (d = 3), in [0, 2 pi)."""
    x = np.asarray(x)
    return np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)


def angle_histogram(x, bins: int = 128):
    """Bin probabilities (bins,) of the angle/azimuth on equal bins of [0, 2 pi) and the bin edges."""
    edges = np.linspace(0, 2 * np.pi, bins + 1)
    counts, _ = np.histogram(angles(x), bins=edges)
    return counts / np.asarray(x).shape[0], edges


def fourier_chi2(hist, probs, centres, n_tokens: int, n_max: int = 8, shift=None):
    r"""Goodness of fit of an angle histogram to bin probabilities through its first Fourier moments.

    With ``c_n = sum_b h_b e^{i n theta_b}`` (bin centres theta_b, n = 1..n_max; real and imaginary parts, k = 2 n_max
    numbers), the statistic is ``(c(h) - c(p))^T C^{-1} (c(h) - c(p))`` with ``C`` the multinomial covariance of
    ``c(h)`` for ``n_tokens`` i.i.d. draws from ``p``: ``C = (F diag(p) F^T - (F p)(F p)^T) / n_tokens``. If the
    histogram is a draw from ``p`` it is chi^2 with k degrees of freedom (mean k, standard deviation sqrt(2k)).
    ``shift``: the histogram is a draw from ``p + shift`` instead (a known bias); the statistic is then noncentral
    chi^2 with noncentrality ``lambda = c(shift)^T C^{-1} c(shift)``. Returns ``(statistic, k, lambda)``: mean
    ``k + lambda``, variance ``2 (k + 2 lambda)``.
    """
    n = np.arange(1, n_max + 1)
    F = np.concatenate([np.cos(np.outer(n, centres)), np.sin(np.outer(n, centres))])
    p = np.asarray(probs, float)
    C = ((F * p) @ F.T - np.outer(F @ p, F @ p)) / n_tokens
    d = F @ (np.asarray(hist, float) - p)
    lam = 0.0
    if shift is not None:
        e = F @ np.asarray(shift, float)
        lam = float(e @ np.linalg.solve(C, e))
    return float(d @ np.linalg.solve(C, d)), 2 * n_max, lam


def merge_times(times, counts):
    """Times at which the cluster count drops (merges), as (time, count_before, count_after) triples."""
    out = []
    for k in range(1, len(counts)):
        if counts[k] < counts[k - 1]:
            out.append((float(times[k]), int(counts[k - 1]), int(counts[k])))
    return out


def track_modes(snapshots, centres0, beta: float, c: float = 1.0, iters: int = 10):
    """Follow K cluster modes through snapshots (T, N, d) by mean shift with a flat kernel of angle c beta^{-1/2},
    each snapshot seeded with the previous modes (the first with ``centres0``, (K, d)). Returns (T, K, d).

    Two tracked modes that fall on the same cluster coincide from then on: their angle gives the merge time."""
    cent = np.asarray(centres0, float).copy()
    cent /= np.linalg.norm(cent, axis=1, keepdims=True)
    cos_c = np.cos(c / np.sqrt(beta))
    out = []
    for x in snapshots:
        x = np.asarray(x, float)
        for _ in range(iters):
            near = (x @ cent.T) > cos_c
            sums = near.T.astype(float) @ x
            ok = near.any(axis=0)
            cent[ok] = sums[ok] / np.linalg.norm(sums[ok], axis=1, keepdims=True)
        out.append(cent.copy())
    return np.stack(out)
