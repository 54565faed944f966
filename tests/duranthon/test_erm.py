"""ERM by L-BFGS for Duranthon et al. (2025): ridge limit, starts, overlaps, test error from overlaps."""

import math

import jax
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.data import sample_sequences, sample_teacher_sqrtD
from attnlab.duranthon.erm import (
    erm_objective,
    erm_overlap_risk,
    erm_overlaps,
    fit_erm,
    fresh_test_error,
    informed_start,
    random_start,
    ridge_solution,
)

D = 60


@pytest.fixture(scope="module")
def teacher():
    return sample_teacher_sqrtD(jax.random.key(0), D)


def test_L1_softmax_erm_is_ridge_regression(teacher):
    """At L = 1 softmax weights are 1: the k-sector is inert (shrunk to 0 by lambda_k) and v is the ridge solution."""
    ks, vs = teacher
    b = sample_sequences(jax.random.key(1), ks, vs, "spiked", 2.0, 1, 4 * D, noise_std=0.3)
    r = fit_erm(activation("softmax"), b.X, b.mask, b.y, 1.0, 0.5, *random_start(jax.random.key(2), D), gtol=1e-10)
    ref = ridge_solution(np.asarray(b.X[:, 0]), np.asarray(b.y), 0.5)
    assert r.converged and np.max(np.abs(r.v - ref)) < 1e-6 * np.max(np.abs(ref))
    assert np.max(np.abs(r.k)) < 1e-8


@pytest.mark.slow
def test_informed_and_random_starts_meet_at_high_regularisation_and_test_error_matches_overlaps(teacher):
    ks, vs = teacher
    act = activation("softmax")
    b = sample_sequences(jax.random.key(3), ks, vs, "spiked", 5.0, 2, 8 * D)
    r1 = fit_erm(act, b.X, b.mask, b.y, 1.0, 1.0, *informed_start(ks, vs, "spiked", 5.0))
    r2 = fit_erm(act, b.X, b.mask, b.y, 1.0, 1.0, *random_start(jax.random.key(4), D))
    assert r1.converged and r2.converged and r1.grad_norm < 1e-5
    assert abs(r1.objective - r2.objective) < 1e-8 * r1.objective
    assert abs(r1.objective - float(erm_objective(act, r1.k, r1.v, b.X, b.mask, b.y, 1.0, 1.0))) < 1e-9
    o = erm_overlaps(r1.k, r1.v, ks, vs)
    assert max(abs(a - c) for a, c in zip(o.as_array(), erm_overlaps(r2.k, r2.v, ks, vs).as_array())) < 1e-5
    fresh, fse = fresh_test_error(jax.random.key(5), act, r1.k, r1.v, ks, vs, "spiked", 5.0, 2, 6000)
    theory, tse = erm_overlap_risk(jax.random.key(6), act, "spiked", 5.0, 2, o, 60_000)
    assert abs(fresh - theory) <= 5 * math.hypot(fse, tse)


def test_bad_regularisation_rejected(teacher):
    ks, vs = teacher
    b = sample_sequences(jax.random.key(3), ks, vs, "spiked", 5.0, 2, 8 * D)
    with pytest.raises(ValueError):
        fit_erm(activation("linear"), b.X, b.mask, b.y, -1.0, 1.0, ks, vs)
    with pytest.raises(ValueError):
        informed_start(ks, vs, "max", math.inf)
