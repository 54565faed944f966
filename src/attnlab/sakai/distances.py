r"""Distances between one-dimensional laws, with honest uncertainty.

* **Official KDE-KL** (``kl_divergence*.py`` of the official code): scipy's ``gaussian_kde`` (Scott factor
  ``N^{-1/5}``, bandwidth ``factor * std(ddof=1)``) of each sample on a 500-point grid spanning the global min to max
  of all samples of the experiment, plus 1e-12, then the discrete KL of scipy's ``entropy`` (which renormalises).
  Biased upward by the KDE noise: report it with its **null floor** (two independent limit samples:
  5.5e-4 at N = 50k).
* **Kolmogorov-Smirnov** ``sup |F - G|`` and **1-Wasserstein** ``int |F - G|`` from the pooled sorted sample, with
  Poisson-bootstrap percentile intervals (each sample is one network, so networks are resampled) and the asymptotic
  two-sample KS critical value.
* **Rao-Blackwellised densities**: both the finite-width and the limit law are Gaussian scale
  mixtures ``y = sqrt(v) eps``, so ``f(y) = E phi(y; 0, v)`` is estimated by ``mean_m phi(y; 0, v_m)`` with no
  bandwidth; KL by trapezoidal quadrature of such densities.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs

__all__ = ["official_grid", "kde", "kde_kl", "ks_w1", "ks_w1_rows", "bootstrap_ks_w1", "poisson1", "ks_critical",
           "rb_density", "rb_cdf", "kl_quadrature", "KDE_FLOOR"]

KDE_FLOOR = 1e-12


def official_grid(*samples, n_points: int = 500) -> np.ndarray:
    """The official evaluation grid: ``n_points`` equispaced points from the global min to the global max."""
    lo = min(float(np.min(s)) for s in samples)
    hi = max(float(np.max(s)) for s in samples)
    return np.linspace(lo, hi, n_points)


@functools.partial(jax.jit, static_argnames=("block",))
def kde(x, grid, block: int = 8192):
    """scipy ``gaussian_kde(x)(grid)`` for 1-d x: Scott's factor ``N^{-1/5}``, bandwidth ``factor * std(x, ddof=1)``.

    Points and grid are divided by ``sqrt(2) bw`` once, so the inner loop is ``exp(-(g - x)^2)`` with no division;
    the padding points are +inf (their kernel is exactly 0), so the loop needs no mask either. On CPU the Sakai
    presets use the grid recurrence of :func:`attnlab.sakai.native.kde_rows` instead; ``bench/dependencies.py`` (row
    ``kde``) compares both with ``scipy.stats.gaussian_kde`` on ``sakai-vary-width``."""
    N = x.shape[-1]
    bw = N ** (-0.2) * jnp.std(x, ddof=1)
    scale = 1.0 / (math.sqrt(2.0) * bw)
    pad = (-N) % block
    xb = jnp.concatenate([x * scale, jnp.full((pad,), jnp.inf)]).reshape(-1, block)
    gs = grid * scale

    def body(acc, xs):
        z = gs[:, None] - xs[None, :]
        return acc + jnp.sum(jnp.exp(-z * z), 1), None

    acc, _ = jax.lax.scan(body, jnp.zeros(grid.shape), xb)
    return acc / (N * bw * math.sqrt(2 * math.pi))


@programs.jit
def _discrete_kl(p, q):
    """scipy.stats.entropy(p, q): both renormalised to sum 1."""
    p, q = p / jnp.sum(p), q / jnp.sum(q)
    return jnp.sum(jnp.where(p > 0, p * jnp.log(p / q), 0.0))


def kde_kl(x, y, grid):
    """Official KDE-KL(x || y) on ``grid`` (densities + 1e-12, scipy-entropy normalisation)."""
    return _discrete_kl(kde(x, grid) + KDE_FLOOR, kde(y, grid) + KDE_FLOOR)


def _pooled(x, y):
    z = jnp.concatenate([x, y])
    order = jnp.argsort(z)
    return z[order], (order < x.shape[0]).astype(jnp.float64)


def _ks_w1_weighted(zs, is_x, wx, wy):
    """KS and W1 of the two weighted empirical laws on the pooled sorted points (weights in pooled order)."""
    Fx = jnp.cumsum(wx * is_x) / jnp.sum(wx * is_x)
    Fy = jnp.cumsum(wy * (1 - is_x)) / jnp.sum(wy * (1 - is_x))
    gap = jnp.abs(Fx - Fy)
    return jnp.max(gap), jnp.sum(gap[:-1] * jnp.diff(zs))


@programs.jit
def ks_w1(x, y):
    """Two-sample Kolmogorov-Smirnov statistic and 1-Wasserstein distance ``(ks, w1)`` (exact, via sorting)."""
    zs, is_x = _pooled(x, y)
    one = jnp.ones_like(zs)
    return _ks_w1_weighted(zs, is_x, one, one)


# CDF of Poisson(1) at k = 0..19; it is 1.0 in float64 from k = 18 on (tail below 1e-17)
_POISSON1_CDF = tuple(float(x) for x in np.cumsum([math.exp(-1.0) / math.factorial(k) for k in range(20)]))


def poisson1(key, shape):
    """Poisson(1) draws by inversion of its CDF table: ``k = #{j : F(j) <= u}``, one uniform and a fixed number of
    comparisons each, with no data-dependent loop (``jax.random.poisson`` draws by a rejection loop)."""
    u = jax.random.uniform(key, shape)
    return sum((u >= c).astype(jnp.float64) for c in _POISSON1_CDF if c < 1.0)


def ks_w1_rows(x, y):
    """:func:`ks_w1` of each pair of rows ``(x[i], y[i])``: ``(ks, w1)``, each a NumPy array (rows,).

    On the host with NumPy's stable argsort, the same pooled-ECDF formula as :func:`ks_w1` (agreement to 1e-16):
    XLA's CPU sort calls a comparator function per comparison, NumPy's stable sort compares the float64 keys inline.
    ``bench/dependencies.py`` (row ``ks_w1``) compares the presets' C version,
    :func:`attnlab.sakai.native.ks_w1_rows`, with ``scipy.stats.ks_2samp`` and ``wasserstein_distance``."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    out = np.empty((x.shape[0], 2))
    for i, (a, b) in enumerate(zip(x, y)):
        z = np.concatenate([a, b])
        order = np.argsort(z, kind="stable")
        is_x = order < a.size
        gap = np.abs(np.cumsum(is_x) / a.size - np.cumsum(~is_x) / b.size)
        out[i] = gap.max(), np.sum(gap[:-1] * np.diff(z[order]))
    return out[:, 0], out[:, 1]


@functools.partial(programs.jit, static_argnames=("n_boot",))
def bootstrap_ks_w1(key, x, y, n_boot: int = 200):
    """Poisson-bootstrap replicates of ``(ks, w1)``, each (n_boot,): every network gets an independent Poisson(1)
    weight (:func:`poisson1`) and a replicate is the KS statistic and W1 of the two weighted empirical laws on the
    pooled points, sorted once for all replicates. A replicate that gives one sample no weight is NaN.
    ``bench/dependencies.py`` (row ``bootstrap``) compares this bootstrap with ``scipy.stats.bootstrap``, which
    resamples and sorts again per replicate."""
    zs, is_x = _pooled(x, y)

    def one(k):
        w = poisson1(k, zs.shape)
        return _ks_w1_weighted(zs, is_x, w, w)

    return jax.lax.map(one, jax.random.split(key, n_boot))


def ks_critical(n: int, m: int, alpha: float = 1e-3) -> float:
    """Asymptotic two-sample KS critical value ``c(alpha) sqrt((n + m)/(n m))``, ``c = sqrt(-log(alpha/2)/2)``."""
    return math.sqrt(-0.5 * math.log(alpha / 2.0)) * math.sqrt((n + m) / (n * m))


@functools.partial(programs.jit, static_argnames=("block",))
def rb_density(v, grid, block: int = 8192):
    """Rao-Blackwellised density ``mean_m phi(y; 0, v_m)`` of a Gaussian scale mixture, on ``grid``: ``-1/(2 v_m)``
    and ``1/sqrt(2 pi v_m)`` are formed once per point, so the inner loop has no division (padding: weight 0)."""
    pad = (-v.shape[0]) % block
    neg_half_prec = jnp.concatenate([-0.5 / v, jnp.zeros((pad,))]).reshape(-1, block)
    norm = jnp.concatenate([1.0 / jnp.sqrt(2 * math.pi * v), jnp.zeros((pad,))]).reshape(-1, block)
    g2 = grid**2

    def body(acc, blk):
        a, w = blk
        return acc + jnp.sum(w[None, :] * jnp.exp(g2[:, None] * a[None, :]), 1), None

    acc, _ = jax.lax.scan(body, jnp.zeros(grid.shape), (neg_half_prec, norm))
    return acc / v.shape[0]


@jax.jit
def rb_cdf(v, grid):
    """Rao-Blackwellised CDF ``mean_m Phi(y / sqrt(v_m))`` on ``grid``."""
    return jax.lax.map(lambda g: jnp.mean(jax.scipy.stats.norm.cdf(g / jnp.sqrt(v))), grid)


def kl_quadrature(f, g, grid) -> float:
    """``int f log(f/g)`` by the trapezoidal rule on ``grid`` (f, g densities evaluated there)."""
    f, g, grid = (np.asarray(a, np.float64) for a in (f, g, grid))
    integrand = np.where(f > 0, f * np.log(np.where(f > 0, f, 1.0) / g), 0.0)
    return float(np.trapezoid(integrand, grid))
