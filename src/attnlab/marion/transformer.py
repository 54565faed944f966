r"""A one-layer transformer with a frozen register token on single-location regression: the experiments T2 (one softmax
head) and T3 (two heads) of Marion, Berthier, Biau, Boyer, "Attention layers provably solve single-location
regression" (ICLR 2025), App. E.3: model, data, initialisation, SGD and the logged diagnostics.

**Data.** ``J`` teacher pairs ``(k*_j, v*_j)`` (:func:`sample_teachers`; ``k*_j . v*_j = 0`` within a pair, nothing
orthogonal across pairs). Tokens ``1..J`` carry the signals at fixed positions, the other ``L - J`` are noise::

    X_j = s k*_j + gamma z_j  (j <= J),   X_l ~ N(0, I_d)  (l > J),   y = sum_j X_j . v*_j + eps xi,   s = sqrt(d/2)

T2 has ``J = 1`` (law D1), T3 ``J = 2`` (law D2) with independent ``z_j`` (corrected) or one ``z`` shared by both
signal tokens (the official notebook: ``shared``). No positional information exists and the model is invariant under
permutations of the ``L`` tokens, so fixed positions lose no generality.

**Model** (App. E.3; the paper's notation, matrices named by role). A register ``r in R^d`` (frozen at its initial
value) is prepended, ``Z = [r; X] in R^{(L+1) x d}``, and every row is layer-normalised without gain or bias,
``N = LN(Z)``, ``LN(z) = (z - mean(z) 1) / (std(z) + 1e-5)`` (population std over the d coordinates). Head ``a``
(of ``H``, width ``p``) has a query matrix ``W_Q^a`` (applied to the querying row), a key matrix ``W_K^a`` (applied to
the attended rows), both ``p x d``, and a value matrix ``W_V^a in R^{d x p}``::

    A^a = softmax_rows(N W_Q^aT W_K^a N^T / sqrt(p)),   H = Z + [A^1 N W_V^1, ..., A^H N W_V^H] W_O
    f(h) = h + W_2 ReLU(W_1 h + b_1) + b_2,              y_hat = theta . f(H_0)

with ``W_O in R^{d x d}`` (T3; block ``W_O^a`` = rows ``(a-1)p+1..ap``) or ``W_O = I`` and ``p = d`` (T2: one head,
no output matrix), ``W_1 in R^{m x d}``, ``W_2 in R^{d x m}``. Only the register's row is read, so (:func:`predict`)::

    y_hat = theta . f(h_0),   h_0 = r + sum_a W_O^aT W_V^aT sum_{j=0..L} a_j^a n_j,
    a^a = softmax_j(q_a . n_j / sqrt(p)),   q_a = W_K^aT W_Q^a n_0,   n_0 = LN(r)

``q_a in R^d`` is the direction along which the register attends; rows ``1..L`` of ``A`` never reach ``y_hat``.
:func:`predict_full` computes every row as the notebook does (the tests' reference and a check).

**Naming.** The notebook names the querying-side matrix ``W_k`` and the attended-side one ``W_q`` (the reverse of the
usual convention): its ``W_k`` is ``W_Q`` here, its ``W_q`` is ``W_K``, and its ``W_k^T W_q`` is
``M = W_Q^T W_K`` (``S = N M N^T / sqrt(p)``).

**Initialisation** (the notebook's laws and key tree; entries independent). The initialisation key is split into 7:
0 -> ``W_Q ~ N(0, 2/(p+d))``, 1 -> ``W_K`` (the notebook: 0, the key unused; corrected: ``N(0, 2/(p+d))``),
2 -> ``W_V`` (``N(0, 1/d)`` without output matrix, else ``N(0, 2/(p+d))``), 3 -> ``W_1``, 4 -> ``W_2``
(``N(0, 2/(m+d))``), 5 -> ``theta ~ N(0, 1/d^2)``, 6 -> ``r ~ N(0, 1/d)``; ``b_1 = b_2 = 0``; ``W_O ~ N(0, 1/d)``
drawn with key 2, **the key of W_V** (the notebook: ``H p d = d^2``, so ``W_O`` is ``W_V`` flattened and rescaled
by ``sqrt((1/d) / (2/(p+d)))``), or with a key of its own (corrected).

**Why W_K = 0 makes M rank one** (App. E.3; a consequence of the frozen register and the register readout). Only
``n_0`` queries, and it is the same for every input, so with ``g = sum_{batch, j} (d loss / d s_j) n_j`` the
gradients are ``dW_K = (W_Q n_0) g^T / sqrt(p)`` and ``dW_Q = (W_K g) n_0^T / sqrt(p)``. From ``W_K = 0``, by
induction ``W_K(t) = u c_t^T`` with ``u = W_Q(0) n_0``, and ``W_Q(t) n_0`` stays parallel to ``u``; so
``M(t) = W_Q(t)^T u c_t^T`` has rank at most 1 at every step: the notebook's logged ratio ``s_1^2 / sum s_i^2`` of
``M`` is 1 by construction, and the top right singular vector of ``W_K`` is ``+-c_t / |c_t| = +-q / |q|``.

**Training.** Plain SGD on the batch mean squared error, a fresh batch per update, every tensor but the register
trained (T2: 51 560 scalars).

**Logged diagnostics** (:func:`diagnostics`; per head ``a`` and direction ``j``):

* ``test_excess_risk``: mean ``(y_hat - y)^2 - eps^2`` on the run's held-out set;
* ``rank1_ratio = s_1^2 / sum_i s_i^2`` and ``s2_over_s1`` of ``M_a = W_Q^aT W_K^a`` (NaN where ``M_a = 0``);
* ``kappa_notebook = |e_1 . k*_j|``, ``e_1`` the top right singular vector of ``W_K^a`` (the notebook's; at
  ``W_K = 0`` the SVD's identity basis gives ``|k*_j[0]|``, an artefact), and ``kappa_exact = cos(q_a, k*_j)``
  (signed; NaN where ``q_a = 0``): the direction the register actually attends along;
* ``nu_notebook = cos(w_a, v*_j)`` with the ReLU replaced by the identity and the biases dropped,
  ``w_a = W_V^a W_O^a (I + W_2 W_1)^T theta`` (the notebook's linearisation), and ``nu_exact = cos(w~_a, v*_j)``,
  ``w~_a = W_V^a W_O^a E[J_f(h_0)]^T theta``, ``J_f = I + W_2 diag(1[W_1 h_0 + b_1 > 0]) W_1`` averaged over the
  held-out set: ``a_j w~_a . n_j`` is the first-order contribution of token j through head a;
* ``attention_signal``: the held-out mean of the register's attention ``a_j^a`` on signal token j.

**LayerNorm floor** (:func:`layernorm_floor`). ``y_hat`` depends on the tokens only through ``n_1, ..., n_L``, and
``LN`` keeps the direction of the centred token and forgets its mean and scale (up to the ``1e-5`` of its
denominator). So ``E(y_hat - y)^2 - eps^2 >= E Var(y | n_1..n_L)``, the floor. With ``e = 1/sqrt(d)``,
``P = I - e e^T``, one signal token ``x = s k* + gamma z``: ``x . v* = (x . e)(e . v*) + R u . v*`` with
``R = |P x|``, ``u = P x / R`` and ``x . e`` independent of ``(R, u)``, so::

    floor = gamma^2 (e . v*)^2 + E_u[(u . v*)^2 Var(R | u)],  p(R | u) ~ R^{d-2} exp(-(R^2 - 2 R u . m) / (2 gamma^2))

with ``m = s P k*``: a one-dimensional quadrature in ``R`` for each Monte Carlo draw of ``u``. Independent signal
tokens add their floors; a shared ``z`` is recovered from ``n_1, n_2`` (``P x_2 - P x_1 = s P (k*_2 - k*_1)`` fixes
both radii), leaving only ``z . e``: ``floor = gamma^2 (e . (v*_1 + v*_2))^2``.

**Random numbers.** Every run has the notebook's key tree: the run key splits into (SGD stream, initialisation,
teachers, test set); the stream into one key per update; a batch key into 3 (signal noise, noise tokens, label
noise). Normals are drawn in float32, as the notebook's, and cast to the training precision (``Sizes.precision``:
float32 as the notebooks, or float64; logs and checks compute in float64); under
JAX's non-partitionable threefry (``jax.threefry_partitionable(False)``, the caller's choice) the draws are the
notebook's own.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs
from attnlab.runtime import LONG_RUNNING

__all__ = [
    "LN_EPS",
    "Params",
    "Arm",
    "Sizes",
    "layer_norm",
    "predict",
    "predict_full",
    "predict_rows",
    "batch_loss",
    "sgd_step",
    "sample_teachers",
    "sample_tokens",
    "init_params",
    "register_query",
    "diagnostics",
    "RunData",
    "train",
    "segment_program",
    "cast_floats",
    "LONG_TRAINING_UPDATES",
    "mc_excess_risk",
    "radius_variance",
    "layernorm_floor",
]

LN_EPS = 1e-5
"""The constant of the LayerNorm's denominator, ``std(z) + 1e-5``."""


class Params(NamedTuple):
    """The trained tensors (the register is frozen and kept apart). ``W_Q``, ``W_K`` (H, p, d); ``W_V`` (H, d, p);
    ``W_O`` (d, d), or None for one head without output matrix (``W_O = I``, ``p = d``); ``W1`` (m, d), ``b1`` (m,),
    ``W2`` (d, m), ``b2`` (d,), ``theta`` (d,)."""

    W_Q: jax.Array
    W_K: jax.Array
    W_V: jax.Array
    W_O: jax.Array | None
    W1: jax.Array
    b1: jax.Array
    W2: jax.Array
    b2: jax.Array
    theta: jax.Array


class Arm(NamedTuple):
    """The notebook defects that change the simulated model, as traced booleans (one model of a paired run):
    ``zero_key_init`` (W_K starts at 0), ``coupled_output_init`` (W_O drawn with W_V's key), ``shared_signal_noise``
    (one z for all signal tokens)."""

    zero_key_init: jax.Array
    coupled_output_init: jax.Array
    shared_signal_noise: jax.Array


class Sizes(NamedTuple):
    """Static sizes and constants of a run: dimension ``d``, tokens ``L`` (the register excluded), signal tokens
    ``J``, heads ``H`` of width ``p``, feed-forward width ``m``, whether an output matrix ``W_O`` exists, batch size,
    held-out size, and the precision of the SGD updates (``"float32"``, the notebooks', or ``"float64"``; see
    :func:`train`)."""

    d: int
    L: int
    J: int
    H: int
    p: int
    m: int
    output_matrix: bool
    batch_size: int
    n_test: int
    precision: str = "float64"


# --- model ------------------------------------------------------------------------------------------------------------

def layer_norm(z):
    """``(z - mean(z)) / (std(z) + 1e-5)`` over the last axis (population std; no gain, no bias)."""
    mu = jnp.mean(z, axis=-1, keepdims=True)
    sd = jnp.sqrt(jnp.mean((z - mu) ** 2, axis=-1, keepdims=True))
    return (z - mu) / (sd + LN_EPS)


def _output_blocks(params: Params):
    """``W_O^a`` (H, p, d): the rows of ``W_O`` that multiply head a's output (the identity when there is none)."""
    H, d, p = params.W_V.shape
    if params.W_O is None:
        return jnp.eye(d, dtype=params.W_V.dtype)[None]
    return params.W_O.reshape(H, p, d)


def register_query(params: Params, r):
    """``q_a = W_K^aT W_Q^a LN(r)`` (H, d): the direction along which the register attends, per head."""
    n0 = layer_norm(r)
    return jnp.einsum("hpd,hp->hd", params.W_K, params.W_Q @ n0)


def _head_outputs(params: Params, r, X):
    """Attention of the register row: weights ``a`` (..., H, L+1) and ``h_0`` (..., d)."""
    H, p, d = params.W_Q.shape
    Z = jnp.concatenate([jnp.broadcast_to(r, (*X.shape[:-2], 1, d)), X], axis=-2)
    N = layer_norm(Z)
    q = register_query(params, r)
    a = jax.nn.softmax(jnp.einsum("...jd,hd->...hj", N, q) / math.sqrt(p), axis=-1)
    pooled = jnp.einsum("...hj,...jd->...hd", a, N)
    values = jnp.einsum("hdp,...hd->...hp", params.W_V, pooled)  # W_V^aT sum_j a_j n_j
    if params.W_O is None:  # one head, W_O = I: h_0 = r + W_V^T pooled
        return a, r + values[..., 0, :]
    return a, r + jnp.einsum("...hp,hpd->...d", values, _output_blocks(params))


def _feed_forward(params: Params, h):
    return h + jax.nn.relu(h @ params.W1.T + params.b1) @ params.W2.T + params.b2


def predict(params: Params, r, X):
    """``y_hat = theta . f(h_0)`` for X (..., L, d), the register ``r`` (d,): the register row only."""
    _, h0 = _head_outputs(params, r, X)
    return _feed_forward(params, h0) @ params.theta


def predict_full(params: Params, r, X, row: int = 0):
    """The notebook's forward pass with every row: ``S^a = N W_Q^aT W_K^a N^T / sqrt(p)``, ``H = Z + [A^a N W_V^a]_a
    W_O``, ``F = f(H)`` row by row, read out at ``row`` (0: the register, as the model does)."""
    d = params.W_Q.shape[-1]
    return predict_rows(params, jnp.concatenate([jnp.broadcast_to(r, (*X.shape[:-2], 1, d)), X], axis=-2), row)


def predict_rows(params: Params, Z, row: int = 0):
    """:func:`predict_full` on the rows ``Z`` (..., L+1, d) as given (the register among them), read out at
    ``row``."""
    H, p, d = params.W_Q.shape
    N = layer_norm(Z)
    S = jnp.einsum("...id,hpd,hpe,...je->...hij", N, params.W_Q, params.W_K, N) / math.sqrt(p)
    A = jax.nn.softmax(S, axis=-1)
    O = jnp.einsum("...hij,...jd,hdp->...ihp", A, N, params.W_V).reshape(*N.shape[:-1], H * p)
    Hm = Z + (O if params.W_O is None else O @ params.W_O)
    return _feed_forward(params, Hm[..., row, :]) @ params.theta


def batch_loss(params: Params, r, X, y):
    """The batch mean squared error ``(1/B) sum_b (y_hat_b - y_b)^2``."""
    return jnp.mean((predict(params, r, X) - y) ** 2)


@jax.jit
def sgd_step(params: Params, r, X, y, step_size):
    """One plain SGD update of every trained tensor (the register frozen). Returns ``(params, batch_loss)``."""
    loss, grad = jax.value_and_grad(batch_loss)(params, r, X, y)
    return jax.tree.map(lambda w, g: w - step_size * g, params, grad), loss


# --- random draws -----------------------------------------------------------------------------------------------------

def _normal(key, shape, dtype=jnp.float64):
    """Standard normals drawn in float32 (the notebook's draws; a quarter of the cost of float64 ones), as
    ``dtype``."""
    return jax.random.normal(key, shape, jnp.float32).astype(dtype)


def sample_teachers(key, d: int, J: int):
    """``(k_star, v_star)``, each (J, d): k*_j a normalised Gaussian, v*_j an independent Gaussian orthogonalised
    against it and normalised, from the j-th of J keys split from ``key`` (split again: k*, then v*); ``J = 1`` uses
    ``key`` itself, as the notebook's one-direction runs do."""

    def one(k):
        kk, kv = jax.random.split(k)
        ks = _normal(kk, (d,))
        ks = ks / jnp.linalg.norm(ks)
        vs = _normal(kv, (d,))
        vs = vs - (vs @ ks) * ks
        return ks, vs / jnp.linalg.norm(vs)

    keys = key[None] if J == 1 else jax.random.split(key, J)
    return jax.vmap(one)(keys)


def sample_tokens(key, k_star, v_star, n: int, L: int, gamma, eps, shared):
    """``n`` sequences: ``X_j = sqrt(d/2) k*_j + gamma z_j`` for the J signal tokens (first), the others N(0, I),
    ``y = sum_j X_j . v*_j + eps xi``. The key splits into (signal noise, noise tokens, label noise); ``z_1`` is
    drawn from the first, ``z_j`` (j > 1) from ``fold_in(first, j - 1)``, or ``z_j = z_1`` where ``shared``. Returns
    ``(X, y)``, shapes (n, L, d) and (n,), in the teachers' dtype."""
    J, d = k_star.shape
    dtype = k_star.dtype
    kz, kn, kxi = jax.random.split(key, 3)
    z1 = _normal(kz, (n, d), dtype)
    zs = [z1] + [jnp.where(shared, z1, _normal(jax.random.fold_in(kz, j), (n, d), dtype))
                 for j in range(1, J)]
    signal = math.sqrt(d / 2.0) * k_star + gamma * jnp.stack(zs, axis=1)
    X = jnp.concatenate([signal, _normal(kn, (n, L - J, d), dtype)], axis=1)
    y = jnp.einsum("njd,jd->n", signal, v_star) + eps * _normal(kxi, (n,), dtype)
    return X, y


def init_params(key, sz: Sizes, arm: Arm):
    """The initial ``(params, r)`` (laws and key tree in :mod:`attnlab.marion.transformer`)."""
    d, H, p, m = sz.d, sz.H, sz.p, sz.m
    sub = jax.random.split(key, 7)
    xavier = math.sqrt(2.0 / (p + d))
    W_Q = xavier * _normal(sub[0], (H, p, d))
    W_K = jnp.where(arm.zero_key_init, 0.0, xavier * _normal(sub[1], (H, p, d)))
    zv = _normal(sub[2], (H, d, p))
    if sz.output_matrix:
        W_V = xavier * zv
        coupled = zv.reshape(d, d)  # the same standard normals: H p d = d^2
        own = _normal(jax.random.fold_in(sub[2], 1), (d, d))
        W_O = math.sqrt(1.0 / d) * jnp.where(arm.coupled_output_init, coupled, own)
    else:
        W_V, W_O = math.sqrt(1.0 / d) * zv, None
    ffn = math.sqrt(2.0 / (m + d))
    params = Params(W_Q, W_K, W_V, W_O, ffn * _normal(sub[3], (m, d)), jnp.zeros(m),
                    ffn * _normal(sub[4], (d, m)), jnp.zeros(d), _normal(sub[5], (d,)) / d)
    r = math.sqrt(1.0 / d) * _normal(sub[6], (d,))
    return params, r


# --- diagnostics ------------------------------------------------------------------------------------------------------

def _cos(a, b):
    return (a @ b) / (jnp.linalg.norm(a) * jnp.linalg.norm(b))


def diagnostics(params: Params, r, k_star, v_star, X, y, eps):
    """The logged quantities of one state on the held-out set ``(X, y)`` (see :mod:`attnlab.marion.transformer`):
    a dict of ``test_excess_risk`` and its standard error ``test_excess_risk_se`` (), ``rank1_ratio`` and
    ``s2_over_s1`` (H,), ``kappa_notebook``, ``kappa_exact``, ``nu_notebook``, ``nu_exact`` and
    ``attention_signal`` (H, J)."""
    J = k_star.shape[0]
    a, h0 = _head_outputs(params, r, X)
    y_hat = _feed_forward(params, h0) @ params.theta
    M = jnp.einsum("hpd,hpe->hde", params.W_Q, params.W_K)
    s = jnp.linalg.svd(M, compute_uv=False)
    _, _, vt = jnp.linalg.svd(params.W_K, full_matrices=False)
    e1 = vt[:, 0, :]  # (H, d) top right singular vector of W_K^a
    q = register_query(params, r)
    blocks = _output_blocks(params)  # (H, p, d)
    value_out = jnp.einsum("hdp,hpe->hde", params.W_V, blocks)  # W_V^a W_O^a (H, d, d)
    lin = params.theta + params.W1.T @ (params.W2.T @ params.theta)
    gate = jnp.mean((h0 @ params.W1.T + params.b1) > 0, axis=0)
    jac = params.theta + params.W1.T @ (gate * (params.W2.T @ params.theta))
    w_lin = value_out @ lin
    w_exact = value_out @ jac
    cos = jax.vmap(jax.vmap(_cos, in_axes=(None, 0)), in_axes=(0, None))  # (H, d) x (J, d) -> (H, J)
    sq = (y_hat - y) ** 2
    return {
        "test_excess_risk": jnp.mean(sq) - eps**2,
        "test_excess_risk_se": jnp.std(sq, ddof=1) / math.sqrt(sq.shape[0]),
        "rank1_ratio": s[:, 0] ** 2 / jnp.sum(s**2, axis=-1),
        "s2_over_s1": s[:, 1] / s[:, 0],
        "kappa_notebook": jnp.abs(e1 @ k_star.T),
        "kappa_exact": cos(q, k_star),
        "nu_notebook": cos(w_lin, v_star),
        "nu_exact": cos(w_exact, v_star),
        "attention_signal": jnp.mean(a[..., 1:J + 1], axis=0),
    }


# --- training ---------------------------------------------------------------------------------------------------------

class RunData(NamedTuple):
    """The fixed data of one run: the frozen register ``r`` (d,), the teachers ``k_star``, ``v_star`` (J, d) and the
    key of its held-out set (redrawn identically at every log)."""

    r: jax.Array
    k_star: jax.Array
    v_star: jax.Array
    test_key: jax.Array


def _test_set(run: RunData, arm: Arm, sz: Sizes, gamma, eps):
    return sample_tokens(run.test_key, run.k_star, run.v_star, sz.n_test, sz.L, gamma, eps,
                         arm.shared_signal_noise)


def cast_floats(tree, dtype):
    """Every floating array of ``tree`` as ``dtype`` (keys and booleans as they are)."""
    return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a, tree)


def _log(params, run: RunData, arm: Arm, sz: Sizes, gamma, eps):
    """The diagnostics of ``params`` (in any precision) computed in float64 on the run's float64 held-out set."""
    X, y = _test_set(run, arm, sz, gamma, eps)
    return diagnostics(cast_floats(params, jnp.float64), run.r, run.k_star, run.v_star, X, y, eps)


def _step(params, key, run: RunData, arm: Arm, sz: Sizes, gamma, eps, step_size):
    X, y = sample_tokens(key, run.k_star, run.v_star, sz.batch_size, sz.L, gamma, eps, arm.shared_signal_noise)
    return sgd_step(params, run.r, X, y, step_size)[0]


def _segment(params, step_keys, runs: RunData, arms: Arm, consts, sz: Sizes, K: int, offset: int, per_seg: int):
    """``per_seg`` blocks of ``K`` updates of every arm and run (``lax.scan``); logs after the first ``offset``
    updates of each block. ``step_keys`` (runs, per_seg, K): the keys of those updates.

    The runs go one after the other (``lax.map``) and the arms of a run together (``vmap``, on the run's draws,
    made once): vectorising the runs as well batches every small matrix product of the update over 2 x 20 weight
    sets, which XLA's CPU backend computes more slowly than the runs in sequence."""
    gamma, eps, step_size = consts
    low = cast_floats((gamma, eps, step_size), jnp.dtype(sz.precision))  # the updates' constants

    params = cast_floats(params, jnp.dtype(sz.precision))  # a no-op after the first segment

    def one(xs):
        params, keys, run = xs  # params: leading axis arm
        run_low = cast_floats(run, jnp.dtype(sz.precision))

        def step(p, k):
            return jax.vmap(lambda pa, arm: _step(pa, k, run_low, arm, sz, *low))(p, arms), None

        def block(p, ks):
            p, _ = jax.lax.scan(step, p, ks[:offset])
            logged = jax.vmap(lambda pa, arm: _log(pa, run, arm, sz, gamma, eps))(p, arms)
            p, _ = jax.lax.scan(step, p, ks[offset:])
            return p, logged

        return jax.lax.scan(block, params, keys)

    by_run = jax.tree.map(lambda a: jnp.moveaxis(a, 1, 0), params)  # (run, arm, ...)
    params, logged = jax.lax.map(one, (by_run, step_keys, runs))  # logged: (run, block, arm, ...)
    return (jax.tree.map(lambda a: jnp.moveaxis(a, 0, 1), params),
            jax.tree.map(lambda a: jnp.moveaxis(a, 2, 0), logged))  # (arm, run, ...), (arm, run, block, ...)


_SEGMENT_STATIC = ("sz", "K", "offset", "per_seg")
_segment_short = programs.jit(_segment, static_argnames=_SEGMENT_STATIC)
_segment_long = programs.jit(_segment, static_argnames=_SEGMENT_STATIC, compiler_options=LONG_RUNNING)

LONG_TRAINING_UPDATES = 10_000
"""A training of at least this many updates summed over its runs (runs x ``n_steps``) is compiled with XLA's CPU
fusion emitters (:data:`attnlab.runtime.LONG_RUNNING`), which run an update faster but take longer to compile; a
shorter one (the presets' quick sizes, the tests) with the loop emitters of attnlab's flags, whose compilation saves
more than the fusion emitters would save it in updates."""


def segment_program(n_runs: int, n_steps: int):
    """The compiled training segment for ``n_runs`` runs of ``n_steps`` updates: with the fusion emitters from
    :data:`LONG_TRAINING_UPDATES` updates in all on, else with attnlab's loop emitters (the same program traced)."""
    return _segment_long if n_runs * n_steps >= LONG_TRAINING_UPDATES else _segment_short


@partial(programs.jit, static_argnames=("sz",))
def _log_all(params, runs: RunData, arms: Arm, consts, sz: Sizes):
    gamma, eps, _ = consts
    one = jax.vmap(lambda p, run, arm: _log(p, run, arm, sz, gamma, eps), in_axes=(0, 0, None))
    return jax.vmap(one, in_axes=(0, None, 0))(params, runs, arms)


def _segment_count(n_logs: int, requested: int) -> int:
    n = max(1, min(requested, n_logs))
    while n_logs % n:
        n -= 1
    return n


def train(params0, runs: RunData, step_keys, arms: Arm, sz: Sizes, *, gamma, eps, step_size, n_steps: int,
          log_every: int, notebook_logging: bool, progress=None, n_segments: int = 20):
    """SGD of every arm and run: ``lax.scan`` over updates, ``lax.map`` over runs and ``vmap`` over arms (common
    random numbers: the arms share each run's keys and draws).

    ``params0``: initial :class:`Params` with leading axes (arm, run), best given in ``sz.precision`` (else the
    first segment compiles apart); ``runs``: the runs' registers, teachers and test keys (leading axis run);
    ``step_keys`` (run, n_steps): the key of each update; ``arms``: :class:`Arm` arrays (arm,).

    **Precision.** The updates (batches, forward and backward passes, parameters) compute in ``sz.precision``:
    float32 as the notebooks trained (half the time of float64 on a CPU: the update is bound by its matrix
    products), or float64. The logs are computed in float64 from the parameters (exactly widened) on float64
    held-out sets, so only the trajectory carries the training precision's round-off.

    ``notebook_logging``: log after the updates ``t = 0, K, 2K, ...`` (the notebook's Steps ``1, K + 1, ...``, the
    state after ``t + 1`` updates); else at ``0, K, ..., n_steps`` (initial and final states included).
    ``progress(done, total)`` is called after each of up to ``n_segments`` compiled calls.
    Returns ``(steps, logs, params)``: the logged numbers of updates, the :func:`diagnostics` with leading axes
    (log, arm, run) as NumPy arrays and the final parameters (in ``sz.precision``).
    """
    if n_steps % log_every:
        raise ValueError(f"log_every ({log_every}) must divide n_steps ({n_steps})")
    n_blocks = n_steps // log_every
    n_seg = _segment_count(n_blocks, n_segments)
    per_seg = n_blocks // n_seg
    offset = 1 if notebook_logging else 0
    consts = (jnp.asarray(gamma), jnp.asarray(eps), jnp.asarray(step_size))
    keys = step_keys.reshape(step_keys.shape[0], n_seg, per_seg, log_every, *step_keys.shape[2:])
    segment = segment_program(step_keys.shape[0], n_steps)
    params, logs = params0, []
    for i in range(n_seg):
        params, logged = segment(params, keys[:, i], runs, arms, consts, sz, log_every, offset, per_seg)
        # (arm, run, block) -> (block, ...), on the host: the logs are small, and array operations outside a compiled
        # program would each be a program of its own (traced, lowered and compiled or loaded in every process)
        logs.append(jax.tree.map(lambda x: np.moveaxis(np.asarray(x), 2, 0), logged))
        if progress is not None:
            jax.block_until_ready(logged)
            progress(i + 1, n_seg)
    steps = np.arange(n_blocks) * log_every + offset
    if not notebook_logging:  # each block logged before its first update; add the final state
        logs.append(jax.tree.map(lambda x: np.asarray(x)[None], _log_all(params, runs, arms, consts, sz)))
        steps = np.append(steps, n_steps)
    logs = jax.tree.map(lambda *x: np.concatenate(x, axis=0), *logs)
    return steps, logs, params


# --- Monte Carlo and the LayerNorm floor ------------------------------------------------------------------------------

def mc_excess_risk(key, params: Params, r, k_star, v_star, n: int, L: int, gamma, eps, shared, chunk: int = 2000):
    """Monte Carlo ``E(y_hat - y)^2 - eps^2`` with ``n`` fresh sequences. Returns
    ``(mean, standard_error)``."""
    from attnlab.slr.montecarlo import mc_mean

    def f(k, size):
        X, y = sample_tokens(k, k_star, v_star, size, L, gamma, eps, shared)
        return (predict(params, r, X) - y) ** 2 - eps**2

    return mc_mean(key, f, n, min(chunk, n))


_R_NODES = 241


def radius_variance(t, d: int, gamma):
    """``Var(R | u)`` for ``R`` of density ``~ R^{d-2} exp(-(R^2 - 2 R t) / (2 gamma^2))`` on ``R > 0``
    (``t = u . m``): trapezoidal quadrature on ``+-14`` Laplace widths around the mode (the integrand is smooth and
    Gaussian-like, so the rule converges geometrically)."""
    g2 = gamma**2
    mode = 0.5 * (t + jnp.sqrt(t * t + 4.0 * (d - 2) * g2))
    width = 1.0 / jnp.sqrt((d - 2) / mode**2 + 1.0 / g2)
    R = jnp.maximum(mode + width * jnp.linspace(-14.0, 14.0, _R_NODES), 1e-300)
    logf = (d - 2) * jnp.log(R) - (R * R - 2.0 * R * t) / (2.0 * g2)
    w = jnp.exp(logf - jnp.max(logf)) * (R > 1e-299)
    m1 = jnp.sum(w * R) / jnp.sum(w)
    return jnp.sum(w * (R - m1) ** 2) / jnp.sum(w)


def layernorm_floor(key, k_star, v_star, gamma, shared, n: int = 20_000):
    """``E Var(y | n_1, ..., n_L)``: the least excess risk of any predictor of the layer-normalised tokens (the
    ``1e-5`` of LN's denominator neglected; see :mod:`attnlab.marion.transformer`). ``k_star``, ``v_star`` (J, d);
    ``shared``: one z for all signal tokens (then a closed form, no draws). Returns ``(floor, standard_error)``."""
    J, d = k_star.shape
    e = jnp.full(d, 1.0 / math.sqrt(d))
    s = math.sqrt(d / 2.0)

    def one_token(k, ks, vs):
        z = jax.random.normal(k, (n, d))
        x = s * ks + gamma * z
        px = x - (x @ e)[:, None] * e
        u = px / jnp.linalg.norm(px, axis=-1, keepdims=True)
        m = s * (ks - (ks @ e) * e)
        vals = (u @ vs) ** 2 * jax.vmap(lambda t: radius_variance(t, d, gamma))(u @ m)
        return gamma**2 * (e @ vs) ** 2 + jnp.mean(vals), jnp.var(vals, ddof=1) / n

    means, variances = jax.vmap(one_token)(jax.random.split(key, J), k_star, v_star)
    shared_floor = gamma**2 * (e @ jnp.sum(v_star, axis=0)) ** 2
    return (jnp.where(shared, shared_floor, jnp.sum(means)),
            jnp.where(shared, 0.0, jnp.sqrt(jnp.sum(variances))))
