"""Integrators: tokens stay on the sphere, observed orders 1 / 2 / 4, Lyapunov energy, equiangular and two-point ODEs."""

import jax
import numpy as np
import pytest

from attnlab.bruno import initial, reduced
from attnlab.bruno.integrate import ORDER, make_model, simulate
from attnlab.bruno.observables import log_energy


def _random_model(key, beta=5.0, **kw):
    Q, K, V = (np.asarray(jax.random.normal(k, (3, 3))) / 2 for k in jax.random.split(key, 3))
    return make_model(3, Q, K, V, beta, **kw)


@pytest.mark.parametrize("scheme", ["euler", "heun", "rk4"])
def test_stays_on_sphere(key, scheme):
    x0 = initial.uniform_sphere(key, 200, 3)
    xs, _, steps = simulate(x0, _random_model(key, 20.0), [0.5, 1.0], 0.02, scheme=scheme)
    assert steps[-1] == 50
    assert np.max(np.abs(np.linalg.norm(xs, axis=-1) - 1)) < 1e-13


def test_observed_order(key):
    """Slope of log error against log dt (reference: RK4 at dt = 1/1024), random Q, K, V, beta = 5, T = 1.

    Measured: euler 1.01, euler with projection 1.01, heun 2.03, rk4 4.01 (halving dt from 1/32 to 1/64)."""
    x0 = initial.uniform_sphere(key, 40, 3)
    model = _random_model(jax.random.fold_in(key, 7))
    ref = simulate(x0, model, [1.0], 1 / 1024, scheme="rk4")[0][-1]
    for scheme, proj in [("euler", False), ("euler", True), ("heun", False), ("rk4", False)]:
        m = model._replace(project=proj)
        errs = [np.max(np.abs(simulate(x0, m, [1.0], h, scheme=scheme)[0][-1] - ref)) for h in (1 / 32, 1 / 64)]
        slope = np.log2(errs[0] / errs[1])
        assert abs(slope - ORDER[scheme]) < 0.2, (scheme, proj, slope)


@pytest.mark.parametrize("normalization", ["sa", "usa"])
@pytest.mark.parametrize("sign", [1, -1])
def test_energy_is_lyapunov(key, normalization, sign):
    """Q^T K = Id, V = +Id: E_beta nondecreasing (gradient ascent); V = -Id: nonincreasing (spec 4.4 [I], confirmed)."""
    x0 = initial.uniform_sphere(key, 300, 3)
    model = make_model(3, V=sign * np.eye(3), beta=4.0, normalization=normalization)
    times = np.linspace(0.1, 3.0, 30)
    _, obs, _ = simulate(x0, model, times, 0.01, observe=lambda x: log_energy(x, np.eye(3), 4.0))
    assert np.all(sign * np.diff(obs) > 0)


@pytest.mark.parametrize("normalization", ["sa", "usa"])
def test_equiangular_ode(normalization):
    """n equiangular tokens stay equiangular and their inner product solves the ODE of spec 3 item 6 (RK4, 1e-9)."""
    n, beta, rho0 = 4, 3.0, 0.2
    x0 = np.zeros((n, n + 1))
    x0[np.arange(n), np.arange(n)] = np.sqrt(1 - rho0)
    x0[:, n] = np.sqrt(rho0)
    times = [0.5, 1.0, 2.0]
    model = make_model(n + 1, beta=beta, normalization=normalization, dense=True)
    xs, _, _ = simulate(x0, model, times, 1e-3, scheme="rk4")
    rho = reduced.equiangular_rho(rho0, times, beta, n, normalization)
    for k in range(len(times)):
        g = xs[k + 1] @ xs[k + 1].T
        off = g[~np.eye(n, dtype=bool)]
        assert np.ptp(off) < 1e-12
        assert abs(off.mean() - rho[k]) < 1e-9


def test_simplex_is_fixed_point():
    n = 4  # regular simplex in R^3: rho = -1/3
    x0 = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]]) / np.sqrt(3)
    assert abs(reduced.equiangular_rhs(-1 / (n - 1), 5.0, n)) < 1e-15
    xs, _, _ = simulate(x0, make_model(3, beta=5.0), [1.0], 0.01)
    assert np.max(np.abs(xs[-1] - x0)) < 1e-13


def test_two_point_ode():
    theta0, beta = 1.2, 6.0
    x0 = np.array([[1.0, 0.0], [np.cos(theta0), np.sin(theta0)]])
    times = [1.0, 5.0, 20.0]
    xs, _, _ = simulate(x0, make_model(2, beta=beta), times, 1e-2, scheme="rk4")
    th = reduced.two_point_angle(theta0, times, beta)
    sim = np.arccos(np.clip(np.sum(xs[1:, 0] * xs[1:, 1], axis=-1), -1, 1))
    np.testing.assert_allclose(sim, th, atol=1e-8)


def test_bad_input(key):
    x0 = initial.uniform_sphere(key, 5, 3)
    m = make_model(3, beta=1.0)
    with pytest.raises(ValueError, match="dt must be > 0"):
        simulate(x0, m, [1.0], 0.0)
    with pytest.raises(ValueError, match="increasing"):
        simulate(x0, m, [1.0, 0.5], 0.1)
    with pytest.raises(ValueError, match="beta must be > 0"):
        make_model(3, beta=-1.0)
    with pytest.raises(ValueError, match="d >= 2"):
        make_model(1)
    with pytest.raises(ValueError, match="square"):
        make_model(3, V=np.eye(2))
    with pytest.raises(ValueError, match="at least one token"):
        initial.uniform_sphere(key, 0, 3)


def test_batch_of_runs_is_vmapped(key):
    """A batch (R, N, d) of independent runs gives the same trajectories as running each alone."""
    x0 = np.stack([np.asarray(initial.uniform_sphere(k, 60, 3)) for k in jax.random.split(key, 2)])
    model = make_model(3, beta=8.0, block_q=16, block_k=32)
    batch, _, _ = simulate(x0, model, [0.2, 0.4], 0.02)
    for r in range(2):
        np.testing.assert_allclose(batch[:, r], simulate(x0[r], model, [0.2, 0.4], 0.02)[0], atol=1e-13)


def test_step_budget_and_energy_alarm(key):
    """Spec 3 item 1 / 4.4 [I]: dt beta = 0.3 (Fig. 1) keeps E_beta monotone. Found: for Q = K = V = Id the paper's
    Euler step x <- N(x + dt A(x)) keeps E_beta nondecreasing even at dt beta = 10 (N = 400, beta = 30, 80 steps):
    as dt -> infinity it becomes the mean-shift step x <- N(A(x)), so the energy alarm does not fire there."""
    x0 = initial.uniform_sphere(key, 200, 3)
    beta = 30.0
    for dt_beta in (0.3, 10.0):
        dt = dt_beta / beta
        _, obs, _ = simulate(x0, make_model(3, beta=beta), dt * np.arange(1, 21), dt,
                             observe=lambda x: log_energy(x, np.eye(3), beta))
        assert np.all(np.diff(obs) > 0)


def test_kernel_methods_agree(key):
    """The model's kernel_method (shift kernel with fallback, shift, online) does not change a float64 trajectory
    beyond rounding (each kernel matches dense attention to 1e-12, test_attention)."""
    x0 = initial.uniform_sphere(key, 150, 3)
    runs = [simulate(x0, _random_model(key, 20.0, kernel_method=m, block_q=64, block_k=100), [0.5], 0.05)[0][-1]
            for m in ("auto", "shift", "online")]
    assert max(np.max(np.abs(r - runs[0])) for r in runs[1:]) < 1e-11


@pytest.mark.parametrize("scheme", ["euler", "rk4"])
def test_float32_tokens(key, scheme):
    """float32 tokens stay float32 through the loop (the step size used to enter the loop carry as a float64 and
    fail with a TypeError), and follow the float64 run to float32 precision."""
    x0 = initial.uniform_sphere(key, 100, 3)
    model = _random_model(key, 5.0)
    xs32, _, steps = simulate(np.asarray(x0, dtype=np.float32), model, [0.1, 0.25], 0.01, scheme=scheme)
    xs64, _, _ = simulate(x0, model, [0.1, 0.25], 0.01, scheme=scheme)
    assert xs32.dtype == np.float32 and steps[-1] == 25
    assert np.max(np.abs(xs32 - xs64)) < 1e-4
