"""Distances: the official KDE-KL recipe against scipy, KS/W1 against scipy, the KDE-KL null floor of spec 3."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st

from attnlab.sakai import distances as dist


@pytest.mark.slow
def test_official_recipe_matches_scipy():
    r = np.random.default_rng(0)
    x, y = 0.6 * r.normal(size=3000), 0.6 * r.standard_t(6, size=2000)
    grid = dist.official_grid(x, y)
    assert grid.size == 500 and grid[0] == min(x.min(), y.min()) and grid[-1] == max(x.max(), y.max())
    np.testing.assert_allclose(np.asarray(dist.kde(jnp.asarray(x), jnp.asarray(grid))), st.gaussian_kde(x)(grid),
                               rtol=1e-10, atol=1e-14)
    ref = st.entropy(st.gaussian_kde(x)(grid) + 1e-12, st.gaussian_kde(y)(grid) + 1e-12)
    assert abs(float(dist.kde_kl(jnp.asarray(x), jnp.asarray(y), jnp.asarray(grid))) - ref) < 1e-12
    ks, w1 = dist.ks_w1(jnp.asarray(x), jnp.asarray(y))
    assert abs(float(ks) - st.ks_2samp(x, y).statistic) < 1e-12
    assert abs(float(w1) - st.wasserstein_distance(x, y)) < 1e-10
    lo, hi = np.percentile(np.asarray(dist.bootstrap_ks_w1(jax.random.key(0), jnp.asarray(x), jnp.asarray(y), 100)[1]),
                           [2.5, 97.5])
    assert lo < float(w1) < hi


def test_kde_kl_null_floor(key):
    """Spec 3 [C]: two independent N = 50k samples of N(0, 0.392) on [-4, 4] give KDE-KL 5.5e-4 (sd 2.4e-4).
    Tolerance: 5 SE of our mean over R replicates + half a unit of the printed digit."""
    R, N = 8, 50_000
    z = np.sqrt(0.392) * np.asarray(jax.random.normal(key, (R, 2, N)))
    grid = jnp.linspace(-4, 4, 500)
    kl = np.array([float(dist.kde_kl(jnp.asarray(a), jnp.asarray(b), grid)) for a, b in z])
    assert abs(kl.mean() - 5.5e-4) <= 5 * kl.std(ddof=1) / np.sqrt(R) + 5e-5, kl.mean()
    assert abs(kl.std(ddof=1) - 2.4e-4) < 2.4e-4  # spread of the same order (a loose sanity bound)


def test_rb_density_is_a_density(key):
    v = 0.2 + 0.4 * np.asarray(jax.random.uniform(key, (5000,)))
    grid = np.linspace(-6, 6, 2001)
    f = np.asarray(dist.rb_density(jnp.asarray(v), jnp.asarray(grid)))
    assert abs(np.trapezoid(f, grid) - 1) < 1e-8
    assert abs(np.trapezoid(grid**2 * f, grid) - v.mean()) < 1e-8
    assert dist.kl_quadrature(f, f, grid) == 0.0
    # the direct formula (5000 points: the last block of 8192 is mostly padding)
    direct = st.norm.pdf(grid[:, None], scale=np.sqrt(v)[None, :]).mean(1)
    np.testing.assert_allclose(f, direct, rtol=1e-12, atol=1e-300)
    assert abs(dist.ks_critical(100, 100, 0.05) - 1.358 * np.sqrt(2 / 100)) < 1e-3


def test_poisson_weights_and_row_distances(key):
    """Poisson(1) bootstrap weights by CDF inversion have the Poisson(1) law; ks_w1_rows is ks_w1 row by row (to
    round-off)."""
    k1, k2 = jax.random.split(key)
    w = np.asarray(dist.poisson1(k1, (400_000,))).astype(int)
    counts = np.bincount(w, minlength=7)[:7]
    expected = st.poisson(1).pmf(np.arange(7))
    assert st.chisquare(counts, expected / expected.sum() * counts.sum()).pvalue > 1e-3
    assert w.max() < 20
    x = np.asarray(jax.random.normal(k2, (3, 2, 500)))
    ks, w1 = dist.ks_w1_rows(jnp.asarray(x[:, 0]), jnp.asarray(x[:, 1] + 0.1))
    for i in range(3):
        ks_i, w1_i = dist.ks_w1(jnp.asarray(x[i, 0]), jnp.asarray(x[i, 1] + 0.1))
        # the rows run in NumPy, ks_w1 in XLA (which divides by multiplying with the reciprocal): round-off apart
        assert abs(float(ks[i]) - float(ks_i)) < 1e-15 and abs(float(w1[i]) - float(w1_i)) < 1e-14
