"""Spiked-SLR and max-SLR samplers and the activation family (Duranthon et al., spec 1-2).

Statistical checks use fixed keys and 5-standard-error tolerances.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.duranthon.activations import activation, custom_activation
from attnlab.duranthon.data import (
    length_law,
    sample_scores,
    sample_scores_and_normals,
    sample_sequences,
    sample_teacher_sqrtD,
)
from attnlab.duranthon.population import mu_max


def _close(x, target, tol_se=5.0):
    x = np.asarray(x, dtype=float)
    se = np.std(x, ddof=1) / math.sqrt(x.size)
    assert abs(x.mean() - target) <= tol_se * se, (x.mean(), target, se)


@pytest.fixture(scope="module")
def teacher():
    return sample_teacher_sqrtD(jax.random.key(0), 64)


def test_teacher_has_norm_sqrt_D_and_is_orthogonal(teacher):
    k, v = teacher
    assert abs(float(k @ k) - 64) < 1e-10 and abs(float(v @ v) - 64) < 1e-10 and abs(float(k @ v)) < 1e-10


def test_spiked_sequences_carry_the_spike_on_the_location(teacher):
    k, v = teacher
    b = sample_sequences(jax.random.key(1), k, v, "spiked", 4.0, 3, 6000)
    chi = np.asarray(b.X @ k / 8.0)
    on = np.arange(3)[None, :] == np.asarray(b.eps)[:, None]
    _close(chi[on], 2.0)  # chi*_{eps*} ~ N(sqrt(nu), 1)
    _close(chi[~on], 0.0)
    assert abs(np.var(chi[on], ddof=1) - 1) < 5 * math.sqrt(2 / on.sum())
    counts = np.bincount(np.asarray(b.eps), minlength=3) / b.eps.size
    assert np.all(np.abs(counts - 1 / 3) < 5 * math.sqrt(2 / 9 / b.eps.size))
    # noiseless label = zeta*_{eps*}
    zeta = np.asarray(b.X @ v / 8.0)
    np.testing.assert_allclose(np.asarray(b.y), zeta[on], atol=1e-12)


def test_max_slr_tokens_are_iid_and_the_location_follows_softmax(teacher):
    k, v = teacher
    nu = 2.0
    b = sample_sequences(jax.random.key(2), k, v, "max", nu, 2, 8000)
    chi = np.asarray(b.X @ k / 8.0)
    _close(chi.ravel(), 0.0)
    on = np.arange(2)[None, :] == np.asarray(b.eps)[:, None]
    mu, _ = mu_max(nu, 2)  # E[chi*_{eps*}] under eps* ~ softmax(nu chi*), by quadrature
    _close(chi[on], mu)
    inf = sample_sequences(jax.random.key(3), k, v, "max", math.inf, 3, 500)
    chi_inf = np.asarray(inf.X @ k / 8.0)
    np.testing.assert_array_equal(np.asarray(inf.eps), np.argmax(chi_inf, axis=1))


def test_variable_length_masks_and_frequencies(teacher):
    k, v = teacher
    law = length_law((1, 2, 3))
    b = sample_sequences(jax.random.key(4), k, v, "spiked", 5.0, law, 6000, noise_std=0.5)
    lengths = np.asarray(b.mask).sum(axis=1)
    freq = np.bincount(lengths, minlength=4)[1:] / lengths.size
    assert np.all(np.abs(freq - 1 / 3) < 5 * math.sqrt(2 / 9 / lengths.size))
    assert np.all(np.asarray(b.eps) < lengths)
    assert float(jnp.max(jnp.abs(jnp.where(b.mask[..., None], 0.0, b.X)))) == 0.0
    _close(np.asarray(b.y) ** 2, 1.25)  # Var y = 1 + noise_std^2


def test_score_sampler_matches_the_sequence_sampler_in_law(teacher):
    k, v = teacher
    for model, nu, L in (("spiked", 3.0, (2, 3)),):
        s = sample_scores(jax.random.key(5), model, nu, L, 20000)
        b = sample_sequences(jax.random.key(6), k, v, model, nu, L, 6000)
        chi_b = np.asarray(b.X @ k / 8.0)
        for name, f in (("chi_eps", lambda c, e: c[np.arange(c.shape[0]), e]), ("chi_sum", lambda c, e: c.sum(1))):
            a1 = f(np.asarray(s.chi), np.asarray(s.eps))
            a2 = f(chi_b, np.asarray(b.eps))
            se = math.sqrt(a1.var() / a1.size + a2.var() / a2.size)
            assert abs(a1.mean() - a2.mean()) < 5 * se, (model, name)


@pytest.mark.parametrize("bad", [dict(nu=-1.0), dict(L=0), dict(L=(1, 0)), dict(model="other"),
                                 dict(model="spiked", nu=math.inf)])
def test_bad_input_is_rejected(bad):
    args = dict(model="spiked", nu=1.0, L=2) | bad
    with pytest.raises(ValueError):
        sample_scores(jax.random.key(0), args["model"], args["nu"], args["L"], 10)


def test_activations_respect_the_mask_and_their_definitions():
    chi = jax.random.normal(jax.random.key(7), (5, 3))
    mask = jnp.array([[True, True, False]] * 5)
    for name in ("softmax", "linear", "centred_linear", "erf", "softplus"):
        act = activation(name, c=0.3)
        w = act(chi, mask)
        np.testing.assert_allclose(w[:, :2], act(chi[:, :2]), atol=1e-14)  # padding = a shorter sequence
        assert float(jnp.max(jnp.abs(w[:, 2]))) == 0.0
    np.testing.assert_allclose(activation("softmax")(chi).sum(-1), 1.0, atol=1e-14)
    np.testing.assert_allclose(activation("softplus")(chi).sum(-1), 1.0, atol=1e-14)
    np.testing.assert_allclose(activation("erf", 0.3)(chi), 1 + jax.scipy.special.erf(0.3 + chi), atol=1e-14)
    # centred linear = first-order expansion of softmax(t chi) at t = 0, divided by t for the chi part
    t = 1e-5
    lin = (activation("softmax")(t * chi) - 1 / 3) / t
    np.testing.assert_allclose(lin, (activation("centred_linear")(chi) - 1 / 3) / 1.0, atol=1e-4)
    user = custom_activation("exp", jnp.exp, normalised=True)
    np.testing.assert_allclose(user(chi), activation("softmax")(chi), atol=1e-14)
    assert user.label == "exp" and activation("linear").label == "linear 1+chi"
    with pytest.raises(ValueError):
        activation("tanh")
    with pytest.raises(ValueError):
        custom_activation("softmax", jnp.exp)


def test_scores_and_normals_are_the_scores_and_normals_of_the_split_key():
    """One program draws what split(key, 3), sample_scores on the first key and a normal per other key draw; the
    control: the keys in the other order give other normals."""
    key = jax.random.key(11)
    s, (a, b) = sample_scores_and_normals(key, "max", 2.0, (2, 4), 256, 2, noise_std=0.5)
    ks, k1, k2 = jax.random.split(key, 3)
    ref = sample_scores(ks, "max", 2.0, (2, 4), 256, noise_std=0.5)
    for x, y in zip(s, ref):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(jax.random.normal(k1, ref.chi.shape)))
    np.testing.assert_array_equal(np.asarray(b), np.asarray(jax.random.normal(k2, ref.chi.shape)))
    assert not np.array_equal(np.asarray(a), np.asarray(jax.random.normal(k2, ref.chi.shape)))
