"""Initial laws: moments and distribution functions against their exact values (5 SE / KS with a fixed key)."""

import jax
import numpy as np
import pytest
from scipy.special import eval_legendre
from scipy.stats import kstest

from attnlab.bruno import initial, reduced
from attnlab.bruno.observables import angles


def test_uniform_sphere_moments(key):
    n, d = 20_000, 4
    x = np.asarray(initial.uniform_sphere(key, n, d))
    assert np.max(np.abs(x.mean(0))) < 5 / np.sqrt(d * n)
    # E x_1^2 = 1/d, Var x_1^2 = 2 (d - 1) / (d^2 (d + 2))
    se = np.sqrt(2 * (d - 1) / (d**2 * (d + 2)) / n)
    assert np.max(np.abs((x**2).mean(0) - 1 / d)) < 5 * se


def test_wrapped_normal_mixture_law(key):
    means, w, v = [1.0, 4.0], [0.3, 0.7], 0.3
    th = angles(initial.wrapped_normal_mixture(key, 5000, means, w, v))
    assert kstest(th, lambda t: reduced.wrapped_normal_cdf(t, means, w, v)).pvalue > 1e-4


def test_latitude_uniform(key):
    x = np.asarray(initial.latitude_uniform_azimuth_mixture(key, 5000, [2.0], None, 0.04))
    psi = np.arcsin(x[:, 2])
    assert kstest(psi, "uniform", args=(-np.pi / 2, np.pi)).pvalue > 1e-4
    assert kstest(angles(x), lambda t: reduced.wrapped_normal_cdf(t, [2.0], None, 0.04)).pvalue > 1e-4


def test_heat_kernel_s2(key):
    """E P_l(<x, m>) = e^{-l (l + 1) tau} for x ~ e^{tau Delta} delta_m on S^2 (l = 1, 2), within 5 SE."""
    tau, n = 0.05, 20_000
    m = np.array([0.0, 0.6, 0.8])
    x = np.asarray(initial.heat_kernel_mixture_s2(key, n, [m], None, tau))
    assert np.max(np.abs(np.linalg.norm(x, axis=1) - 1)) < 1e-12
    u = x @ m
    for ell in (1, 2):
        p = eval_legendre(ell, u)
        assert abs(p.mean() - np.exp(-ell * (ell + 1) * tau)) < 5 * p.std() / np.sqrt(n)
    grid = np.linspace(-1, 1, 20001)
    assert np.trapezoid(initial.heat_kernel_s2_cos_density(grid, tau), grid) == pytest.approx(1.0, abs=1e-6)


def test_from_array_and_bad_input(key):
    x = initial.from_array(np.array([[3.0, 4.0], [0.0, 2.0]]))
    np.testing.assert_allclose(np.asarray(x), [[0.6, 0.8], [0.0, 1.0]])
    with pytest.raises(ValueError, match="shape"):
        initial.from_array(np.ones(3))
    with pytest.raises(ValueError, match="d >= 2"):
        initial.from_array(np.ones((3, 1)))
    with pytest.raises(ValueError, match="nonzero"):
        initial.from_array(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="d >= 2"):
        initial.uniform_sphere(jax.random.key(0), 5, 1)
    with pytest.raises(ValueError, match="weights"):
        initial.wrapped_normal_mixture(key, 5, [0.0, 1.0], [0.5, 0.6])
