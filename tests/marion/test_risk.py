"""Closed-form risk (spec A3): Owen's T, zeta, constants, the formula against Monte Carlo, derivatives."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate as si
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlab.marion.montecarlo import mc_excess_risk, mc_linear_baseline_risk
from attnlab.marion.risk import (
    Overlaps,
    c_lambda,
    linear_baseline_risk,
    noise_token_constant,
    oracle_excess_risk,
    population_excess_risk,
    risk_R,
    zeta,
)
from attnlab.slr.data import sample_teacher
from attnlab.slr.overlaps import overlaps

SQRT_HALF = math.sqrt(0.5)


def _zeta_quad(t, s):
    f = lambda z: sp.erf(t + s * z) ** 2 * math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    return si.quad(f, -np.inf, np.inf, epsabs=1e-14, epsrel=1e-13, limit=400)[0]


@pytest.mark.parametrize("t,s", [(0.0, 0.07), (0.3, 0.5), (-1.2, 1.0), (2.5, 0.1), (5.0, 3.0), (0.7, 14.0)])
def test_zeta_against_numerical_integration(t, s):
    assert abs(float(zeta(t, s)) - _zeta_quad(t, s)) < 1e-12


def test_zeta_identities():
    s = np.linspace(0.01, 10, 50)
    z0 = np.asarray(zeta(0.0, s))
    assert np.max(np.abs(z0 - 2 / np.pi * np.arcsin(2 * s**2 / (1 + 2 * s**2)))) < 1e-14
    assert np.max(np.abs(z0 - (1 - 4 / np.pi * np.arctan(1 / np.sqrt(1 + 4 * s**2))))) < 1e-14
    # d zeta / dt equals the official code's closed form der_zeta (spec A3.2)
    t = np.linspace(-3, 3, 13)
    for sig in (0.1, 0.7, 2.0):
        dz = np.asarray(jax.vmap(jax.grad(zeta), in_axes=(0, None))(t, sig))
        ref = 2 / np.sqrt(1 + 2 * sig**2) * sp.erf(t / np.sqrt((1 + 4 * sig**2) * (1 + 2 * sig**2))) * (
            2 / np.sqrt(np.pi) * np.exp(-(t**2) / (1 + 2 * sig**2)))
        assert np.max(np.abs(dz - ref)) < 1e-13


@settings(max_examples=60, deadline=None)
@given(st.floats(-30, 30), st.floats(0.0, 50.0))
def test_zeta_is_an_even_probability_like_quantity(t, s):
    z = float(zeta(t, s))
    assert -1e-15 <= z <= 1 + 1e-15
    assert abs(z - float(zeta(-t, s))) < 1e-15


def test_constants_against_quadrature():
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    for lam in (0.1, 0.9, 2.0):
        c = si.quad(lambda z: z * sp.erf(lam * z) * phi(z), -np.inf, np.inf, epsabs=1e-14)[0]
        assert abs(float(c_lambda(lam)) - c) < 1e-12
        m2 = si.quad(lambda z: sp.erf(lam * z) ** 2 * (z * z - 1) * phi(z), -np.inf, np.inf, epsabs=1e-14)[0]
        assert abs(8 * lam**2 / (math.pi * math.sqrt(1 + 4 * lam**2) * (1 + 2 * lam**2)) - m2) < 1e-12


# spec A3.4 (gamma = sqrt(.5), L = 10): (d, lambda, oracle risk, noise-token part, risk at zero overlaps)
A34 = [
    (400, 0.1, 0.11350, 0.11235, 0.6155),
    (400, 0.9, 3.81936, 3.81936, 4.4671),
    (400, 1.0, 4.18103, 4.18103, 4.8477),
    (400, 1 / (1 + 1e-4 * 119999), 0.07501, 0.06702, None),
    (80, 2.0, 6.27340, 6.27340, None),
    (80, 2 / (1 + 1e-4 * 199999), 0.18207, 0.10209, None),
]


@pytest.mark.parametrize("d,lam,oracle,noise,zero", A34)
def test_reference_table_A34(d, lam, oracle, noise, zero):
    digits = lambda x: 0.5 * 10 ** -(len(repr(x).split(".")[1]))
    assert abs(float(oracle_excess_risk(lam, SQRT_HALF, d, 10)) - oracle) <= digits(oracle)
    assert abs(float(noise_token_constant(lam, 10)) - noise) <= digits(noise)
    if zero is not None:
        z = Overlaps(*(jnp.zeros(()) for _ in range(5)))
        assert abs(float(population_excess_risk(z, lam, SQRT_HALF, d, 10)) - zero) <= digits(zero)


def _random_point(key, d):
    """k, v correlated with k*, v* and each other, so all five overlaps are O(1)."""
    kt, kk, kv = jax.random.split(key, 3)
    ks, vs = sample_teacher(kt, d)
    k = 0.6 * ks + 0.4 * vs + 0.5 * jax.random.normal(kk, (d,)) / math.sqrt(d)
    v = -0.7 * ks + 0.6 * vs + 0.5 * k + 0.5 * jax.random.normal(kv, (d,)) / math.sqrt(d)
    return ks, vs, k / jnp.linalg.norm(k), v / jnp.linalg.norm(v)


@pytest.mark.slow
@pytest.mark.parametrize("d,L,gamma,lam", [(20, 5, 0.7, 0.5), (40, 10, SQRT_HALF, 0.3), (12, 3, 1.3, 1.5)])
def test_closed_form_risk_against_monte_carlo_off_M(key, d, L, gamma, lam):
    ks, vs, k, v = _random_point(jax.random.fold_in(key, d), d)
    o = overlaps(k, v, ks, vs)
    assert min(abs(float(x)) for x in o) > 0.05  # genuinely off M
    theory = float(population_excess_risk(o, lam, gamma, d, L))
    mc, se = mc_excess_risk(jax.random.fold_in(key, 1), k, v, ks, vs, lam, gamma, L, 200_000, eps=0.1, chunk=20_000)
    assert abs(theory - float(mc)) < 5 * float(se), (theory, float(mc), float(se))


def _fd(f, x, h=1e-6):
    """Central finite differences of a scalar function of a vector."""
    eye = np.eye(x.size)
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in eye])


@pytest.mark.slow
def test_derivatives_agree_with_finite_differences(key):
    """Spec A8 item 1: the official custom JVP swapped zeta's arguments, so joint gradients, value_and_grad and
    forward mode went wrong. Here all of them must agree with finite differences."""
    d, L, gamma, lam = 10, 5, SQRT_HALF, 0.8
    ks, vs, k, v = _random_point(key, d)
    R = jax.jit(lambda k, v: risk_R(overlaps(k, v, ks, vs), lam, gamma, d, L))  # compiled, as the dynamics call it
    Rn = lambda x: float(R(jnp.asarray(x[:d]), jnp.asarray(x[d:])))
    x = np.concatenate([np.asarray(k), np.asarray(v)])
    fd = _fd(Rn, x)
    val, (gk, gv) = jax.value_and_grad(R, argnums=(0, 1))(k, v)
    assert abs(float(val) - Rn(x)) < 1e-13
    joint = np.concatenate([np.asarray(gk), np.asarray(gv)])
    assert np.max(np.abs(joint - fd)) < 1e-7 * max(1.0, np.max(np.abs(fd)))
    val_k, gk_only = jax.value_and_grad(R, argnums=0)(k, v)
    assert abs(float(val_k) - Rn(x)) < 1e-13
    assert np.max(np.abs(np.asarray(gk_only) - fd[:d])) < 1e-7 * max(1.0, np.max(np.abs(fd)))
    direction = jax.random.normal(key, (2 * d,))
    _, tangent = jax.jvp(lambda y: R(y[:d], y[d:]), (jnp.asarray(x),), (direction,))
    assert abs(float(tangent) - float(fd @ np.asarray(direction))) < 1e-6 * max(1.0, abs(float(tangent)))
    H = np.asarray(jax.hessian(lambda y: R(y[:d], y[d:]))(jnp.asarray(x)))
    grad_fn = lambda y: np.asarray(jax.grad(lambda z: R(z[:d], z[d:]))(jnp.asarray(y)))
    H_fd = np.array([(grad_fn(x + 1e-6 * e) - grad_fn(x - 1e-6 * e)) / 2e-6 for e in np.eye(2 * d)])
    assert np.max(np.abs(H - H.T)) < 1e-10
    assert np.max(np.abs(H - H_fd)) < 1e-6 * max(1.0, np.max(np.abs(H)))


def test_linear_baseline_risk_against_monte_carlo(key):
    d, L, gamma, eps = 30, 6, SQRT_HALF, 0.1
    ks, vs = sample_teacher(key, d)
    mc, se = mc_linear_baseline_risk(jax.random.fold_in(key, 1), ks, vs, gamma, L, 200_000, eps=eps, chunk=20_000)
    assert abs(float(mc) - linear_baseline_risk(gamma, L, eps)) < 5 * float(se)


def test_bayes_risk_is_between_noise_and_every_predictor(key):
    """Spec A4: eps^2 <= Bayes risk, and the Bayes predictor beats the oracle erf predictor and the linear
    baseline (all three estimated on the same kind of samples, compared at 5 SE)."""
    from attnlab.marion.montecarlo import mc_bayes_risk

    d, L, gamma, eps, lam = 20, 5, SQRT_HALF, 0.1, 0.3
    ks, vs = sample_teacher(key, d)
    bayes, se_b = mc_bayes_risk(jax.random.fold_in(key, 1), ks, vs, gamma, L, 100_000, eps=eps, chunk=20_000)
    oracle, se_o = mc_excess_risk(jax.random.fold_in(key, 2), ks, vs, ks, vs, lam, gamma, L, 100_000, eps=eps,
                                  chunk=20_000)
    assert float(bayes) > eps**2 - 5 * float(se_b)
    assert float(bayes) + 5 * float(se_b) < float(oracle) + eps**2
    assert float(bayes) + 5 * float(se_b) < linear_baseline_risk(gamma, L, eps)
    assert abs(float(oracle) - float(oracle_excess_risk(lam, gamma, d, L))) < 5 * float(se_o)
