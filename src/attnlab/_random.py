r"""Exact random draws in JAX: normals, uniforms, chi-squares, Bartlett factors (the width-free samplers of
:mod:`attnlab.sakai`, the in-frame Monte Carlo of :mod:`attnlab.slr.data`).

* :func:`normal`, :func:`uniform`: float64 draws from the counter-based generator Threefry-2x32 with 20 rounds
  (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011), the block function of JAX's
  default PRNG; :func:`threefry2x32` equals ``jax.extend.random.threefry_2x32`` bit for bit (tested). Written as
  uint32 arithmetic that XLA fuses with its consumers; one block (64 bits) gives one 52-bit uniform
  ``(m + 1/2) 2^-52`` in (0, 1), and two uniforms give a normal by Box and Muller (1958): ``r = sqrt(-2 log u1)``,
  ``r cos 2 pi u2`` (see :func:`normal` for the unused sine), with cos and sin from their Taylor series on
  [-pi/4, pi/4) (truncation below 5e-17) after an exact quadrant reduction. Exact in law up to float64 rounding, as
  ``jax.random.normal`` is (its uniform also has 52 bits; here |z| <= 8.6). Keyed by any JAX key (its first two
  32-bit words of ``jax.random.bits``), so a seed still fixes every number.
  Why not ``jax.random.normal``: it maps a uniform through a float64 ``erf_inv`` (a long polynomial evaluation per
  draw) and its bit generation is lowered as a separate program, where this module's block function is plain uint32
  arithmetic fused with its consumers and Box-Muller needs one log, one square root and one short series; the
  samplers are bound by random-number generation (``attnlab.sakai.presets``). ``bench/dependencies.py`` (row
  ``draws_jax``) measures the ``sakai-vary-heads`` preset with ``jax.random.normal`` and ``jax.random.chisquare``
  swapped in.
* :func:`chi2`: ``chi^2_df = 2 Gamma(df/2)`` by Marsaglia and Tsang (2000), "A simple method for generating gamma
  variables", ACM TOMS 26(3), with the boost ``Gamma(a) = Gamma(a + 1) U^{1/a}`` for ``a < 1``. Every element takes
  the first accepted candidate of its own iid candidate stream, so the law is exact (see :func:`_gamma_mt`).
* :func:`bartlett`: the Bartlett factor ``B`` (lower triangular, ``B_ii = sqrt(chi^2_{df-i})`` for i = 0..s-1,
  ``B_ij ~ N(0, 1)`` for i > j), so that ``B B^T ~ Wishart_s(df, I_s)`` (Bartlett 1933; Anderson, An Introduction to
  Multivariate Statistical Analysis, Thm. 7.2.1). Needs ``df >= s``.
* :func:`key`, :func:`split`, :func:`fold_in`, :func:`key_words`, :func:`jax_normal`: JAX's own key derivations
  and draws (the same numbers), each one saved program (:mod:`attnlab.programs`), for a preset's host code: called
  outside a compiled function, each JAX operation is a program traced and lowered again in every process.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs

__all__ = ["key", "split", "fold_in", "jax_normal", "key_words", "threefry2x32", "uniform", "normal", "cos_sin_2pi",
           "chi2", "bartlett"]


@programs.jit
def key(seed):
    """``jax.random.key(seed)``, one saved program (see :func:`split`; eager, the seed's conversion and the key's
    derivation are programs of their own)."""
    return jax.random.key(seed)


@partial(programs.jit, static_argnames=("num",))
def split(key, num: int = 2):
    """``tuple(jax.random.split(key, num))``, one saved program (:mod:`attnlab.programs`): outside a compiled
    function, ``jax.random.split`` and each unpacking of its result are programs of their own, traced and lowered in
    every process."""
    return tuple(jax.random.split(key, num))


@programs.jit
def fold_in(key, data):
    """``jax.random.fold_in(key, data)``, one saved program (see :func:`split`)."""
    return jax.random.fold_in(key, data)


@programs.jit
def key_words(key):
    """``jax.random.bits(key, (2,), uint32)``: two 32-bit words drawn from ``key`` (the seed of a C kernel's
    streams, of :func:`uniform`'s blocks), one saved program (see :func:`split`)."""
    return jax.random.bits(key, (2,), jnp.uint32)


@partial(programs.jit, static_argnames=("shape",))
def jax_normal(key, shape: tuple[int, ...]):
    """``jax.random.normal(key, shape)`` (JAX's draws, not :func:`normal`'s), one saved program (see :func:`split`)."""
    return jax.random.normal(key, shape)

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32, 20 rounds (Random123 reference; the key schedule and rotations of JAX's ``threefry_2x32``):
    key words ``k0, k1`` (uint32 scalars), counter words ``x0, x1`` (uint32 arrays) -> two uint32 arrays."""
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0, x1 = x0 + k0, x1 + k1
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def _blocks_u01(key, size: int, stream: int):
    """``size`` uniforms in (0, 1), 52 bits each, from the Threefry blocks ``(i, stream)``, i = 0..size-1."""
    if size >= 1 << 32:
        raise ValueError(f"at most 2^32 - 1 draws per call; got {size}")
    k = jax.random.bits(key, (2,), jnp.uint32)
    c = jax.lax.iota(jnp.uint32, size)
    x0, x1 = threefry2x32(k[0], k[1], c, jnp.full_like(c, stream))
    m = (x0.astype(jnp.uint64) << np.uint64(20)) ^ (x1.astype(jnp.uint64) >> np.uint64(12))
    m = (m & np.uint64((1 << 52) - 1)) | np.uint64(0x3FF0000000000000)  # 1 + m 2^-52 in [1, 2)
    return jax.lax.bitcast_convert_type(m, jnp.float64) - (1.0 - 2.0**-53)


def uniform(key, shape=()):
    """float64 uniforms on the open interval (0, 1): ``(m + 1/2) 2^-52`` with m uniform on 0..2^52 - 1."""
    shape = tuple(shape)
    return _blocks_u01(key, math.prod(shape), 0).reshape(shape)


_SIN = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(9))  # sin a = a sum_k _SIN[k] a^2k, |a| <= pi/4
_COS = tuple((-1) ** k / math.factorial(2 * k) for k in range(10))


def _horner(coefs, t):
    acc = jnp.full_like(t, coefs[-1])
    for c in reversed(coefs[:-1]):
        acc = acc * t + c
    return acc


def cos_sin_2pi(u):
    """``(cos 2 pi u, sin 2 pi u)`` for u in [0, 1): quadrant ``q = floor(4u)`` and ``a = pi/2 (4u - q - 1/2)`` in
    [-pi/4, pi/4) (both exact in float64 but for the last product), ``2 pi u = pi/4 + a + q pi/2``."""
    f = 4.0 * u
    q = jnp.floor(f)
    a = (math.pi / 2) * (f - q - 0.5)
    t = a * a
    sa, ca = a * _horner(_SIN, t), _horner(_COS, t)
    h = math.sqrt(0.5)
    c0, s0 = h * (ca - sa), h * (ca + sa)  # cos and sin of pi/4 + a
    qi = q.astype(jnp.int32)
    cos = jnp.where(qi == 0, c0, jnp.where(qi == 1, -s0, jnp.where(qi == 2, -c0, s0)))
    sin = jnp.where(qi == 0, s0, jnp.where(qi == 1, c0, jnp.where(qi == 2, -s0, -c0)))
    return cos, sin


def normal(key, shape=()):
    """Standard normal float64 draws by Box-Muller, ``r cos(2 pi u2)`` with ``r = sqrt(-2 log u1)`` and u1, u2 from
    two Threefry blocks per draw (:mod:`attnlab._random`). The sine half of each pair is not used: a concatenation of
    the two halves makes XLA recompute both blocks for each output element and materialise the result, while the
    cosine-only form stays elementwise and fuses with its consumer."""
    shape = tuple(shape)
    size = math.prod(shape)
    r = jnp.sqrt(-2.0 * jnp.log(_blocks_u01(key, size, 1)))
    cos, _ = cos_sin_2pi(_blocks_u01(key, size, 2) - 2.0**-53)  # u2 in [0, 1)
    return (r * cos).reshape(shape)


def _mt_candidate(key, d, c):
    """One Marsaglia-Tsang candidate per element of ``d``, ``c = 1/sqrt(9 d)``: ``(value, accepted)``.

    ``x ~ N(0, 1)``, ``u ~ U(0, 1)`` independent, ``v = (1 + c x)^3``; accept iff ``v > 0`` and
    ``log u < x^2/2 + d - d v + d log v``; the accepted ``d v`` is Gamma(d + 1/3) (Marsaglia and Tsang 2000, Sec. 3).
    """
    kx, ku = jax.random.split(key)
    x = normal(kx, d.shape)
    u = uniform(ku, d.shape)
    v = (1.0 + c * x) ** 3
    vpos = jnp.where(v > 0, v, 1.0)
    ok = (v > 0) & (jnp.log(u) < 0.5 * x * x + d - d * vpos + d * jnp.log(vpos))
    return d * vpos, ok


def _pending_indices(pending, cap: int):
    """Indices of the first ``cap`` True entries of ``pending`` (M,), padded with M: ``(idx, valid)``.

    Two-level compaction (blocks of 8): a ``nonzero`` over the M/8 block flags, then over the entries of the first
    ``cap`` flagged blocks, instead of one ``nonzero`` over all M entries (a full pass, costly per entry on CPU).
    """
    M = pending.shape[0]
    B = 8
    nb = -(-M // B)
    blocks = jnp.pad(pending, (0, nb * B - M)).reshape(nb, B)
    bidx = jnp.nonzero(jnp.any(blocks, 1), size=min(cap, nb), fill_value=nb)[0]
    sub = jnp.where((bidx < nb)[:, None], blocks[jnp.minimum(bidx, nb - 1)], False).reshape(-1)
    flat = bidx[:, None] * B + jnp.arange(B)
    j = jnp.nonzero(sub, size=cap, fill_value=sub.shape[0])[0]
    idx = jnp.where(j < sub.shape[0], flat.reshape(-1)[jnp.minimum(j, sub.shape[0] - 1)], M)
    return idx, idx < M


def _gamma_mt(key, a, shape):
    r"""Gamma(a) draws, shape ``shape``, for an array ``a >= 1`` broadcastable to it (Marsaglia-Tsang).

    Exactness: element i must be the first accepted candidate of an iid candidate sequence of its own. One candidate
    is drawn for every element; the elements that rejected (a fraction ``1 - acceptance``: about 5% at a = 1, 2% at
    a = 2, below 0.1% for a >= 32) are gathered into a buffer of static size ``M/64 + 64`` and each slot receives
    fresh iid candidates (inner ``while_loop``, touching only the buffer) until it accepts; the values go back to
    their elements. Which slot or which round serves an element does not matter, since every candidate is a fresh
    draw independent of everything before it, so each element gets its own stream's first acceptance. More pending
    elements than slots wait for the next gathering (outer ``while_loop``). The retry rounds touch only the buffer,
    never the whole batch, and the candidates are the fused Threefry/Box-Muller draws of :func:`normal` and
    :func:`uniform`.
    """
    a = jnp.broadcast_to(jnp.asarray(a, jnp.float64), shape).reshape(-1)
    M = a.shape[0]
    if M == 0:
        return jnp.zeros(shape)
    d = a - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    k0, kl = jax.random.split(key)
    out, done = _mt_candidate(k0, d, c)
    cap = min(M, M // 64 + 64)

    def gather_round(state):
        key, out, done = state
        key, kb = jax.random.split(key)
        idx, valid = _pending_indices(~done, cap)
        safe = jnp.where(valid, idx, 0)
        db, cb = d[safe], c[safe]

        def retry(st):
            kk, val, ok = st
            kk, kc = jax.random.split(kk)
            new, acc = _mt_candidate(kc, db, cb)
            return kk, jnp.where(ok, val, new), ok | acc

        _, val, _ = jax.lax.while_loop(lambda st: ~jnp.all(st[2]), retry, (kb, jnp.zeros(cap), ~valid))
        out = out.at[idx].set(val, mode="drop")
        done = done.at[idx].set(True, mode="drop")
        return key, out, done

    _, out, _ = jax.lax.while_loop(lambda st: ~jnp.all(st[2]), gather_round, (kl, out, done))
    return out.reshape(shape)


def chi2(key, df, shape=()):
    """Exact ``chi^2_df`` draws (``df > 0``, scalar or array broadcastable to ``shape``).

    For ``df < 2`` (``a = df/2 < 1``) the boost ``Gamma(a) = Gamma(a + 1) U^{1/a}`` uses one extra uniform per
    element, drawn only when some element needs it (``lax.cond``; the uniforms are independent of the Gamma draws
    either way, so the law does not depend on which branch runs).
    """
    a = jnp.broadcast_to(jnp.asarray(df, jnp.float64) / 2.0, shape)
    small = a < 1.0
    kg, ku = jax.random.split(key)
    g = _gamma_mt(kg, jnp.where(small, a + 1.0, a), shape)
    boost = jax.lax.cond(jnp.any(small),
                         lambda: jnp.where(small, uniform(ku, shape) ** (1.0 / a), 1.0),
                         lambda: jnp.ones(shape))
    return 2.0 * g * boost


def bartlett(key, df: int, s: int, batch=()):
    """Bartlett factors, shape ``batch + (s, s)``: ``B B^T ~ Wishart_s(df, I_s)``; requires ``df >= s``."""
    if isinstance(df, int) and df < s:
        raise ValueError(f"the Bartlett factor needs df >= s; got df={df}, s={s}")
    kd, kl = jax.random.split(key)
    diag = jnp.sqrt(chi2(kd, df - jnp.arange(s), batch + (s,)))
    low = jnp.tril(normal(kl, batch + (s, s)), -1)
    return low + diag[..., :, None] * jnp.eye(s)
