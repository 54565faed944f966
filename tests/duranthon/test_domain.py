"""The public functions of attnlab.duranthon guard their domain (attnlab.duranthon.domain, the samplers' checks)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import duranthon as du


@pytest.mark.parametrize("L", [2.5, True, "3", None, {"a": 1}])
def test_a_length_that_is_not_an_integer_is_refused_in_one_line(L):
    with pytest.raises(ValueError, match="^L must be a sequence length"):
        du.linear_risk("spiked", 1.0, L)


def test_length_laws_need_integer_lengths_and_probabilities():
    assert du.length_law(np.int64(3)) == du.LengthLaw((3,), (1.0,))
    assert du.length_law([2, 4]).mean == 3.0
    with pytest.raises(ValueError, match="^every sequence length in L must be an integer >= 1; got 2.5$"):
        du.length_law([2, 2.5])
    with pytest.raises(ValueError, match="^every sequence length in L must be an integer >= 1; got 0$"):
        du.length_law(0)
    with pytest.raises(ValueError, match="^every probability of L must be >= 0"):
        du.length_law(du.LengthLaw((2, 3), (1.5, -0.5)))
    with pytest.raises(ValueError, match="^every probability of L must be a number >= 0; got NaN$"):
        du.length_law(du.LengthLaw((2, 3), (math.nan, 1.0)))
    with pytest.raises(ValueError, match="^L must give one probability per length"):
        du.length_law(du.LengthLaw((2, 3), (1.0,)))


def test_samplers_refuse_non_integer_sizes_and_a_teacher_of_the_wrong_norm(key):
    with pytest.raises(ValueError, match="^number of samples n must be an integer >= 1; got 2.5$"):
        du.sample_scores(key, "spiked", 1.0, 3, 2.5)
    with pytest.raises(ValueError, match="^noise_std must be >= 0"):
        du.sample_scores(key, "spiked", 1.0, 3, 4, noise_std=-1.0)
    with pytest.raises(ValueError, match="^signal strength nu must be a number >= 0; got NaN$"):
        du.sample_scores(key, "spiked", math.nan, 3, 4)
    ks, vs = du.sample_teacher_sqrtD(key, 6)
    assert du.sample_sequences(key, ks, vs, "spiked", 1.0, 3, 4).X.shape == (4, 3, 6)
    with pytest.raises(ValueError, match="^k_star and v_star must both have length 2.44949"):
        du.sample_sequences(key, ks / math.sqrt(6), vs / math.sqrt(6), "spiked", 1.0, 3, 4)
    with pytest.raises(ValueError, match="^dimension D must be an integer >= 2; got 6.0$"):
        du.sample_teacher_sqrtD(key, 6.0)


def test_risks_refuse_monte_carlo_sizes_below_two_and_impossible_overlaps(key):
    soft = du.activation("softmax")
    with pytest.raises(ValueError, match="^n must be an integer >= 2; got 1$"):
        du.bayes_risk_mc(key, "spiked", 1.0, 3, 1)
    with pytest.raises(ValueError, match="^q_k must be at least m_k\\^2"):
        du.overlap_risk(key, soft, "spiked", 1.0, 3, 0.5, 0.1, 0.5, 0.5, 100)
    with pytest.raises(ValueError, match="^act must be an attention-weight function"):
        du.overlap_risk(key, "softmax", "spiked", 1.0, 3, 0.5, 0.5, 0.5, 0.5, 100)
    with pytest.raises(ValueError, match="^kappa_max must be > 0"):
        du.optimal_key_scale(key, soft, "spiked", 1.0, 3, kappa_max=0.0)
    with pytest.raises(ValueError, match=r"^defensive must be in \(0, 1\)"):
        du.bayes_risk_is(key, 1.0, 3, 100, defensive=1.0)
    with pytest.raises(ValueError, match="^c must be a finite number; got NaN$"):
        du.activation("erf", math.nan)


def test_fit_erm_refuses_inconsistent_shapes(key):
    X = jax.random.normal(key, (5, 3, 4))
    mask, y, k0 = jnp.ones((5, 3), bool), jnp.zeros(5), jnp.ones(4)
    assert du.fit_erm(du.activation("linear"), X, mask, y, 1.0, 1.0, k0, k0, max_iter=5).k.shape == (4,)
    with pytest.raises(ValueError, match=r"^k0 must have shape \(4,\); got shape \(3,\)$"):
        du.fit_erm(du.activation("linear"), X, mask, y, 1.0, 1.0, k0[:3], k0)
    with pytest.raises(ValueError, match="^mask must be a boolean array"):
        du.fit_erm(du.activation("linear"), X, jnp.ones((5, 3)), y, 1.0, 1.0, k0, k0)
    with pytest.raises(ValueError, match="^lam_k must be >= 0"):
        du.fit_erm(du.activation("linear"), X, mask, y, -1.0, 1.0, k0, k0)


def test_replica_solvers_refuse_bad_order_parameters_and_ratios(key):
    samples = du.frozen_samples(key, "spiked", 1.0, 2, 64)
    soft = du.activation("softmax")
    start = (0.5, 0.5, 1.0, 0.5, 0.5, 1.0)
    with pytest.raises(ValueError, match="^alpha must be > 0"):
        du.solve_replica(soft, -1.0, 1.0, 1.0, samples, start)
    with pytest.raises(ValueError, match="^init must be six order parameters"):
        du.solve_replica(soft, 1.0, 1.0, 1.0, samples, start[:5])
    with pytest.raises(ValueError, match="^init V_k must be > 0"):
        du.solve_replica(soft, 1.0, 1.0, 1.0, samples, (0.5, 0.5, 0.0, 0.5, 0.5, 1.0))
    with pytest.raises(ValueError, match="^samples must be an attnlab.duranthon.FrozenSamples"):
        du.solve_replica(soft, 1.0, 1.0, 1.0, tuple(samples), start)
    with pytest.raises(ValueError, match="^alphas must be a nonempty sequence"):
        du.continue_in_alpha(soft, [], 1.0, 1.0, samples, start)
    with pytest.raises(ValueError, match=r"^P must have shape \(2, 2, 2, 2\)"):
        du.at_eigenvalue(np.zeros((2, 2)), 1.0, 1.0)
    assert math.isnan(du.at_eigenvalue(np.full((2, 2, 2, 2), np.nan), 1.0, 1.0))  # documented: NaN for a bad P
