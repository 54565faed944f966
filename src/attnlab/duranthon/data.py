r"""Spiked-SLR and max-SLR (Duranthon, Marion, Boyer, Loureiro, Zdeborova 2025), fixed or random L.

Tokens ``x_l in R^D`` are N(0, I_D) tilted by ``g_nu(eps*, chi*)``, ``chi* = X k*/sqrt(D)``, with teacher vectors of
norm ``sqrt(D)`` and ``k* . v* = 0``; the label is ``y = x_{eps*} . v*/sqrt(D) + noise_std xi``::

    spiked-SLR:  g = exp(sqrt(nu) chi_eps - nu/2)      -> add sqrt(nu) k*/sqrt(D) to the token eps* ~ U{1..L}
    max-SLR:     g = L exp(nu chi_eps) / sum exp(nu chi)  -> i.i.d. tokens, eps* ~ Categorical(softmax(nu chi*))
                                                          (eps* = argmax chi* at nu = inf)

``noise_std`` is the standard deviation of the label noise (whether the paper's Delta is a standard deviation
or a variance is not settled here; every risk in :mod:`attnlab.duranthon.population` uses ``noise_std**2``).

Random lengths: a :class:`LengthLaw` (values and probabilities). Batches are padded to ``L_max`` and carry a boolean
``mask`` (n, L_max); padded tokens are zero and never chosen as the location.

Two samplers share one law: :func:`sample_sequences` draws the tokens in R^D; :func:`sample_scores` draws only the
teacher fields ``chi* = X k*/sqrt(D)`` and ``zeta* = X v*/sqrt(D)`` (exact in law because the tilt acts on chi*
only and ``k* perp v*``), at a cost independent of D.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import _validate as check
from attnlab import programs

__all__ = ["Model", "LengthLaw", "DuranthonBatch", "Scores", "check_model", "length_law", "c_nu",
           "sample_teacher_sqrtD", "sample_lengths", "sample_scores", "sample_scores_and_normals", "sample_sequences"]

Model = Literal["spiked", "max"]


class LengthLaw(NamedTuple):
    """Law of the sequence length: ``values`` (tuple of ints >= 1) with ``probs`` (tuple summing to 1)."""

    values: tuple
    probs: tuple

    @property
    def L_max(self) -> int:
        return max(self.values)

    @property
    def mean(self) -> float:
        return float(sum(v * p for v, p in zip(self.values, self.probs)))


def length_law(L) -> LengthLaw:
    """A :class:`LengthLaw` from an int (fixed L), a sequence of ints (uniform on them) or a LengthLaw. Domain: lengths
    are integers >= 1 (Python or NumPy, not bools); a law's probabilities are finite, non-negative, one per length, and
    sum to 1. Anything else raises a one-line ValueError naming ``L``."""
    if isinstance(L, LengthLaw):
        values, probs = tuple(L.values), tuple(L.probs)
        if len(probs) != len(values):
            raise ValueError(f"L must give one probability per length; got {len(values)} lengths and {len(probs)} "
                             "probabilities")
        for p in probs:
            check.nonnegative("every probability of L", p)
    elif check.is_integer(L):
        values, probs = (L,), (1.0,)
    elif isinstance(L, (list, tuple, np.ndarray)) and np.ndim(L) == 1:
        values = tuple(L)
        if not values:
            raise ValueError("L must name at least one sequence length; got an empty sequence")
        probs = tuple(1.0 / len(values) for _ in values)
    else:
        raise ValueError(f"L must be a sequence length (an integer >= 1), a sequence of them or a LengthLaw; got {L!r}")
    values = tuple(check.count("every sequence length in L", v) for v in values)
    probs = tuple(float(p) for p in probs)
    if abs(sum(probs) - 1.0) > 1e-12:
        raise ValueError(f"the probabilities of L must sum to 1; got {probs}")
    return LengthLaw(values, probs)


def check_model(model: str, nu) -> float:
    """Validate the model name and the signal strength; returns nu as a float. Domain: ``model`` is ``"spiked"`` or
    ``"max"``; nu >= 0, and nu = inf for max-SLR only (the argmax location)."""
    if model not in ("spiked", "max"):
        raise ValueError(f"unknown model {model!r}: expected 'spiked' or 'max'")
    check.nonnegative("signal strength nu", nu, allow_inf=True)
    if np.ndim(nu) != 0:
        raise ValueError(f"signal strength nu must be a number; got an array of shape {np.shape(nu)}")
    nu = float(nu)
    if math.isinf(nu) and model == "spiked":
        raise ValueError("nu = inf is defined for max-SLR only (spiked-SLR needs a finite nu)")
    return nu


def c_nu(model: str, nu) -> float:
    """The inverse temperature of the location posterior ``P(eps*=l|X) = softmax(c_nu chi*)`` (the
    condition of Prop. 4.2):
    sqrt(nu) for spiked-SLR, nu for max-SLR."""
    nu = check_model(model, nu)
    return math.sqrt(nu) if model == "spiked" else nu


def sample_teacher_sqrtD(key, D: int):
    """Teacher pair with ``|k*|^2 = |v*|^2 = D`` and ``k* . v* = 0`` (Gaussian, orthogonalised, rescaled); D an
    integer >= 2."""
    return _teacher_sqrtD(key, check.count("dimension D", D, minimum=2))


@partial(programs.jit, static_argnums=1)
def _teacher_sqrtD(key, D: int):
    kk, kv = jax.random.split(key)
    k = jax.random.normal(kk, (D,))
    k = k / jnp.linalg.norm(k)
    v = jax.random.normal(kv, (D,))
    v = v - (v @ k) * k
    return math.sqrt(D) * k, math.sqrt(D) * v / jnp.linalg.norm(v)


def _length_probs(law: LengthLaw):
    """Probabilities of the lengths 1..L_max (a traced array, so one compiled sampler serves every law); placed on
    the device as it is (``jnp.asarray`` would compile a program per length)."""
    probs = np.zeros(law.L_max)
    for v, p in zip(law.values, law.probs):
        probs[v - 1] += p
    return jax.device_put(probs)


def _lengths_from_probs(key, probs, n: int):
    L_max = probs.shape[0]
    lengths = 1 + jax.random.categorical(key, jnp.log(probs), shape=(n,))
    return lengths, jnp.arange(L_max)[None, :] < lengths[:, None]


def sample_lengths(key, law: LengthLaw, n: int):
    """Lengths (n,) and the padding mask (n, L_max)."""
    return _lengths_from_probs(key, _length_probs(law), n)


def _location(key, is_spiked, nu_is_inf, nu, chi_star, mask):
    """eps* given the base scores: uniform on the valid tokens (spiked) or softmax(nu chi*) (max-SLR; argmax at
    nu = inf). The flags are traced, so the three cases share one compiled function."""
    uniform = jnp.where(mask, 0.0, -jnp.inf)
    tilted = jnp.where(mask, jnp.where(nu_is_inf, 0.0, nu) * chi_star, -jnp.inf)
    drawn = jax.random.categorical(key, jnp.where(is_spiked, uniform, tilted), axis=-1)
    argmax = jnp.argmax(jnp.where(mask, chi_star, -jnp.inf), axis=-1)
    return jnp.where(is_spiked | ~nu_is_inf, drawn, argmax)


def _flags(model, nu):
    inf = math.isinf(nu)
    return model == "spiked", inf, 0.0 if inf else nu


class Scores(NamedTuple):
    """Teacher fields of a batch: ``chi`` = X k*/sqrt(D), ``zeta`` = X v*/sqrt(D) (n, L_max), the location ``eps``
    (n,), the labels ``y`` (n,) and the padding ``mask`` (n, L_max)."""

    chi: jax.Array
    zeta: jax.Array
    eps: jax.Array
    y: jax.Array
    mask: jax.Array


def _score_arguments(model: str, nu, L, n: int, noise_std) -> tuple:
    """The checked arguments of :func:`_sample_scores` after its key: model flags, length probabilities, n, noise."""
    nu = check_model(model, nu)
    n = check.count("number of samples n", n)
    check.nonnegative("noise_std", noise_std, scalar=True)
    return (*_flags(model, nu), _length_probs(length_law(L)), int(n), noise_std)


def sample_scores(key, model: str, nu, L, n: int, noise_std=0.0) -> Scores:
    """Draw ``n`` samples of the teacher fields (chi*, zeta*), the location and the label."""
    return _sample_scores(key, *_score_arguments(model, nu, L, n, noise_std))


def sample_scores_and_normals(key, model: str, nu, L, n: int, n_normals: int, noise_std=0.0):
    """:func:`sample_scores` from the first of ``split(key, 1 + n_normals)`` and, from each other key, an array of
    iid N(0, 1) of the scores' shape (n, L_max): ``(Scores, (xi_1, ..., xi_n_normals))``, one compiled program."""
    return _scores_and_normals(key, *_score_arguments(model, nu, L, n, noise_std), int(n_normals))


@partial(programs.jit, static_argnames=("n", "n_normals"))
def _scores_and_normals(key, is_spiked, nu_is_inf, nu, probs, n, noise_std, n_normals):
    ks, *kn = jax.random.split(key, 1 + n_normals)
    s = _sample_scores.plain(ks, is_spiked, nu_is_inf, nu, probs, n, noise_std)
    return s, tuple(jax.random.normal(k, s.chi.shape) for k in kn)


@partial(programs.jit, static_argnames=("n",))
def _sample_scores(key, is_spiked, nu_is_inf, nu, probs, n, noise_std):
    kl, kc, kz, ke, kn = jax.random.split(key, 5)
    _, mask = _lengths_from_probs(kl, probs, n)
    chi = jax.random.normal(kc, (n, probs.shape[0]))
    eps = _location(ke, is_spiked, nu_is_inf, nu, chi, mask)
    onehot = jnp.arange(probs.shape[0])[None, :] == eps[:, None]
    chi = chi + jnp.where(is_spiked, jnp.sqrt(nu), 0.0) * onehot
    chi = jnp.where(mask, chi, 0.0)
    zeta = jnp.where(mask, jax.random.normal(kz, (n, probs.shape[0])), 0.0)
    y = jnp.sum(jnp.where(onehot, zeta, 0.0), axis=-1) + noise_std * jax.random.normal(kn, (n,))
    return Scores(chi, zeta, eps, y, mask)


class DuranthonBatch(NamedTuple):
    """Sequences in R^D: tokens ``X`` (n, L_max, D), labels ``y`` (n,), locations ``eps`` (n,), ``mask``."""

    X: jax.Array
    y: jax.Array
    eps: jax.Array
    mask: jax.Array


def sample_sequences(key, k_star, v_star, model: str, nu, L, n: int, noise_std=0.0) -> DuranthonBatch:
    """Draw ``n`` sequences in R^D (D = k_star.size) from spiked- or max-SLR with teacher (k*, v*) of norm sqrt(D)."""
    nu = check_model(model, nu)
    law = length_law(L)
    n = check.count("number of samples n", n)
    check.nonnegative("noise_std", noise_std, scalar=True)
    check.teacher("k_star", k_star, "v_star", v_star, norm=math.sqrt(np.shape(k_star)[-1]) if np.ndim(k_star) else 1.0)
    return _sample_sequences(key, k_star, v_star, *_flags(model, nu), _length_probs(law), int(n), noise_std)


@partial(programs.jit, static_argnames=("n",))
def _sample_sequences(key, k_star, v_star, is_spiked, nu_is_inf, nu, probs, n, noise_std):
    D = k_star.shape[-1]
    L_max = probs.shape[0]
    kl, kx, ke, kn = jax.random.split(key, 4)
    _, mask = _lengths_from_probs(kl, probs, n)
    X = jax.random.normal(kx, (n, L_max, D))
    chi = X @ k_star / math.sqrt(D)
    eps = _location(ke, is_spiked, nu_is_inf, nu, chi, mask)
    onehot = jnp.arange(L_max)[None, :] == eps[:, None]
    X = X + (jnp.where(is_spiked, jnp.sqrt(nu), 0.0) / math.sqrt(D)) * onehot[..., None] * k_star
    X = jnp.where(mask[..., None], X, 0.0)
    x_eps = jnp.sum(jnp.where(onehot[..., None], X, 0.0), axis=1)
    y = x_eps @ v_star / math.sqrt(D) + noise_std * jax.random.normal(kn, (n,))
    return DuranthonBatch(X, y, eps, mask)
