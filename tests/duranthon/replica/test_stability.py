"""The replicon (de Almeida-Thouless) eigenvalue of the RS fixed point."""

import math

import jax
import numpy as np

from attnlab.duranthon.activations import activation
from attnlab.duranthon.replica import frozen_samples, ridge_fixed_point, solve_replica


def test_at_eigenvalue_is_the_ridge_replicon_at_L1():
    """de Almeida-Thouless (replicon) eigenvalue at L = 1: the k-sector is inert and J^{vv} = -1/(1 + V_v) on every
    sample, so rho(T) = alpha V^2/(1 + V)^2 = (1 - lambda V) V/(1 + V) exactly at the ridge fixed point, which is
    always < 1 (ridge regression is RS-stable)."""
    from attnlab.duranthon.replica import at_eigenvalue

    s = frozen_samples(jax.random.key(0), "spiked", 2.0, 1, 2000, 0.3)  # the ridge test's set: same programs
    for alpha, lam in ((3.0, 0.5), (0.5, 1e-3), (20.0, 1e-3)):
        r = solve_replica(activation("softmax"), alpha, 1.0, lam, s, (0.0, 0.0, 1.0, 0.5, 0.5, 1.0), n_newton=3)
        _, _, V = ridge_fixed_point(alpha, lam, 0.3)
        assert r.converged and abs(r.at - alpha * V**2 / (1 + V) ** 2) < 1e-9
        assert abs(r.at - (1 - lam * V) * V / (1 + V)) < 1e-9 and r.at < 1
    # the operator itself: only the (v, v) block -> V_v^2 P_vvvv; a pure (k, v) cross term acts on dQ_kv alone
    P = np.zeros((2, 2, 2, 2))
    P[1, 1, 1, 1] = 0.7
    assert abs(at_eigenvalue(P, 2.0, 0.5) - 0.25 * 0.7) < 1e-15
    P = np.zeros((2, 2, 2, 2))
    P[0, 1, 0, 1] = 0.3  # <J^{kv}, J^{kv}>: dQ_vv -> dQ_kk
    P[1, 0, 1, 0] = 0.2  # <J^{vk}, J^{vk}>: dQ_kk -> dQ_vv
    assert abs(at_eigenvalue(P, 2.0, 0.5) - math.sqrt(0.3 * 4.0 * 0.2 * 0.25)) < 1e-15
