"""Observables: energy in log-safe form, the order parameter eps_beta in [-2, 0], clusters, histograms."""

import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.bruno import initial as init
from attnlab.bruno.observables import angle_histogram, clusters, log_energy, moments, order_parameter


def test_log_energy_matches_direct_sum(key):
    x = init.uniform_sphere(key, 300, 3)
    S = jnp.diag(jnp.array([1.0, 1.0, 0.5]))
    beta = 7.0
    direct = jnp.sum(jnp.exp(beta * x @ S @ x.T)) / (2 * beta * 300**2)
    assert float(log_energy(x, S, beta)) == pytest.approx(float(jnp.log(direct)), abs=1e-12)
    # beta = 500: e^beta overflows float64, the log-safe form does not
    assert np.isfinite(float(log_energy(x, jnp.eye(3), 500.0)))


def test_order_parameter_bounds(key):
    beta = 20.0
    one = jnp.tile(jnp.array([[0.0, 0.0, 1.0]]), (50, 1))
    assert float(order_parameter(one, beta)) == 0.0  # exactly 0 for a single cluster
    pair = jnp.concatenate([one, -one])  # antipodal halves: (1/beta) log((1 + e^{-2 beta}) / 2)
    assert float(order_parameter(pair, beta)) == pytest.approx(np.log((1 + np.exp(-2 * beta)) / 2) / beta, rel=1e-12)
    eps = float(order_parameter(init.uniform_sphere(key, 500, 3), beta))
    assert -2.0 <= eps <= 0.0


def test_clusters_and_histogram(key):
    beta = 30.0
    centres = np.array([[1.0, 0, 0], [0, 1.0, 0], [-1.0, 0, 0]])
    pts = init.heat_kernel_mixture_s2(key, 3000, centres, [0.5, 0.3, 0.2], 0.2 / beta)
    count, cent, mass = clusters(pts, beta)
    assert count == 3
    np.testing.assert_allclose(np.sort(mass), [0.2, 0.3, 0.5], atol=5 * np.sqrt(0.25 / 3000))
    assert np.all(np.max(cent @ centres.T, axis=1) > 0.99)
    hist, edges = angle_histogram(pts, 16)
    assert hist.sum() == pytest.approx(1.0) and edges.size == 17
    m = moments(jnp.asarray(pts), np.eye(3)[:, :2])
    assert float(m["emax_mass"]) == pytest.approx(float(jnp.mean(pts[:, 0] ** 2 + pts[:, 1] ** 2)))
    with pytest.raises(ValueError):
        clusters(np.zeros(3), beta)


def test_track_modes(key):
    """Mean-shift modes seeded at two centres 1 rad apart stay apart on two tight clusters and coincide on one."""
    beta = 10.0
    a, b = np.array([1.0, 0, 0]), np.array([np.cos(1.0), np.sin(1.0), 0])
    two = np.asarray(init.heat_kernel_mixture_s2(key, 1000, [a, b], None, 0.002))
    one = np.asarray(init.heat_kernel_mixture_s2(key, 1000, [(a + b) / 2], None, 0.002))
    from attnlab.bruno.observables import track_modes

    modes = track_modes([two, one], np.stack([a, b]), beta)
    assert np.arccos(np.clip(modes[0, 0] @ modes[0, 1], -1, 1)) == pytest.approx(1.0, abs=0.02)
    assert np.arccos(np.clip(modes[1, 0] @ modes[1, 1], -1, 1)) < 1e-6


def test_fourier_chi2_is_chi2_under_multinomial_draws():
    """Multinomial histograms from p: the statistic's mean is k (5 SE over 400 draws); with a known shift it is the
    noncentral chi^2 mean k + lambda; drawn from another law it is far above."""
    from attnlab.bruno.observables import fourier_chi2

    rng = np.random.default_rng(0)
    bins, n = 48, 5000
    centres = (np.arange(bins) + 0.5) * 2 * np.pi / bins
    p = np.exp(np.cos(centres - 1.0))
    p /= p.sum()
    q = np.exp(0.9 * np.cos(centres - 1.05))
    q /= q.sum()
    draws = rng.multinomial(n, p, size=400) / n
    stats = np.array([fourier_chi2(h, p, centres, n)[0] for h in draws])
    k = fourier_chi2(draws[0], p, centres, n)[1]
    assert abs(stats.mean() - k) <= 5 * stats.std(ddof=1) / np.sqrt(stats.size)
    shifted = np.array([fourier_chi2(h, q, centres, n, shift=p - q) for h in draws])
    lam = shifted[0, 2]
    assert lam > 5 and abs(shifted[:, 0].mean() - (k + lam)) <= 5 * shifted[:, 0].std(ddof=1) / np.sqrt(400)
    other = np.array([fourier_chi2(h, p, centres, n)[0] for h in rng.multinomial(n, q, size=400) / n])
    assert other.mean() - k > 5 * other.std(ddof=1) / np.sqrt(other.size)  # power: mean k + 22.7 against p
