"""Monte Carlo risks in the frame: the estimator over the attention scores (the rest integrated exactly) against the
closed form and against the estimator that draws every coordinate of the tokens."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import runtime
from attnlab.marion.montecarlo import (
    mc_excess_risk_given_scores,
    mc_excess_risk_given_scores_to_se,
    mc_excess_risk_in_frame,
)
from attnlab.marion.risk import population_excess_risk
from attnlab.slr.data import sample_teacher
from attnlab.slr.overlaps import overlaps

GAMMA, D, L = 0.5**0.5, 400, 10


def _point(seed: int, pull: float):
    """Overlaps of a (k, v) pulled towards (k*, v*) by ``pull`` (0: independent of the teacher), normalised."""
    k_star, v_star = sample_teacher(jax.random.key(seed), D)
    k, v = sample_teacher(jax.random.key(seed + 100), D)
    k, v = k + pull * k_star, v + pull * v_star
    return overlaps(k / jnp.linalg.norm(k), v / jnp.linalg.norm(v), k_star, v_star)


@pytest.mark.parametrize("seed,pull,lam", [(0, 0.0, 0.9), (1, 1.0, 0.1), (2, 3.0, 2.0), (3, 30.0, 0.1)])
def test_given_scores_estimator_against_the_closed_form_and_the_full_draw(seed, pull, lam):
    """Both estimators within 5 SE of the closed form (and of each other, 5 combined SE); the one over the scores
    has the smaller SE at the same count (Rao-Blackwell). Control: the closed form at 1.2 lambda lies beyond 5 SE
    of the estimate."""
    with runtime.x64():
        o = _point(seed, pull)
        theory = float(population_excess_risk(o, lam, GAMMA, D, L))
        rb, rb_se = map(float, mc_excess_risk_given_scores(jax.random.key(10 + seed), o, lam, GAMMA, D, L, 200_000))
        raw, raw_se = map(float, mc_excess_risk_in_frame(jax.random.key(20 + seed), o, lam, GAMMA, D, L, 200_000))
        wrong = float(population_excess_risk(o, 1.2 * lam, GAMMA, D, L))
    assert abs(rb - theory) <= 5 * rb_se, (rb, theory, rb_se)
    assert abs(raw - theory) <= 5 * raw_se, (raw, theory, raw_se)
    assert abs(rb - raw) <= 5 * np.hypot(rb_se, raw_se)
    assert rb_se < raw_se
    assert abs(rb - wrong) > 5 * rb_se, (rb, wrong, rb_se)


def test_given_scores_to_se_draws_the_same_sequences_until_the_target():
    """Drawn to a target SE: the same sequences as the fixed-count estimator (equal when every sequence is drawn),
    fewer sequences for a looser target, and its SE at most the target when it stops early."""
    with runtime.x64():
        o = _point(4, 2.0)
        key = jax.random.key(7)
        full, full_se = mc_excess_risk_given_scores(key, o, 0.5, GAMMA, D, L, 100_000)
        mean, se, count = mc_excess_risk_given_scores_to_se(key, o, 0.5, GAMMA, D, L, 100_000, 0.0)
        assert int(count) == 100_000
        np.testing.assert_allclose([float(mean), float(se)], [float(full), float(full_se)], rtol=1e-12)
        target = 4 * float(full_se)
        mean, se, count = mc_excess_risk_given_scores_to_se(key, o, 0.5, GAMMA, D, L, 100_000, target)
        assert int(count) < 100_000 and float(se) <= target
