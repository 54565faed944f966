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


@pytest.mark.parametrize("d,L,gamma,eps", [(8, 5, 0.6, 0.1), (12, 10, 0.5**0.5, 0.2)])
def test_bayes_risk_in_frame_against_the_draw_in_rd(d, L, gamma, eps):
    """The Bayes risk drawn in the frame (4 L coordinates and L chi-square norms per sequence) within 5 combined SE of
    the one drawn in R^d. Control: the same draw in the frame without the other coordinates' norms (the posterior
    then misses the signal token's smaller spread) lies beyond 5 combined SE of the draw in R^d."""
    from attnlab.marion.montecarlo import mc_bayes_risk, mc_bayes_risk_in_frame
    from attnlab.marion.predictors import bayes_posterior_from_statistics
    from attnlab.slr.data import sample_slr_in_frame
    from attnlab.slr.montecarlo import mc_mean

    def without_norms(key, m):
        Z, y, _ = sample_slr_in_frame(key, m, L, gamma, eps, d)
        p = bayes_posterior_from_statistics(jnp.sum(Z * Z, axis=-1), Z[..., 0], d / 2.0, d, gamma)
        return (jnp.sum(p * Z[..., 1], axis=-1) - y) ** 2

    with runtime.x64():
        k_star, v_star = sample_teacher(jax.random.key(5), d)
        rd, rd_se = map(float, mc_bayes_risk(jax.random.key(6), k_star, v_star, gamma, L, 20_000, eps))
        fr, fr_se = map(float, mc_bayes_risk_in_frame(jax.random.key(7), gamma, float(d), L, 200_000, eps))
        wrong, wrong_se = map(float, mc_mean(jax.random.key(8), without_norms, 200_000, 20_000))
    assert abs(rd - fr) <= 5 * np.hypot(rd_se, fr_se), (rd, fr, rd_se, fr_se)
    assert abs(rd - wrong) > 5 * np.hypot(rd_se, wrong_se), (rd, wrong, rd_se, wrong_se)
