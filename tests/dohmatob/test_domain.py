"""The public functions of attnlab.dohmatob guard their domain (attnlab.dohmatob.domain, the model's own checks)."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import dohmatob
from attnlab.dohmatob import flows, meanfield
from attnlab.slr import DohmatobOverlaps, Overlaps

MODEL = dohmatob.DohmatobModel(d=100, L=20, beta=1.0, gamma=0.5**0.5)
MU_NU = "mu^2 + eta^2 <= 1"


@pytest.mark.parametrize("fn", [dohmatob.corollary1_risk, dohmatob.mean_field_risk])
def test_mean_field_risks_refuse_overlaps_of_no_unit_vectors(fn):
    o = DohmatobOverlaps(1.5, 2.0, 0.0, 0.0, 0.0)
    assert float(getattr(meanfield, fn.__name__)(o, MODEL)) < 0  # the formula alone: a negative risk
    with pytest.raises(ValueError, match="^o must be overlaps .* which needs " + re.escape(MU_NU)):
        fn(o, MODEL)


def test_check_realisable_tests_mu_and_eta_together():
    meanfield.check_realisable(DohmatobOverlaps(0.6, 0.0, 0.8, 0.0, 0.0))  # on the unit circle
    with pytest.raises(ValueError, match=re.escape(MU_NU)):
        meanfield.check_realisable(DohmatobOverlaps(0.8, 0.0, 0.8, 0.0, 0.0))
    with pytest.raises(ValueError, match=re.escape(MU_NU)):
        meanfield.check_realisable(DohmatobOverlaps(1.5, 0.0, 0.0, 0.0, 0.0))


def test_mc_risk_refuses_mu_above_one_and_a_negative_sample_size(key):
    with pytest.raises(ValueError, match=re.escape(MU_NU)):
        dohmatob.mc_risk(key, DohmatobOverlaps(1.5, 0.0, 0.0, 0.0, 0.0), MODEL, 1000)
    with pytest.raises(ValueError, match="^n must be an integer >= 2; got -5$"):
        dohmatob.mc_risk(key, DohmatobOverlaps(1.0, 0.0, 0.0, 0.0, 0.0), MODEL, -5)
    with pytest.raises(ValueError, match=r"^o must be an attnlab\.slr\.DohmatobOverlaps .* got Overlaps "
                                         r"\(convert with \.to_dohmatob\(\)\)$"):
        dohmatob.mc_risk(key, Overlaps(1.0, 0.0, 0.0, 0.0, 0.0), MODEL, 100)


def test_rem_constants_and_the_model_need_integer_sizes():
    with pytest.raises(ValueError, match="^L must be an integer >= 2; got 2.5$"):
        dohmatob.rem_constants(100, 2.5, 1.0)
    with pytest.raises(ValueError, match="^L must be an integer >= 2; got 2.5$"):
        dohmatob.DohmatobModel(d=100, L=2.5, beta=1.0, gamma=0.5)
    with pytest.raises(ValueError, match="^d must be an integer >= 1"):
        dohmatob.DohmatobModel(d=np.float64(100), L=20, beta=1.0, gamma=0.5)
    with pytest.raises(ValueError, match="^beta must be a finite number"):
        dohmatob.DohmatobModel(d=100, L=20, beta=math.inf, gamma=0.5)
    assert dohmatob.rem_constants(np.int64(100), 20, 1.0) == meanfield.rem_constants(100, 20, 1.0)


def test_flows_and_points_refuse_bad_starts_times_and_sizes():
    with pytest.raises(ValueError, match="^y0 must be overlaps .*" + re.escape(MU_NU)):
        dohmatob.integrate(flows.field2, [1.5, 0.5], [0.0, 1.0], MODEL)
    with pytest.raises(ValueError, match=r"^y0 must have shape \(5,\); got shape \(2,\)$"):
        dohmatob.integrate(flows.field5, [0.5, 0.5], [0.0, 1.0], MODEL)
    with pytest.raises(ValueError, match="^ts must be a strictly increasing"):
        dohmatob.integrate(flows.field2, [0.5, 0.5], [1.0, 0.0], MODEL)
    with pytest.raises(ValueError, match="^n_grid must be an integer >= 3"):
        dohmatob.stationary_points_on_M(MODEL, n_grid=2.5)
    with pytest.raises(ValueError, match=r"^mu must be in \[-1, 1\]"):
        dohmatob.localisation_probability(1.5, MODEL)


def test_run_rgd_refuses_inconsistent_shapes(key):
    R, K, n, L, d = 1, 2, 6, 3, 4
    u0 = jnp.tile(jnp.eye(d)[0], (R, K, 1))
    X = jax.random.normal(key, (R, n, L, d))
    Y = jnp.zeros((R, K, n))
    log = dohmatob.run_rgd(u0, u0, X, Y, 1.0, 0.1, 4, 2, links=("linear", "relu"))
    assert log.u.shape == (R, 3, K, d)
    with pytest.raises(ValueError, match=r"^Y must have shape \(1, 2, 6\); got shape \(1, 2, 5\)$"):
        dohmatob.run_rgd(u0, u0, X, Y[..., :5], 1.0, 0.1, 4, 2, links=("linear", "relu"))
    with pytest.raises(ValueError, match=r"^u0 must have shape \(1, \*, 4\)"):
        dohmatob.run_rgd(u0[..., :3], u0, X, Y, 1.0, 0.1, 4, 2, links=("linear", "relu"))
    with pytest.raises(ValueError, match="^links must name one link per run"):
        dohmatob.run_rgd(u0, u0, X, Y, 1.0, 0.1, 4, 2, links=("linear",))
    with pytest.raises(ValueError, match="^lam must be > 0"):
        dohmatob.run_rgd(u0, u0, X, Y, -1.0, 0.1, 4, 2, links=("linear", "relu"))
