r"""Two erf-attention heads on two-direction single-location regression: the toy model T1 of Marion, Berthier, Biau,
Boyer, "Attention layers provably solve single-location regression" (ICLR 2025), App. E.3 (the multi-head
experiment), in closed form and as an exact reduced Markov chain.

**Model** (App. E.3; one head is the erf attention of the main text). ``H`` heads with parameters ``k_h, v_h`` on the
unit sphere::

    T_lambda(X) = sum_{h=1..H} sum_{l=1..L} erf(lambda X_l . k_h) (X_l . v_h)

**Data law D2** (``J`` directions; App. E.3 has ``J = H = 2``). ``J`` teacher pairs ``(k*_j, v*_j)``, each drawn as in
the single-head law (:func:`attnlab.slr.data.sample_teacher`: ``k*_j . v*_j = 0``; nothing is orthogonal across
pairs). Tokens ``1..J`` carry the signals at fixed positions and the others are noise::

    X_j = s k*_j + gamma z_j  (j <= J),   X_l ~ N(0, I_d)  (l > J),   y = sum_j X_j . v*_j + eps xi,   s = sqrt(d/2)

with independent ``z_j ~ N(0, I_d)`` (the corrected law) or one ``z`` shared by all signal tokens (the official
notebook's law, whose two signal tokens are drawn from one PRNG key: ``shared = True``). The model is invariant under
permutations of the tokens, so fixed positions lose no generality.

**Optimiser.** Online projected SGD: each update draws a fresh batch of ``B`` sequences, takes the Euclidean gradient
``g_u`` of the batch loss ``(1/B) sum_b (T_lambda(X_b) - y_b)^2`` for every ``u in {k_h, v_h}`` at the current point and
moves all of them at once: ``u~ = u - alpha (g_u - (u . g_u) u)``, ``u <- u~ / |u~|``. The erf scale follows the capped
schedule ``lambda_t = lambda_0 / (1 + c min(t, t_cap))`` (:func:`lambda_capped`; App. E.3: ``lambda_0 = 2``,
``c = 2e-4``, ``t_cap = 25 000``, so ``lambda_t = 1/3`` from ``t_cap`` on).

**Notation map.** Vectors are ordered teachers first, then students: ``(k*_1, v*_1, ..., k*_J, v*_J, k_1, v_1, ...,
k_H, v_H)`` (:func:`vector_names`); ``gram`` is their Gram matrix (``n = 2J + 2H`` rows). The notebook's ``kappa_hj``
is ``|k_h . k*_j|`` and its ``nu_hj`` is ``|v_h . v*_j|`` (absolute values, :func:`alignments`). ``shared`` is the
notebook's shared signal noise; ``rho_signal`` below is the correlation of the signal tokens' noises (1 shared,
0 independent).

**Closed-form population risk** (:func:`population_excess_risk`). ``E[(T - y)^2] - eps^2`` depends on the parameters
only through ``gram``: every ``X_l . a`` is Gaussian with mean ``s k*_j . a`` (signal token j) or 0 and covariance
``Cov(X_l . a, X_m . b) = c_lm a . b`` with ``c_jj = gamma^2``, ``c_jj' = rho_signal gamma^2``, ``c_ll = 1`` for noise
tokens and 0 otherwise. Expanding the square leaves expectations ``E[erf(U_1) erf(U_2) W_1 W_2]`` and
``E[erf(U) W_1 W_2]`` of jointly Gaussian ``U, W``. Gaussian integration by parts (Stein's lemma, twice) reduces each
to derivatives in the mean of ``G(mu) = E[erf(U_1) erf(U_2)]`` (or of ``E erf(U) = erf(mu / sqrt(1 + 2 sigma^2))``)::

    E[F(U) W_1 W_2] = (m_1 m_2 + C_{W1 W2}) G + sum_i (m_1 C_{W2 Ui} + m_2 C_{W1 Ui}) d_i G
                      + sum_ij C_{W1 Ui} C_{W2 Uj} d_i d_j G

and ``G`` has a one-dimensional integral form (Plackett's identity for the bivariate normal CDF)::

    G = erf(a_1) erf(a_2) + 4 int_0^r phi_2(sqrt(2) a_1, sqrt(2) a_2; t) dt,
    a_i = mu_i / sqrt(1 + 2 S_ii),   r = 2 S_12 / sqrt((1 + 2 S_11)(1 + 2 S_22)),   |r| < 1,

with ``phi_2(., .; t)`` the standard bivariate normal density of correlation ``t``, evaluated with a fixed 64-node
Gauss-Legendre rule; the derivatives are JAX autodiff of the same expression. For one head and one direction the
formula is Theorem 1 (:func:`attnlab.marion.risk.population_excess_risk`), which the tests compare.

**Exact reduced dynamics** (:func:`sgd_step_reduced`). The data law is invariant under the rotations that fix the
``2J`` teacher vectors and SGD is equivariant under them, so ``gram`` is a Markov chain: the overlaps close, as for one
head (:mod:`attnlab.marion.dynamics`). One update draws each token's coordinates in an orthonormal frame of the span
of the ``n`` vectors (the rows of the Cholesky factor of ``gram``) and, for the ``d - n`` remaining coordinates,
only the Gram matrix of the ``2H`` gradient components there: ``g_u^perp = sum_src c_u,src sigma_src w_src`` with
``w_src ~ N(0, I_{d-n})`` iid over the independent Gaussian sources (each noise token, each signal noise ``z_j``, or the
one shared ``z``), so that Gram is Wishart_{2H}(d - n, Sigma), ``Sigma = sum_src sigma_src^2 c_src c_src^T``, drawn
as ``(C B)(C B)^T`` with ``C`` the Cholesky factor of Sigma and ``B`` the Bartlett factor. The new Gram entries are
``u~ . t = a_u u . t - alpha g_u . t`` and ``u~ . w~ = a_u a_w u . w - alpha a_u u . g_w - alpha a_w g_u . w
+ alpha^2 g_u . g_w`` (``a_u = 1 + alpha u . g_u``), normalised. An update costs O(B L n) draws and operations, plus
the ``d - n`` uniforms of the Bartlett factor's chi-square draws, instead of O(B L d). The full-vector step in R^d
(:func:`sgd_step_full`) is the reference it is tested against (the same law of one update, and of many).

**Head classes** (:func:`classify`). A head is *assigned* to direction j when ``|k_h . k*_j| >= threshold`` and
``>= dominance`` times its alignment with every other direction. A run is *specialised* when all heads are assigned to
distinct directions, *collapsed* when all are assigned but two share a direction, *failed* when no alignment reaches
the threshold, and *mixed* otherwise.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf

from attnlab import programs
from attnlab.marion.dynamics import _segment_count
from attnlab.marion.risk import erf_prime

__all__ = [
    "CLASSES",
    "vector_names",
    "teacher_index",
    "student_index",
    "lambda_capped",
    "sample_teachers",
    "init_students",
    "gram_matrix",
    "sample_d2",
    "multihead_erf",
    "erf_erf_mean",
    "population_excess_risk",
    "frame",
    "embed",
    "ReducedNoise",
    "draw_reduced_noise",
    "sgd_step_reduced",
    "sgd_step_full",
    "heldout_excess_risk",
    "mc_excess_risk",
    "alignments",
    "match_swap",
    "matched",
    "classify",
    "ToyParams",
    "run_reduced",
    "risks_along",
]

CLASSES = ("specialised", "collapsed", "mixed", "failed")
"""Run classes of :func:`classify`, in the order of their integer codes."""

_GL_X, _GL_W = np.polynomial.legendre.leggauss(64)
_SQRT2 = math.sqrt(2.0)


# --- layout of the Gram matrix -------------------------------------------------------------------------------------

def vector_names(J: int = 2, H: int = 2) -> list[str]:
    """Names of the Gram matrix's vectors, teachers first: ``k*1, v*1, ..., k1, v1, ...``."""
    return [f"{a}*{j + 1}" for j in range(J) for a in "kv"] + [f"{a}{h + 1}" for h in range(H) for a in "kv"]


def teacher_index(J: int):
    """Rows of ``k*_j`` and ``v*_j`` in the Gram matrix: two integer arrays of length J."""
    return np.arange(J) * 2, np.arange(J) * 2 + 1


def student_index(J: int, H: int):
    """Rows of ``k_h`` and ``v_h`` in the Gram matrix: two integer arrays of length H."""
    return 2 * J + np.arange(H) * 2, 2 * J + np.arange(H) * 2 + 1


# --- schedule, initialisation, data --------------------------------------------------------------------------------

@jax.jit
def lambda_capped(t, lambda0, rate, cap):
    """``lambda_t = lambda0 / (1 + rate min(t, cap))`` (App. E.3: 2 / (1 + 2e-4 min(t, 25 000)), 1/3 from the cap on)."""
    return lambda0 / (1.0 + rate * jnp.minimum(jnp.asarray(t, dtype=jnp.float64), cap))


def sample_teachers(key, d: int, J: int = 2):
    """J teacher pairs, each as :func:`attnlab.slr.data.sample_teacher` (the notebook's ``init_star``) from one of J
    keys split from ``key``. Returns ``(k_star, v_star)``, each (J, d)."""
    from attnlab.slr.data import sample_teacher

    return jax.vmap(lambda k: sample_teacher(k, d))(jax.random.split(key, J))


def init_students(key, d: int, H: int = 2):
    """Independent uniform points of the sphere for ``k_1, v_1, ..., k_H, v_H`` (the notebook's ``generate_params``:
    normalised Gaussians from 2H keys split from ``key``, in that order). Returns ``(K, V)``, each (H, d)."""
    keys = jax.random.split(key, 2 * H)
    u = jax.vmap(lambda k: jax.random.normal(k, (d,)))(keys)
    u = u / jnp.linalg.norm(u, axis=-1, keepdims=True)
    return u[0::2], u[1::2]


def gram_matrix(k_star, v_star, K, V):
    """The Gram matrix of ``(k*_1, v*_1, ..., k_1, v_1, ...)`` from the vectors (teachers (J, d), students (H, d))."""
    J, H = k_star.shape[0], K.shape[0]
    teach = jnp.stack([k_star, v_star], axis=1).reshape(2 * J, -1)
    stud = jnp.stack([K, V], axis=1).reshape(2 * H, -1)
    vecs = jnp.concatenate([teach, stud], axis=0)
    return vecs @ vecs.T


def sample_d2(key, k_star, v_star, n: int, L: int, gamma, eps, shared):
    """``n`` sequences of law D2 in R^d: ``X_j = sqrt(d/2) k*_j + gamma z_j`` for the J signal tokens (first), the
    ``L - J`` others N(0, I), ``y = sum_j X_j . v*_j + eps xi``; ``shared``: one ``z`` for all signal tokens (the
    notebook). Returns ``(X, y)``, shapes (n, L, d) and (n,)."""
    J, d = k_star.shape
    kz, kn, kxi = jax.random.split(key, 3)
    z = jax.random.normal(kz, (n, J, d))
    z = jnp.where(shared, jnp.broadcast_to(z[:, :1], z.shape), z)
    signal = math.sqrt(d / 2.0) * k_star + gamma * z
    X = jnp.concatenate([signal, jax.random.normal(kn, (n, L - J, d))], axis=1)
    y = jnp.einsum("njd,jd->n", signal, v_star) + eps * jax.random.normal(kxi, (n,))
    return X, y


def multihead_erf(X, K, V, lam):
    """``T_lambda(X) = sum_h sum_l erf(lambda X_l . k_h) (X_l . v_h)`` for X (..., L, dim), K and V (H, dim)."""
    return jnp.sum(erf(lam * (X @ K.T)) * (X @ V.T), axis=(-1, -2))


# --- closed-form population risk -----------------------------------------------------------------------------------

def erf_erf_mean(mu1, mu2, s11, s22, s12):
    """``G = E[erf(U_1) erf(U_2)]`` for ``U ~ N((mu1, mu2), [[s11, s12], [s12, s22]])`` by Plackett's identity:
    ``erf(a_1) erf(a_2) + 4 int_0^r phi_2(sqrt(2) a_1, sqrt(2) a_2; t) dt`` (:mod:`attnlab.marion.multihead`)."""
    q1, q2 = jnp.sqrt(1.0 + 2.0 * s11), jnp.sqrt(1.0 + 2.0 * s22)
    a1, a2 = mu1 / q1, mu2 / q2
    h1, h2 = _SQRT2 * a1, _SQRT2 * a2
    r = 2.0 * s12 / (q1 * q2)
    t = 0.5 * r * (jnp.asarray(_GL_X) + 1.0)
    w = 0.5 * r * jnp.asarray(_GL_W)
    one = 1.0 - t * t
    phi2 = jnp.exp(-(h1 * h1 - 2.0 * t * h1 * h2 + h2 * h2) / (2.0 * one)) / (2.0 * math.pi * jnp.sqrt(one))
    return erf(a1) * erf(a2) + 4.0 * jnp.sum(w * phi2)


def _e_ffww(mu_u, s_uu, m_w, s_w1w2, c_w1u, c_w2u):
    """``E[erf(U_1) erf(U_2) W_1 W_2]`` from the joint Gaussian moments (Stein's lemma twice)."""

    def G(mu):
        return erf_erf_mean(mu[0], mu[1], s_uu[0, 0], s_uu[1, 1], s_uu[0, 1])

    g0, g1, g2 = G(mu_u), jax.grad(G)(mu_u), jax.hessian(G)(mu_u)
    return ((m_w[0] * m_w[1] + s_w1w2) * g0 + (m_w[0] * c_w2u + m_w[1] * c_w1u) @ g1 + c_w1u @ g2 @ c_w2u)


def _e_fww(mu, s, m1, m2, s12, c1, c2):
    """``E[erf(U) W_1 W_2]`` from the joint Gaussian moments (Stein's lemma twice)."""
    q = jnp.sqrt(1.0 + 2.0 * s)
    a = mu / q
    g0 = erf(a)
    g1 = erf_prime(a) / q
    g2 = -2.0 * a * erf_prime(a) / q**2
    return (m1 * m2 + s12) * g0 + (m1 * c2 + m2 * c1) * g1 + c1 * c2 * g2


def _token_moments(gram, gamma, d, L, J, rho_signal):
    """Mean coefficients and covariances of the representative tokens ``(signal 1..J, noise, noise')``: ``mean[l, a]``
    is ``E X_l . a`` for every vector a of the Gram matrix, ``cov[l, m]`` the factor ``c_lm`` of ``a . b``."""
    s = math.sqrt(d / 2.0)
    ks, _ = teacher_index(J)
    n = gram.shape[0]
    mean = jnp.concatenate([s * gram[ks], jnp.zeros((2, n))], axis=0)
    g2 = gamma**2
    sig = g2 * (rho_signal * jnp.ones((J, J)) + (1.0 - rho_signal) * jnp.eye(J))
    cov = jnp.zeros((J + 2, J + 2)).at[:J, :J].set(sig).at[J, J].set(1.0).at[J + 1, J + 1].set(1.0)
    M = L - J  # noise tokens, represented by two of them (indices J and J + 1)
    pairs = [(a, b) for a in range(J) for b in range(J)] + [(a, J) for a in range(J)] + [(J, a) for a in range(J)]
    weights = [1.0] * (J * J) + [float(M)] * (2 * J)
    pairs += [(J, J), (J, J + 1)]  # the same noise token, two distinct ones
    weights += [float(M), float(M * (M - 1))]
    return mean, cov, np.array(pairs), np.array(weights)


def population_excess_risk(gram, lam, gamma, d, L: int, J: int = 2, H: int = 2, rho_signal=0.0):
    """``E[(T_lambda(X) - y)^2] - eps^2`` in closed form from the Gram matrix (:mod:`attnlab.marion.multihead`).

    ``gram``: the (2J + 2H)-square Gram matrix of ``(k*_1, v*_1, ..., k_1, v_1, ...)``; ``lam``: the erf scale;
    ``gamma``: the signal noise's standard deviation; ``d``: the dimension (signal mean ``sqrt(d/2) k*_j``); ``L``: the
    number of tokens (J of them signal tokens); ``rho_signal``: the correlation of the signal tokens' noises (1: the
    notebook's shared ``z``; 0: independent). Nonnegative: the Bayes risk is ``eps^2`` (``y - eps xi`` is a function of
    the tokens).
    """
    mean, cov, pairs, weights = _token_moments(gram, gamma, d, L, J, rho_signal)
    ks, vs = student_index(J, H)
    _, tv = teacher_index(J)

    # E[T^2]: sum over token pairs (l, m) and head pairs (h, h')
    hh = np.array([(h, g) for h in range(H) for g in range(H)])
    P = np.repeat(pairs, len(hh), axis=0)
    Wt = np.repeat(weights, len(hh))
    HH = np.tile(hh, (len(pairs), 1))
    l, m = P[:, 0], P[:, 1]
    kh, kg, vh, vg = ks[HH[:, 0]], ks[HH[:, 1]], vs[HH[:, 0]], vs[HH[:, 1]]
    c_ll, c_mm, c_lm = cov[l, l], cov[m, m], cov[l, m]
    mu_u = lam * jnp.stack([mean[l, kh], mean[m, kg]], axis=-1)
    s_uu = lam**2 * jnp.stack([jnp.stack([c_ll * gram[kh, kh], c_lm * gram[kh, kg]], -1),
                               jnp.stack([c_lm * gram[kh, kg], c_mm * gram[kg, kg]], -1)], axis=-2)
    m_w = jnp.stack([mean[l, vh], mean[m, vg]], axis=-1)
    s_w = c_lm * gram[vh, vg]
    c1 = lam * jnp.stack([c_ll * gram[vh, kh], c_lm * gram[vh, kg]], axis=-1)
    c2 = lam * jnp.stack([c_lm * gram[vg, kh], c_mm * gram[vg, kg]], axis=-1)
    ET2 = jnp.sum(jnp.asarray(Wt) * jax.vmap(_e_ffww)(mu_u, s_uu, m_w, s_w, c1, c2))

    # E[T Y], Y = sum_j X_j . v*_j: signal tokens (weight 1) and one noise token (weight L - J)
    toks = np.repeat(np.arange(J + 1), H)
    heads = np.tile(np.arange(H), J + 1)
    wt = np.where(toks < J, 1.0, float(L - J))
    kh, vh = ks[heads], vs[heads]
    c_tt = cov[toks, toks]
    EY = jnp.sum(mean[np.arange(J), tv])
    s12 = jnp.sum(cov[toks][:, :J] * gram[vh][:, tv], axis=-1)
    cy = lam * jnp.sum(cov[toks][:, :J] * gram[kh][:, tv], axis=-1)
    ETY = jnp.sum(jnp.asarray(wt) * _e_fww(lam * mean[toks, kh], lam**2 * c_tt * gram[kh, kh], mean[toks, vh], EY, s12,
                                           lam * c_tt * gram[vh, kh], cy))
    EY2 = EY**2 + jnp.sum(cov[:J, :J] * gram[np.ix_(tv, tv)])
    return ET2 - 2.0 * ETY + EY2


# --- the reduced chain and the full-vector step ---------------------------------------------------------------------

def frame(gram):
    """Coordinates of the ``n`` vectors in an orthonormal frame of their span: the rows of the lower Cholesky factor
    of ``gram`` (teachers first, so their coordinates do not depend on the students)."""
    return jnp.linalg.cholesky(gram)


def embed(key, gram, d: int):
    """Vectors in R^d with Gram matrix ``gram``, in a uniformly random orthonormal frame: (n, d), rows in the order of
    :func:`vector_names`."""
    from attnlab.slr.data import orthonormal_frame

    n = gram.shape[0]
    return frame(gram) @ orthonormal_frame(key, d, n)


class ReducedNoise(NamedTuple):
    """The randomness of one reduced update (leading axes: steps, when drawn for a block): standard normal frame
    coordinates of the signal noises ``zeta_signal`` (B, J, n) and of the noise tokens ``zeta_noise`` (B, L - J, n),
    the label noises ``xi`` (B,), and the Bartlett factor ``bartlett`` (2H, 2H) of a Wishart(d - n, I_2H) matrix."""

    zeta_signal: jax.Array
    zeta_noise: jax.Array
    xi: jax.Array
    bartlett: jax.Array


def draw_reduced_noise(key, batch_size: int, L: int, d: int, J: int = 2, H: int = 2, n_steps: int | None = None):
    """Draw :class:`ReducedNoise` for one update, or for ``n_steps`` stacked on a leading axis. The Bartlett factor is
    lower triangular with ``chi^2(d - n - i)`` square roots on the diagonal and N(0, 1) below it (``n = 2J + 2H``)."""
    lead = () if n_steps is None else (n_steps,)
    n, p = 2 * J + 2 * H, 2 * H
    # one normal and one uniform draw, sliced (each random call adds to the compile time)
    dofs = [(d - n) - i for i in range(p)]
    halves = [m // 2 for m in dofs]
    sizes = [batch_size * J * n, batch_size * (L - J) * n, batch_size, p * p, p]
    kn, ku = jax.random.split(key)
    flat = jax.random.normal(kn, (*lead, sum(sizes)))
    zs, zn, xi, low, odd = jnp.split(flat, np.cumsum(sizes)[:-1], axis=-1)
    zs = zs.reshape(*lead, batch_size, J, n)
    zn = zn.reshape(*lead, batch_size, L - J, n)
    # chi^2(m) = -2 sum_{i <= m // 2} log U_i (+ N^2 when m is odd): exact, and no rejection sampler to compile
    u = jax.random.uniform(ku, (*lead, sum(halves)), minval=jnp.finfo(jnp.float64).tiny, maxval=1.0)
    ends = np.cumsum([0, *halves])
    sel = np.zeros((sum(halves), p))
    for i, (a, b) in enumerate(zip(ends[:-1], ends[1:], strict=True)):
        sel[a:b, i] = 1.0
    chi2 = (-2.0 * jnp.log(u)) @ jnp.asarray(sel) + jnp.asarray([m % 2 for m in dofs], dtype=jnp.float64) * odd**2
    low = jnp.tril(low.reshape(*lead, p, p), -1)
    bart = low + jnp.sqrt(chi2)[..., :, None] * jnp.eye(p)
    return ReducedNoise(zs, zn, xi, bart)


def _frame_batch(F, zeta_signal, zeta_noise, gamma, d, J, shared):
    """Frame coordinates (B, L, n) of a batch of tokens from standard normals; ``shared``: every signal token takes
    the first signal noise."""
    s = math.sqrt(d / 2.0)
    ks, _ = teacher_index(J)
    z = jnp.where(shared, jnp.broadcast_to(zeta_signal[:, :1], zeta_signal.shape), zeta_signal)
    sig = s * F[ks] + gamma * z
    return jnp.concatenate([sig, zeta_noise], axis=1)


def _batch_terms(F, Z, xi, lam, eps, J, H):
    """Residuals and the coefficients ``c`` (B, L, 2H) with ``g_u = sum_bl c_blu X_bl`` (students in the order
    ``k_1, v_1, ...``)."""
    B = Z.shape[0]
    ks, vs = student_index(J, H)
    _, tv = teacher_index(J)
    Pk, Pv = Z @ F[ks].T, Z @ F[vs].T
    act = erf(lam * Pk)
    y = jnp.einsum("bjn,jn->b", Z[:, :J], F[tv]) + eps * xi
    r = jnp.sum(act * Pv, axis=(1, 2)) - y
    ck = (2.0 / B) * r[:, None, None] * lam * erf_prime(lam * Pk) * Pv
    cv = (2.0 / B) * r[:, None, None] * act
    c = jnp.stack([ck, cv], axis=-1).reshape(*ck.shape[:2], 2 * H)
    return r, c


def sgd_step_reduced(noise: ReducedNoise, gram, lam, step_size, gamma, eps, d, shared, J: int = 2, H: int = 2,
                     out_of_frame: bool = True):
    """One projected-SGD update as the exact Markov chain on the Gram matrix (:mod:`attnlab.marion.multihead`).

    ``shared``: the notebook's shared signal noise. ``out_of_frame=False`` drops the gradient components outside the
    frame (a deliberately wrong chain, the tests' negative control). Returns ``(gram, batch_loss)``.
    """
    n = 2 * J + 2 * H
    F = frame(gram)
    T_, S = F[: 2 * J], F[2 * J:]
    Z = _frame_batch(F, noise.zeta_signal, noise.zeta_noise, gamma, d, J, shared)
    r, c = _batch_terms(F, Z, noise.xi, lam, eps, J, H)
    g_in = jnp.einsum("blp,bln->pn", c, Z)
    c_sig = c[:, :J]
    sig_ind = jnp.einsum("bjp,bjq->pq", c_sig, c_sig)
    csum = jnp.sum(c_sig, axis=1)
    sig_sh = jnp.einsum("bp,bq->pq", csum, csum)
    Sigma = gamma**2 * jnp.where(shared, sig_sh, sig_ind) + jnp.einsum("blp,blq->pq", c[:, J:], c[:, J:])
    p = 2 * H
    jitter = 1e-14 * jnp.trace(Sigma) / p + 1e-300
    CB = jnp.linalg.cholesky(Sigma + jitter * jnp.eye(p)) @ noise.bartlett
    G_perp = CB @ CB.T if out_of_frame else jnp.zeros((p, p))
    a = 1.0 + step_size * jnp.sum(S * g_in, axis=-1)
    U = a[:, None] * S - step_size * g_in
    Q = U @ U.T + step_size**2 * G_perp
    norm = jnp.sqrt(jnp.diagonal(Q))
    st = (U @ T_.T) / norm[:, None]
    ss = Q / (norm[:, None] * norm[None, :])
    new = jnp.zeros((n, n)).at[: 2 * J, : 2 * J].set(gram[: 2 * J, : 2 * J])
    new = new.at[2 * J:, : 2 * J].set(st).at[: 2 * J, 2 * J:].set(st.T).at[2 * J:, 2 * J:].set(ss)
    return new, jnp.mean(r**2)


def sgd_step_full(key, k_star, v_star, K, V, lam, step_size, gamma, eps, batch_size: int, L: int, shared):
    """One projected-SGD update in R^d (the notebook's ``sgd_step``, gradients by autodiff of the batch loss).

    Returns ``(K, V, batch_loss, norm_deviation, unnormalised_growth)``: the new heads, the loss, ``max ||u| - 1|``
    after the update and ``max ||u~| - 1|`` of the projected step before normalisation.
    """
    X, y = sample_d2(key, k_star, v_star, batch_size, L, gamma, eps, shared)

    def loss(K, V):
        return jnp.mean((multihead_erf(X, K, V, lam) - y) ** 2)

    value, (gK, gV) = jax.value_and_grad(loss, argnums=(0, 1))(K, V)

    def update(u, g):
        u_t = u - step_size * (g - jnp.sum(u * g, -1, keepdims=True) * u)
        nt = jnp.linalg.norm(u_t, axis=-1, keepdims=True)
        return u_t / nt, jnp.max(jnp.abs(nt - 1.0))

    (K1, gk), (V1, gv) = update(K, gK), update(V, gV)
    dev = jnp.max(jnp.abs(jnp.linalg.norm(jnp.concatenate([K1, V1]), axis=-1) - 1.0))
    return K1, V1, value, dev, jnp.maximum(gk, gv)


def heldout_excess_risk(gram, test, lam, gamma, eps, d, shared, J: int = 2, H: int = 2):
    """Held-out ``mean (T - y)^2 - eps^2`` on a test set given by its standard normals ``test = (zeta_signal,
    zeta_noise, xi)`` in the frame of ``gram``: at each call it has the law of a fresh test set of that size in R^d,
    independent of the training draws (as :func:`attnlab.marion.dynamics._in_frame_test_excess_risk`)."""
    zs, zn, xi = test
    F = frame(gram)
    Z = _frame_batch(F, zs, zn, gamma, d, J, shared)
    r, _ = _batch_terms(F, Z, xi, lam, eps, J, H)
    return jnp.mean(r**2) - eps**2


def mc_excess_risk(key, gram, lam, gamma, eps, d: int, L: int, n: int, shared, J: int = 2, H: int = 2,
                   chunk: int = 1000):
    """Monte Carlo ``E[(T - y)^2] - eps^2`` in R^d at the Gram matrix ``gram`` (vectors embedded in a random frame,
    sequences drawn by :func:`sample_d2`). Returns ``(mean, standard_error)``."""
    from attnlab.slr.montecarlo import mc_mean

    ke, ks = jax.random.split(key)
    vec = embed(ke, gram, d)
    kst, vst = teacher_index(J)
    kk, vv = student_index(J, H)

    def f(k, m):
        X, y = sample_d2(k, vec[kst], vec[vst], m, L, gamma, eps, shared)
        return (multihead_erf(X, vec[kk], vec[vv], lam) - y) ** 2 - eps**2

    return mc_mean(ks, f, n, min(chunk, n))


# --- alignments, matching, classes ---------------------------------------------------------------------------------

@partial(jax.jit, static_argnames=("J", "H"))
def alignments(gram, J: int = 2, H: int = 2):
    """``(kappa, nu)``: ``|k_h . k*_j|`` and ``|v_h . v*_j|``, each (..., H, J) (the notebook's absolute alignments)."""
    kt, vt = teacher_index(J)
    ks, vs = student_index(J, H)
    return jnp.abs(gram[..., ks[:, None], kt[None, :]]), jnp.abs(gram[..., vs[:, None], vt[None, :]])


def match_swap(kappa_last, rule: str):
    """Whether each run's heads are swapped to form the matched curves "h = 1, h = 2" (two heads, two directions).

    ``kappa_last``: (..., 2, 2) the last logged ``|k_h . k*_j|``. ``rule="head1"`` (the notebook): swap unless
    ``kappa_11 > kappa_12`` (head 1 only); ``rule="best"``: the assignment with the larger ``sum_h kappa_h,pi(h)``.
    """
    k = np.asarray(kappa_last)
    if rule == "head1":
        return ~(k[..., 0, 0] > k[..., 0, 1])
    return (k[..., 0, 1] + k[..., 1, 0]) > (k[..., 0, 0] + k[..., 1, 1])


def matched(x, swap):
    """Matched curves ``(h = 1, h = 2)`` of an alignment ``x`` (..., 2, 2): ``(x_11, x_22)``, or ``(x_21, x_12)`` where
    ``swap`` (broadcast over the leading axes of ``x`` beyond ``swap``'s). Returns an array (..., 2)."""
    x = np.asarray(x)
    swap = np.asarray(swap)
    straight = np.stack([x[..., 0, 0], x[..., 1, 1]], axis=-1)
    crossed = np.stack([x[..., 1, 0], x[..., 0, 1]], axis=-1)
    return np.where(swap[..., None], crossed, straight)


def classify(kappa, threshold: float = 0.3, dominance: float = 3.0):
    """Classes of runs from their final ``|k_h . k*_j|`` (..., H, J): codes into :data:`CLASSES` and, per head, the
    assigned direction (-1: none). See :mod:`attnlab.marion.multihead` for the rule."""
    k = np.asarray(kappa, dtype=float)
    H, J = k.shape[-2:]
    best = np.argmax(k, axis=-1)
    top = np.max(k, axis=-1)
    others = np.where(np.arange(J) == best[..., None], -np.inf, k).max(axis=-1) if J > 1 else np.zeros_like(top)
    assigned = (top >= threshold) & (top >= dominance * others)
    heads = np.where(assigned, best, -1)
    all_assigned = assigned.all(axis=-1)
    srt = np.sort(heads, axis=-1)
    distinct = np.all(np.diff(srt, axis=-1) != 0, axis=-1) if H > 1 else np.ones(all_assigned.shape, bool)
    failed = (k < threshold).all(axis=(-1, -2))
    code = np.where(all_assigned & distinct, 0, np.where(all_assigned, 1, np.where(failed, 3, 2)))
    return code, heads


# --- trajectories --------------------------------------------------------------------------------------------------

class ToyParams(NamedTuple):
    """Problem and optimiser constants passed traced to compiled code (the sizes are static arguments of
    :func:`run_reduced`): the erf schedule ``lambda0 / (1 + rate min(t, cap))``, the step size, gamma and eps."""

    lambda0: float
    rate: float
    cap: float
    step_size: float
    gamma: float
    eps: float


def _block_runner(p: ToyParams, run_keys, shared, d, L, B, J, H, K, offset):
    """``one_block(grams, b)``: the K updates ``b K .. b K + K - 1`` of every arm and run; logs the Gram matrices
    after the first ``offset`` of them. The randomness of a run's K updates is one draw from
    ``fold_in(run_keys[r], b)``, shared by the arms (fewer, larger RNG calls run faster than one per update)."""

    def step(grams, inp):
        noise, t = inp
        lam = lambda_capped(t, p.lambda0, p.rate, p.cap)

        def one(nz, gram, sh):
            return sgd_step_reduced(nz, gram, lam, p.step_size, p.gamma, p.eps, d, sh, J, H)[0]

        over_runs = jax.vmap(one, in_axes=(0, 0, None))
        return jax.vmap(over_runs, in_axes=(None, 0, 0))(noise, grams, shared), None

    def one_block(grams, b):
        noise = jax.vmap(lambda k: draw_reduced_noise(jax.random.fold_in(k, b), B, L, d, J, H, K),
                         out_axes=1)(run_keys)
        ts = b * K + jnp.arange(K)
        grams, _ = jax.lax.scan(step, grams, (jax.tree.map(lambda x: x[:offset], noise), ts[:offset]))
        logged = grams
        grams, _ = jax.lax.scan(step, grams, (jax.tree.map(lambda x: x[offset:], noise), ts[offset:]))
        return grams, logged

    return one_block


@partial(programs.jit, static_argnames=("d", "L", "B", "J", "H", "K", "offset", "per_seg"))
def _segment(grams, i, run_keys, shared, p: ToyParams, d: int, L: int, B: int, J: int, H: int, K: int, offset: int,
             per_seg: int):
    one_block = _block_runner(p, run_keys, shared, d, L, B, J, H, K, offset)
    return jax.lax.scan(one_block, grams, i * per_seg + jnp.arange(per_seg))


def run_reduced(gram0, run_keys, shared, p: ToyParams, *, d: int, L: int, batch_size: int, n_steps: int,
                log_every: int, notebook_logging: bool, J: int = 2, H: int = 2, progress=None, n_segments: int = 20):
    """The reduced chain of every arm and run: ``lax.scan`` over updates, ``vmap`` over runs and arms.

    ``gram0`` (arms, runs, n, n): the initial Gram matrices; ``run_keys`` (runs,): the SGD stream of each run, shared
    by the arms (common random numbers: the arms differ only in ``shared``, the signal-noise law of each, shape
    (arms,)). ``notebook_logging``: log after the updates ``t = 0, K, 2K, ...`` (the notebook's Steps ``1, K + 1, ...``,
    the state after ``t + 1`` updates); else at steps ``0, K, ..., n_steps`` (the initial and final states included).
    ``progress(done, total)`` is called after each of up to ``n_segments`` compiled calls.
    Returns ``(steps, grams)``: the logged steps (numbers of updates made) and the Gram matrices (log, arm, run, n, n).
    """
    if n_steps % log_every:
        raise ValueError(f"log_every ({log_every}) must divide n_steps ({n_steps})")
    n_blocks = n_steps // log_every
    n_seg = _segment_count(n_blocks, n_segments)
    per_seg = n_blocks // n_seg
    offset = 1 if notebook_logging else 0
    pt = jax.tree.map(jnp.asarray, p)
    grams, logs = jnp.asarray(gram0), []
    for i in range(n_seg):
        grams, logged = _segment(grams, i, run_keys, shared, pt, d, L, batch_size, J, H, log_every, offset, per_seg)
        logs.append(logged)
        if progress is not None:
            jax.block_until_ready(logged)
            progress(i + 1, n_seg)
    logged = jnp.concatenate(logs, axis=0)
    steps = np.arange(n_blocks) * log_every + offset
    if not notebook_logging:
        logged = jnp.concatenate([logged, grams[None]], axis=0)
        steps = np.append(steps, n_steps)
    return steps, logged


@partial(programs.jit, static_argnames=("d", "L", "J", "H"))
def risks_along(grams, tests, lam, shared, gamma, eps, d: int, L: int, J: int = 2, H: int = 2):
    """Closed-form and held-out excess risks of logged Gram matrices (log, arm, run, n, n) at ``lam`` (log,), with
    each run's test set ``tests`` (leading axis: runs) and each arm's law ``shared`` (arms,). Returns two arrays
    (log, arm, run)."""

    def one(gram, test, lam, sh):
        risk = population_excess_risk(gram, lam, gamma, d, L, J, H, jnp.where(sh, 1.0, 0.0))
        return risk, heldout_excess_risk(gram, test, lam, gamma, eps, d, sh, J, H)

    runs = jax.vmap(one, in_axes=(0, 0, None, None))
    arms = jax.vmap(runs, in_axes=(0, None, None, 0))
    return jax.lax.map(lambda x: arms(x[0], tests, x[1], shared), (grams, lam))
