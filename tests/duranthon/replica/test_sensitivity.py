"""Derivatives of the replica fixed point in lambda (implicit function theorem) against central finite differences.

Tolerances. A central difference ``D(h) = (g(t + h) - g(t - h))/(2h)`` of a function g evaluated with an absolute
error at most eps differs from g'(t) by the truncation ``h^2 |g'''|/6`` plus ``eps/h``. The truncation is estimated
a posteriori by Richardson's ``|D(2h) - D(h)|/3`` (D(2h) - D(h) = 3 h^2 g'''/6 to leading order); the bound used is
``|D(2h) - D(h)| + 2 eps/h``, i.e. that estimate taken three times (the estimate itself carries the O(h^4) and
eps/h terms) and the evaluation term doubled (the difference D(2h) - D(h) carries its own). eps is

* for the map F: the round-off of a mean over n samples, ``n * 2.2e-16 * max|F|`` (the inner Newton iterations
  end at round-off, below |grad J| = 1e-12, with a full Newton step);
* for the solved fixed point: ``|(I - dF/dx)^{-1}|_inf * tol``, the distance to the exact fixed point of a point
  whose residual max|F(x) - x| is below the solver's tol.
"""

import math

import jax
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.population import overlap_risk, overlap_risk_gradient
from attnlab.duranthon.replica import evaluate_map, frozen_samples, prior_update, solve_replica
from attnlab.duranthon.replica.sensitivity import (
    fixed_point_lambda_derivative,
    map_jacobian,
    prior_jacobian,
    risk_lambda_derivative,
)

EPS = 2.220446049250313e-16
TOL = 1e-12  # fixed points solved to max|F(x) - x| < TOL (the map is deterministic: the iteration reaches round-off)


def _central(g, t, h):
    return (np.asarray(g(t + h)) - np.asarray(g(t - h))) / (2 * h)


def _fd_bound(g, t, h, eps):
    """(D(h), its error bound |D(2h) - D(h)| + 2 eps/h) (module docstring)."""
    d1, d2 = _central(g, t, h), _central(g, t, 2 * h)
    return d1, np.abs(d2 - d1) + 2 * eps / h


def test_prior_jacobian_is_the_derivative_of_the_prior_update():
    hats = np.array([0.7, 0.4, 1.3, 0.9, 0.5, 2.1])
    D, B = prior_jacobian(hats, 0.3, 0.8)
    h = 1e-5
    for j in range(6):
        e = np.zeros(6)
        e[j] = h
        d, bound = _fd_bound(lambda t: prior_update(hats + t * e / h, 0.3, 0.8), 0.0, h, 10 * EPS)
        assert np.all(np.abs(d - D[:, j]) <= bound), j
    for j, (dk, dv) in enumerate(((h, 0.0), (0.0, h))):
        d, bound = _fd_bound(lambda t: prior_update(hats, 0.3 + t * dk / h, 0.8 + t * dv / h), 0.0, h, 10 * EPS)
        assert np.all(np.abs(d - B[:, j]) <= bound), j


def test_overlap_risk_gradient_is_that_of_the_frozen_sample_risk():
    act, args = activation("softmax"), ("spiked", 5.0, (1, 2, 3))
    p = np.array([0.9, 1.1, 0.7, 0.6])
    key = jax.random.key(2)
    E, g = overlap_risk_gradient(key, act, *args, *p, 4000)
    # the same 4000 frozen samples: equal up to the summation order of their mean (JAX's against NumPy's), at most
    # n eps times the largest term, |1 - 2 m_v A + q_v B| <= 1 + 2|m_v| + q_v (A, B in [0, 1] for softmax);
    # another sample's mean would differ by its SE, about 1e-2
    assert abs(E - overlap_risk(key, act, *args, *p, 4000)[0]) <= 4000 * EPS * (1 + 2 * abs(p[2]) + p[3])
    for j in range(4):
        e = np.zeros(4)
        e[j] = 1.0
        d, bound = _fd_bound(lambda t: overlap_risk(key, act, *args, *(p + t * e), 4000)[0], 0.0, 1e-4,
                             4000 * EPS * 2.0)
        assert abs(d - g[j]) <= bound, (j, d, g[j], bound)


def _fixed_point(act, model, nu, L, n, alpha, lam, jacobian="implicit"):
    s = frozen_samples(jax.random.key(5), model, nu, L, n)
    r = solve_replica(act, alpha, lam, lam, s, (math.sqrt(nu), nu, 1.0, 1.0, 1.0, 1.0), tol=TOL, jacobian=jacobian)
    assert r.converged and r.residual < TOL and r.nonconvex == 0.0
    return s, r


@pytest.mark.parametrize("L,jacobian", [(2, "implicit"), ((1, 2, 3), "stein")])
def test_map_jacobian_against_central_differences_of_the_map(L, jacobian):
    """dF/dx (6 x 6) and dF/dlambda (6 x 2) at a fixed point of spiked-SLR, nu = 5 (alpha = 2, lambda = 0.5, every
    proximal problem convex): fixed L with the pointwise V_hat, and L ~ U{1,2,3} (padded tokens) with Stein's."""
    act, n, alpha, lam = activation("softmax"), 256, 2.0, 0.5
    s, r = _fixed_point(act, "spiked", 5.0, L, n, alpha, lam, jacobian)
    x0 = np.asarray(r.order)
    J = map_jacobian(act, x0, alpha, lam, lam, s, r.chi, jacobian)
    assert np.max(np.abs(J.value - x0)) < TOL  # the map itself at the fixed point

    def F(x, lk=lam, lv=lam):
        return evaluate_map(act, x, alpha, lk, lv, s, jacobian=jacobian, multistart=False, chi0=r.chi).order

    eps = n * EPS * float(np.max(np.abs(x0)))
    h = 1e-4
    for j in range(6):
        e = np.zeros(6)
        e[j] = 1.0
        d, bound = _fd_bound(lambda t: F(x0 + t * e), 0.0, h, eps)
        assert np.all(np.abs(d - J.dF_dx[:, j]) <= bound), (j, d - J.dF_dx[:, j], bound)
    for j in range(2):
        d, bound = _fd_bound(lambda t: F(x0, lam + t * (j == 0), lam + t * (j == 1)), 0.0, h, eps)
        assert np.all(np.abs(d - J.dF_dlam[:, j]) <= bound), (j, d - J.dF_dlam[:, j], bound)


def test_fixed_point_and_test_error_derivatives_against_central_differences_of_solved_fixed_points():
    """dx*/dlambda = (I - dF/dx)^{-1} dF/dlambda and dE/dlambda (E the risk on M at the fixed point) against central
    differences of fixed points solved at lambda +- h and +- 2h (lambda_k = lambda_v = lambda), spiked-SLR nu = 5,
    L = 2, alpha = 2, lambda = 0.5; also each lambda separately (lambda_k and lambda_v)."""
    act, n, alpha, lam, n_risk = activation("softmax"), 256, 2.0, 0.5, 4000
    s, r = _fixed_point(act, "spiked", 5.0, 2, n, alpha, lam)
    key = jax.random.key(9)
    E, dE, dx = risk_lambda_derivative(key, act, "spiked", 5.0, 2, r.order, alpha, lam, s, r.chi, n_risk)
    dk, dv, J = fixed_point_lambda_derivative(act, r.order, alpha, lam, lam, s, r.chi)
    assert np.allclose(dk + dv, dx, rtol=0, atol=1e-15)
    kappa = float(np.max(np.sum(np.abs(np.linalg.inv(np.eye(6) - J.dF_dx)), axis=1)))

    def solved(lk, lv):
        q = solve_replica(act, alpha, lk, lv, s, tuple(r.order), tol=TOL, chi0=r.chi, jacobian="implicit")
        assert q.converged and q.residual < TOL
        o = q.order
        return np.append(np.asarray(o), overlap_risk(key, act, "spiked", 5.0, 2, o.m_k, o.q_k, o.m_v, o.q_v,
                                                     n_risk)[0])

    h = 1e-3
    _, g = overlap_risk_gradient(key, act, "spiked", 5.0, 2, r.order.m_k, r.order.q_k, r.order.m_v, r.order.q_v,
                                 n_risk)
    eps_x = kappa * TOL
    eps_E = float(np.sum(np.abs(g))) * eps_x + n_risk * EPS  # E is a mean over n_risk frozen samples
    for which, want in (("both", dx), ("k", dk), ("v", dv)):
        d, bound = _fd_bound(lambda t: solved(lam + t * (which != "v"), lam + t * (which != "k")), 0.0, h, 0.0)
        bound[:6] += 2 * eps_x / h
        bound[6] += 2 * eps_E / h
        assert np.all(np.abs(d[:6] - want) <= bound[:6]), (which, d[:6] - want, bound[:6])
        if which == "both":
            assert abs(d[6] - dE) <= bound[6], (d[6], dE, bound[6])
            assert abs(E - solved(lam, lam)[6]) < 1e-12


def test_map_jacobian_rejects_bad_input():
    s = frozen_samples(jax.random.key(0), "spiked", 2.0, 2, 16)
    chi = np.zeros((16, 2))
    with pytest.raises(ValueError, match="q_a > m_a"):
        map_jacobian(activation("softmax"), (1.0, 1.0, 1.0, 0.5, 0.5, 1.0), 2.0, 1.0, 1.0, s, chi)
    with pytest.raises(ValueError, match="jacobian"):
        map_jacobian(activation("softmax"), (1.0, 2.0, 1.0, 0.5, 0.5, 1.0), 2.0, 1.0, 1.0, s, chi, "fd")
    with pytest.raises(ValueError, match="q_k > m_k"):
        overlap_risk_gradient(jax.random.key(0), activation("softmax"), "spiked", 2.0, 2, 1.0, 1.0, 0.5, 0.5, 100)
