"""The public functions of attnlab.marion guard their domain (attnlab.marion.domain)."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import marion
from attnlab.marion import risk
from attnlab.slr import DohmatobOverlaps, Overlaps

PARAMS = marion.SLRParams(d=20, L=5, gamma=0.5**0.5, eps=0.0, step_size=4e-3, lambda0=0.1, schedule=False)


def test_impossible_overlaps_give_an_error_not_a_negative_risk():
    o = Overlaps(2.0, 3.0, 0.0, 0.0, 0.0)
    assert float(risk.population_excess_risk(o, 0.5, 0.7, 20, 5)) < 0  # the formula alone: a silent number
    with pytest.raises(ValueError, match="^o must be overlaps " + re.escape("(kappa, nu, theta, eta, rho)")
                       + ".* kappa\\^2 \\+ eta\\^2 <= 1; got \\(2, 3, 0, 0, 0\\)$"):
        marion.population_excess_risk(o, 0.5, 0.7, 20, 5)


def test_valid_calls_are_unchanged_and_differentiable():
    o = Overlaps(0.3, 0.5, 0.1, -0.2, 0.05)
    assert float(marion.population_excess_risk(o, 0.1, 0.5**0.5, 400, 10)) == float(
        risk.population_excess_risk(o, 0.1, 0.5**0.5, 400, 10))
    g = jax.grad(lambda k: marion.population_excess_risk(Overlaps(k, 0.5, 0.1, -0.2, 0.05), 0.1, 0.7, 400, 10))
    assert math.isfinite(float(g(0.3)))  # a traced overlap is not read by the checks
    grid = Overlaps(jnp.linspace(-1, 1, 5), 0.5, 0.0, 0.0, 0.0)
    assert marion.population_excess_risk(grid, 0.1, 0.7, 400, 10).shape == (5,)


@pytest.mark.parametrize("kw, match", [
    ({"lam": 0.0}, "^lam must be > 0"), ({"lam": math.inf}, "^lam must be a finite number"),
    ({"gamma": -0.1}, "^gamma must be >= 0"), ({"d": 400.5}, "^d must be an integer >= 1; got 400.5$"),
    ({"L": True}, "^L must be an integer >= 1, not a boolean"), ({"L": 0}, "^L must be an integer >= 1; got 0$"),
])
def test_constants_outside_the_domain_are_refused(kw, match):
    args = {"lam": 0.1, "gamma": 0.7, "d": 400, "L": 10, **kw}
    with pytest.raises(ValueError, match=match):
        marion.oracle_excess_risk(**args)


def test_the_other_notation_and_the_wrong_token_shapes_are_refused():
    with pytest.raises(ValueError, match="convert with .to_marion"):
        marion.distance_to_manifold(DohmatobOverlaps(0.1, 0.2, 0.0, 0.0, 0.0))
    X = jnp.ones((3, 5, 4))
    with pytest.raises(ValueError, match=r"^k must have shape \(4,\); got shape \(3,\)$"):
        marion.erf_attention(X, jnp.ones(3), jnp.ones(4), 0.1)
    with pytest.raises(ValueError, match="^gamma must be > 0"):
        marion.bayes_predictor(X, jnp.eye(4)[0], jnp.eye(4)[1], 0.0)


def test_runs_refuse_bad_params_steps_and_vectors(key):
    o0 = Overlaps(*(jnp.full((2,), x) for x in (0.1, 0.1, 0.0, 0.0, 0.0)))
    assert marion.run_pgd_reduced(o0, PARAMS, 20, 10).excess_risk.shape == (3, 2)
    with pytest.raises(ValueError, match="^log_every must divide n_steps"):
        marion.run_pgd_reduced(o0, PARAMS, 20, 7)
    with pytest.raises(ValueError, match="^p.step_size must be > 0"):
        marion.run_pgd_reduced(o0, PARAMS._replace(step_size=-1.0), 20, 10)
    with pytest.raises(ValueError, match="^p.d must be an integer >= 5"):
        marion.run_sgd_reduced(jax.random.split(key, 2), o0, PARAMS._replace(d=4), 20, 10, 8, 16)
    with pytest.raises(ValueError, match=r"^key must hold one PRNG key per repeat \(shape \(2,\)\)"):
        marion.run_sgd_reduced(key, o0, PARAMS, 20, 10, 8, 16)
    e = np.eye(20)
    with pytest.raises(ValueError, match=r"^k must be a unit vector"):
        marion.run_pgd_full(2 * e[2], e[3], e[0], e[1], PARAMS, 20, 10)
    with pytest.raises(ValueError, match="^the vectors must have dimension p.d = 20"):
        marion.run_pgd_full(e[2, :10], e[3, :10], e[0, :10], e[1, :10], PARAMS, 20, 10)


def test_the_linear_baseline_at_one_token_is_the_label_noise():
    """At L = 1 the location is known: the risk is eps^2 for every gamma (the form gamma^2 - gamma^4 / (gamma^2 +
    L - 1) divided 0 by 0 at gamma = 0, and by a gamma^2 + L - 1 rounded to 0 at gamma = 2.2e-16)."""
    for gamma in (0.0, 2.220446049250313e-16, 0.7):
        assert float(marion.linear_baseline_risk(gamma, 1, 0.1)) == pytest.approx(0.01, rel=1e-15)
    assert float(marion.linear_baseline_risk(0.7, 10, 0.0)) == pytest.approx(0.49 - 0.7**4 / (0.49 + 9), rel=1e-14)
