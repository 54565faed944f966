r"""The infinite-head kernel (NNGP) of softmax attention at 1/sqrt(n) scaling, and the dense-layer kernels it composes
with, so that the kernel of a deep stack ``[attention, relu, attention, ...]`` is a composition of functions.

Sakai, Karakida, Imaizumi (2025), arXiv:2506.00846, Example 3.1 (the layer); the joint law over many inputs that this
kernel is the H -> infinity limit of is derived in :mod:`attnlab.sakai.joint`.

**The attention map.** Let ``K`` be the token-token kernel of m sequences of s tokens (``M = m s``; block
``K^{ab}`` (s x s) holds ``lim x^a_i . x^b_j / n``). As n -> infinity and then H -> infinity, the layer's outputs are a
centred Gaussian process over the M tokens with kernel

.. math::

    K'^{ab} = \mathbb E\big[\,\mathrm{softmax}(p^a)\,K^{ab}\,\mathrm{softmax}(p^b)^\top\big],\qquad
    \mathrm{Cov}(p^a_{ij}, p^b_{kl}) = K^{ab}_{ik}K^{ab}_{jl},

softmax over each row (the keys), ``(p^a, p^b)`` the two sequences' limit score matrices (one head). The
expectation has no closed form (neural-tangents implements softmax only at 1/n scaling, where it is an average,
see below); it is an integral over ``s^2`` Gaussian scores (a = b) or ``2 s^2`` (a != b). Here it is computed by
**randomised quasi-Monte Carlo**: with ``K_pair`` the 2s x 2s Gram of the two sequences' tokens and
``L L^T = K_pair`` (eigen-factor, columns by decreasing eigenvalue ``lambda``), ``P = L N L^T`` with N (2s x 2s) iid
N(0, 1) has the diagonal blocks ``P^{aa} = p^a``, ``P^{bb} = p^b`` with exactly the covariance above (the
representation of :mod:`attnlab.sakai.limit`, ``p = L N L^T``). N is ``Phi^{-1}`` of a scrambled Sobol point in
``[0, 1)^{4 s^2}`` (s^2 for a = b), its coordinates assigned to the entries ``N_{kl}`` in decreasing order of
``lambda_k lambda_l`` (the variance each entry carries), so the first Sobol coordinates drive the largest
components. ``R`` independent scramblings (``scipy.stats.qmc.Sobol``, linear matrix scrambling and digital shift)
give R independent unbiased estimates; the kernel is their mean and its **standard error** their standard deviation
over ``sqrt(R)``. The pairs (a <= b, ``K'^{ba} = K'^{abT}``) are batched (``jax.vmap`` inside ``lax.map``), float64.

**1/n scaling** (``scaling="linear"``, the negative control): the scores vanish, softmax is uniform and
``K'^{ab} = (1/s^2) 1 1^T K^{ab} 1 1^T`` (every entry the mean of the block): attention is average pooling.

**Dense layers** (closed forms; every map acts on the whole M x M kernel): ``dense``: ``K -> w K + b`` (weights of
variance w/n, bias variance b); ``relu`` (a dense layer then ReLU): the arc-cosine kernel of order 1 (Cho and Saul,
NeurIPS 2009), ``K'_{xy} = sqrt(K_xx K_yy) (sin t + (pi - t) cos t)/(2 pi)``, ``cos t = K_xy/sqrt(K_xx K_yy)``;
``erf``: Williams (NeurIPS 1997), ``K'_{xy} = (2/pi) arcsin(2 K_xy/sqrt((1 + 2 K_xx)(1 + 2 K_yy)))``.

**Error propagation.** A :class:`Kernel` holds R replicates. Each map acts on every replicate: a closed form
replicate by replicate, the attention map with the r-th scrambled point set on the r-th replicate. The R replicates
of a composition are therefore independent draws of a (nearly) unbiased estimator of the composed kernel, and their
spread is its standard error, which carries the QMC error of every attention layer of the stack (the bias from
composing estimates is of the order of the squared standard error).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import _validate as check
from attnlab import programs
from attnlab.sakai.model import check_layers

__all__ = ["Kernel", "token_kernel", "as_kernel", "attention_kernel", "attention_blocks", "dense_kernel", "relu_kernel",
           "erf_kernel", "layer_kernel", "stack_kernel", "pooled_kernel", "sobol_normals", "closed_form"]


class Kernel(NamedTuple):
    """A kernel of M = m s tokens with its randomised-QMC replicates: ``replicates`` (R, M, M); ``n_tokens`` = s.

    An exact kernel (no QMC) has R = 1 and a zero standard error."""

    replicates: np.ndarray
    n_tokens: int

    @property
    def n_replicates(self) -> int:
        return int(self.replicates.shape[0])

    @property
    def mean(self) -> np.ndarray:
        """The estimate: the mean of the replicates (M, M)."""
        return np.mean(np.asarray(self.replicates), 0)

    @property
    def se(self) -> np.ndarray:
        """Its standard error (M, M): the replicates' standard deviation over sqrt(R) (zero for R = 1)."""
        r = np.asarray(self.replicates)
        if r.shape[0] < 2:
            return np.zeros(r.shape[1:])
        return np.std(r, 0, ddof=1) / math.sqrt(r.shape[0])

    def block(self, a: int, b: int) -> np.ndarray:
        """The s x s block of sequences a and b (mean over replicates)."""
        s = self.n_tokens
        return self.mean[a * s:(a + 1) * s, b * s:(b + 1) * s]


def token_kernel(U) -> np.ndarray:
    """The kernel of the embedded tokens ``K = U U^T/d_in`` (M x M), ``U`` (m, s, d_in) finite with m, s, d_in >= 1:
    the limit Gram of ``X_0 = U W_E/sqrt(d_in)`` with W_E (d_in x n) iid N(0, 1)."""
    m, s, d_in = check.shape("U", U, (None, None, None))
    if min(m, s, d_in) < 1:
        raise ValueError(f"U must hold at least one sequence of one token of dimension >= 1; got shape {(m, s, d_in)}")
    U = np.asarray(check.real("U", U, sequence=True), np.float64)
    flat = U.reshape(-1, U.shape[-1])
    return flat @ flat.T / U.shape[-1]


def as_kernel(K, n_tokens: int | None = None) -> Kernel:
    """``K`` as a :class:`Kernel`: a Kernel is returned as it is (replicates (R, M, M), M a multiple of its
    n_tokens), an (M, M) array becomes one exact replicate. Domain of an array: finite, symmetric, positive
    semidefinite (a covariance of Gaussian pre-activations), M a multiple of ``n_tokens`` (an integer >= 1)."""
    if isinstance(K, Kernel):
        s = check.count("K.n_tokens", K.n_tokens)
        shape = np.shape(K.replicates)
        if len(shape) != 3 or shape[1] != shape[2] or shape[0] < 1 or shape[1] % s:
            raise ValueError(f"K.replicates must have shape (R, M, M) with M a multiple of n_tokens = {s}; got {shape}")
        return K
    if n_tokens is None:
        raise ValueError("n_tokens (the sequence length s) is needed for a kernel given as an array")
    n_tokens = check.count("n_tokens", n_tokens)
    K = np.asarray(K, np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] < 1 or K.shape[0] % n_tokens:
        raise ValueError(f"the kernel must be M x M with M a multiple of n_tokens = {n_tokens}; got {K.shape}")
    check.psd("the kernel K", K)
    return Kernel(K[None], n_tokens)


def _map(K: Kernel, fn, *params) -> Kernel:
    """``fn(k, *params)`` on each replicate k, compiled as one program per module-level ``fn`` and ``params``
    (eager, each of its operations would be a program)."""
    return Kernel(np.asarray(_vmapped(fn, len(params))(np.asarray(K.replicates), *params)), K.n_tokens)


@functools.cache
def _vmapped(fn, n_params: int):
    return jax.jit(lambda R, *params: jax.vmap(lambda k: fn(k, *params))(R),
                   static_argnums=tuple(range(1, 1 + n_params)))


def _affine(k, weight_variance, bias_variance):
    return weight_variance * k + bias_variance


def _block_mean(k, s: int):
    """Each s x s block of k replaced by its mean (1/n scaling: average pooling within each sequence)."""
    m = k.shape[0] // s
    B = k.reshape(m, s, m, s).mean((1, 3))
    return jnp.repeat(jnp.repeat(B, s, 0), s, 1)


def dense_kernel(K, weight_variance: float = 1.0, bias_variance: float = 0.0, *, n_tokens: int | None = None) -> Kernel:
    """A dense layer (weights of variance ``weight_variance/n``, bias variance ``bias_variance``, both >= 0):
    ``w K + b``."""
    check.nonnegative("weight_variance", weight_variance, scalar=True)
    check.nonnegative("bias_variance", bias_variance, scalar=True)
    return _map(as_kernel(K, n_tokens), _affine, float(weight_variance), float(bias_variance))


def _relu(k):
    d = jnp.sqrt(jnp.maximum(jnp.diagonal(k), 0.0))
    norm = d[:, None] * d[None, :]
    c = jnp.clip(jnp.where(norm > 0, k / jnp.where(norm > 0, norm, 1.0), 0.0), -1.0, 1.0)
    t = jnp.arccos(c)
    return norm * (jnp.sqrt(1.0 - c**2) + (math.pi - t) * c) / (2 * math.pi)


def _erf(k):
    d = 1.0 + 2.0 * jnp.diagonal(k)
    return (2 / math.pi) * jnp.arcsin(jnp.clip(2 * k / jnp.sqrt(d[:, None] * d[None, :]), -1.0, 1.0))


def closed_form(layer: str):
    """The closed-form map ``k -> k'`` of one M x M kernel for a ``dense`` (unit weight variance, no bias), ``relu``
    or ``erf`` layer (JAX, vmappable)."""
    return {"dense": lambda k: k, "relu": _relu, "erf": _erf}[layer]


def relu_kernel(K, *, n_tokens: int | None = None) -> Kernel:
    """ReLU of centred Gaussian pre-activations with kernel K: the arc-cosine kernel of order 1 (closed form)."""
    return _map(as_kernel(K, n_tokens), _relu)


def erf_kernel(K, *, n_tokens: int | None = None) -> Kernel:
    """erf of centred Gaussian pre-activations with kernel K: ``(2/pi) arcsin(2 K_xy/sqrt((1+2K_xx)(1+2K_yy)))``."""
    return _map(as_kernel(K, n_tokens), _erf)


def sobol_normals(key, dim: int, n_points: int, n_replicates: int) -> np.ndarray:
    """``Phi^{-1}`` of ``n_replicates`` independently scrambled Sobol point sets (R, n_points, dim), float64.

    Each replicate is ``scipy.stats.qmc.Sobol(dim, scramble=True)`` seeded from ``key`` (a SeedSequence of the key's
    words, one child per replicate): the same key gives the same points. ``n_points`` must be a power of 2 (the
    Sobol net's balance)."""
    from scipy.special import ndtri
    from scipy.stats import qmc

    if n_points < 2 or n_points & (n_points - 1):
        raise ValueError(f"n_points must be a power of 2 (>= 2); got {n_points}")
    if n_replicates < 1:
        raise ValueError(f"n_replicates must be >= 1; got {n_replicates}")
    words = np.asarray(jax.random.key_data(key)).ravel().astype(np.uint64).tolist()
    children = np.random.SeedSequence(words).spawn(n_replicates)
    out = np.empty((n_replicates, n_points, dim))
    tiny = 2.0**-60
    for r, child in enumerate(children):
        u = qmc.Sobol(dim, scramble=True, seed=np.random.default_rng(child)).random_base2(int(math.log2(n_points)))
        out[r] = ndtri(np.clip(u, tiny, 1 - tiny))
    return out


def _order(lam):
    """Rank of each entry N_kl (row-major) in decreasing order of lambda_k lambda_l: entry (k, l) takes Sobol
    coordinate rank[k s + l]."""
    prod = (lam[:, None] * lam[None, :]).ravel()
    return jnp.argsort(jnp.argsort(-prod, stable=True), stable=True)


def _factor(K):
    """Eigen-factor ``L = V sqrt(max(lambda, 0))`` of a PSD matrix, columns by decreasing eigenvalue, and lambda."""
    lam, V = jnp.linalg.eigh(K)
    lam, V = lam[::-1], V[:, ::-1]
    lam = jnp.maximum(lam, 0.0)
    return V * jnp.sqrt(lam), lam


def _diag_block(z, Kaa):
    """``E softmax(p) K softmax(p)^T`` for one sequence, p = L N L^T, from the normals z (n_points, s^2)."""
    s = Kaa.shape[0]
    L, lam = _factor(Kaa)
    N = z[:, _order(lam)].reshape(-1, s, s)
    S = jax.nn.softmax(L @ N @ L.T, axis=-1)
    return jnp.mean(S @ Kaa @ jnp.swapaxes(S, -1, -2), 0)


def _pair_block(z, Kpair):
    """``E softmax(p^a) K^{ab} softmax(p^b)^T`` from the normals z (n_points, 4 s^2); Kpair the 2s x 2s Gram."""
    s = Kpair.shape[0] // 2
    L, lam = _factor(Kpair)
    N = z[:, _order(lam)].reshape(-1, 2 * s, 2 * s)
    La, Lb = L[:s], L[s:]
    Sa = jax.nn.softmax(La @ N @ La.T, axis=-1)
    Sb = jax.nn.softmax(Lb @ N @ Lb.T, axis=-1)
    return jnp.mean(Sa @ Kpair[:s, s:] @ jnp.swapaxes(Sb, -1, -2), 0)


@functools.partial(programs.jit, static_argnames=("s", "chunk"))
def _attention_replicate(K, z_diag, z_pair, idiag, ia, ib, s: int, chunk: int):
    """The blocks of the sequences ``idiag`` with themselves (D, s, s) and of the pairs ``(ia[p], ib[p])``, a != b
    (P, s, s), of one replicate."""
    m = K.shape[0] // s
    blocks = K.reshape(m, s, m, s).transpose(0, 2, 1, 3)  # (m, m, s, s)
    diag = (jax.lax.map(lambda a: _diag_block(z_diag, blocks[a, a]), idiag, batch_size=chunk) if idiag.shape[0]
            else jnp.zeros((0, s, s)))
    if ia.shape[0] == 0:
        return diag, jnp.zeros((0, s, s))

    def pair(ab):
        a, b = ab
        Kpair = jnp.block([[blocks[a, a], blocks[a, b]], [blocks[b, a], blocks[b, b]]])
        return _pair_block(z_pair, Kpair)

    return diag, jax.lax.map(pair, (ia, ib), batch_size=chunk)


def attention_blocks(K, ia, ib, *, key, n_tokens: int | None = None, n_points: int = 1024, n_replicates: int = 8,
                     chunk: int = 16) -> np.ndarray:
    """The s x s blocks ``K'^{ab}`` of the attention kernel for the pairs of sequences ``(ia[p], ib[p])`` only:
    (R, P, s, s), the R randomised-QMC replicates (see :func:`attention_kernel`; a Kernel with R > 1 replicates is
    mapped replicate by replicate). For a rectangular block of the kernel (e.g. test against training sequences)."""
    K = as_kernel(K, n_tokens)
    check.count("n_replicates", n_replicates)
    n_points = check.count("n_points", n_points, minimum=2)
    if n_points & (n_points - 1):
        raise ValueError(f"n_points must be a power of 2 (the Sobol net's balance); got {n_points}")
    check.count("chunk", chunk)
    s = K.n_tokens
    M = K.replicates.shape[-1]
    R = K.n_replicates if K.n_replicates > 1 else int(n_replicates)
    reps = np.broadcast_to(np.asarray(K.replicates), (R, M, M))
    for name, idx in (("ia", ia), ("ib", ib)):
        if not all(check.is_integer(i) for i in np.ravel(np.asarray(idx, dtype=object))):
            raise ValueError(f"{name} must hold sequence indices (integers); got {idx!r}")
    ia, ib = np.asarray(ia, int).ravel(), np.asarray(ib, int).ravel()
    if ia.shape != ib.shape or (ia.size and (min(ia.min(), ib.min()) < 0 or max(ia.max(), ib.max()) >= M // s)):
        raise ValueError(f"ia and ib must be equal-length lists of sequence indices in [0, {M // s})")
    same = ia == ib
    kd, kp = jax.random.split(key)
    z_diag = sobol_normals(kd, s * s, n_points, R) if same.any() else np.zeros((R, 1, s * s))
    z_pair = sobol_normals(kp, 4 * s * s, n_points, R) if (~same).any() else np.zeros((R, 1, 4 * s * s))
    out = np.empty((R, ia.size, s, s))
    as_idx = lambda x: np.asarray(x, np.int32)  # noqa: E731
    for r in range(R):  # host arrays as arguments: jnp.asarray would run a program to move each one
        diag, off = _attention_replicate(np.asarray(reps[r]), np.asarray(z_diag[r]), np.asarray(z_pair[r]),
                                         as_idx(ia[same]), as_idx(ia[~same]), as_idx(ib[~same]), s, int(chunk))
        diag = np.asarray(diag)
        out[r, same] = 0.5 * (diag + np.swapaxes(diag, -1, -2))
        out[r, ~same] = np.asarray(off)
    return out


def attention_kernel(K, *, key, n_tokens: int | None = None, n_points: int = 1024, n_replicates: int = 8,
                     scaling: str = "sqrt", chunk: int = 16) -> Kernel:
    r"""The infinite-head kernel of one attention layer: ``K'^{ab} = E[softmax(p^a) K^{ab} softmax(p^b)^T]``.

    ``K``: the token-token kernel of all inputs, an (M, M) array (then ``n_tokens`` = s is needed; M = m s) or a
    :class:`Kernel`. Randomised QMC over the Gaussian scores (module docstring): ``n_replicates`` scrambled Sobol sets
    of ``n_points`` points (a power of 2), drawn from ``key``; a Kernel with R > 1 replicates is mapped replicate by
    replicate (R scrambled sets). ``chunk``: pairs of sequences per vectorised batch (memory ``chunk * n_points *
    4 s^2`` floats). ``scaling="linear"``: 1/n scaling, the exact block mean (no QMC).
    Returns a :class:`Kernel` (its ``mean`` and ``se``).
    """
    K = as_kernel(K, n_tokens)
    check.choice("scaling", scaling, ("sqrt", "linear"))
    s = K.n_tokens
    M = K.replicates.shape[-1]
    m = M // s
    if scaling == "linear":
        return _map(K, _block_mean, s)
    if scaling != "sqrt":
        raise ValueError(f"scaling must be 'sqrt' (1/sqrt(n)) or 'linear' (1/n); got {scaling!r}")
    ia, ib = np.triu_indices(m)
    blocks = attention_blocks(K, ia, ib, key=key, n_points=n_points, n_replicates=n_replicates, chunk=chunk)
    R = blocks.shape[0]
    out = np.empty((R, m, m, s, s))
    out[:, ia, ib] = blocks
    out[:, ib, ia] = np.swapaxes(blocks, -1, -2)
    return Kernel(out.transpose(0, 1, 3, 2, 4).reshape(R, M, M), s)


def layer_kernel(K, layer: str, *, key=None, n_tokens: int | None = None, n_points: int = 1024,
                 n_replicates: int = 8, scaling: str = "sqrt") -> Kernel:
    """The kernel map of one layer of :data:`attnlab.sakai.model.LAYERS` (``attention`` needs ``key``)."""
    (layer,) = check_layers((layer,))
    if layer == "attention":
        if key is None:
            raise ValueError("the attention kernel needs a PRNG key (its QMC point sets)")
        return attention_kernel(K, key=key, n_tokens=n_tokens, n_points=n_points, n_replicates=n_replicates,
                                scaling=scaling)
    return {"dense": dense_kernel, "relu": relu_kernel, "erf": erf_kernel}[layer](K, n_tokens=n_tokens)


def stack_kernel(K, layers, *, key, n_tokens: int | None = None, n_points: int = 1024, n_replicates: int = 8,
                 scaling: str = "sqrt") -> Kernel:
    """The kernel of a deep stack: the layer maps composed in order (``relu`` = a dense layer then ReLU), the i-th
    layer's QMC sets from ``fold_in(key, i)``; the replicates carry the error estimate through (module docstring)."""
    out = as_kernel(K, n_tokens)
    for i, layer in enumerate(check_layers(layers)):
        out = layer_kernel(out, layer, key=jax.random.fold_in(key, i), n_points=n_points,
                           n_replicates=n_replicates, scaling=scaling)
    return out


def pooled_kernel(K, readout: str = "mean", *, n_tokens: int | None = None) -> Kernel:
    """The m x m kernel of a scalar readout of each sequence: of the token mean (``readout="mean"``: the block means)
    or of the first token (``"first"``: entry (0, 0) of each block); a Kernel with s = 1."""
    K = as_kernel(K, n_tokens)
    check.choice("readout", readout, ("mean", "first"))
    s = K.n_tokens
    m = K.replicates.shape[-1] // s
    r = np.asarray(K.replicates).reshape(-1, m, s, m, s)
    if readout == "mean":
        return Kernel(r.mean((2, 4)), 1)
    if readout == "first":
        return Kernel(r[:, :, 0, :, 0], 1)
    raise ValueError(f"readout must be 'mean' or 'first'; got {readout!r}")
