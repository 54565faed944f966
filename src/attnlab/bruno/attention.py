r"""Self-attention on the sphere with O(N) memory: blocked kernels that never form the N x N matrix.

For tokens ``x_i`` (rows of ``X``, shape (N, d)) and d x d matrices Q, K, V, the attention output is

    A_i = sum_j w_ij V x_j,     w_ij = exp(s_ij) / Z_i,     s_ij = beta <Q x_i, K x_j>,

with Z_i = sum_j exp(s_ij) (SA, softmax, the sum includes j = i) or Z_i = N (USA, the constant normalisation of
Geshkovski et al.; Bruno et al. Remark 3.10). The SA drift of the particle model is P_{x_i} A_i.

Every kernel works on blocks of ``block_q`` queries times ``block_k`` keys (the block sizes are balanced, e.g.
N = 10^4 with the CPU defaults 1024 x 2048 gives 10 x 5 blocks of 1000 x 2000, so padding never costs more than one row
per block), keeps a shift m_i per query and accumulates l_i = sum_j exp(s_ij - m_i) and a_i = sum_j exp(s_ij - m_i)
V x_j; l_i rides along as a column of ones appended to V x_j, so one matrix product per block gives both. Then SA:
A_i = a_i / l_i, USA: A_i = exp(m_i) a_i / N (which can overflow for large beta, as the USA model itself does; see
``log_normalizer``), log Z_i = m_i + log l_i. Scratch memory is O(block_q * block_k); the same code runs on CPU and
GPU and is vmapped over independent runs. Two ways to choose m_i:

* ``method="online"``: the running maximum of the scores seen so far, with the accumulators rescaled by
  exp(m_old - m_new) when it grows (the online softmax of Milakov & Gimelshein 2018, as in FlashAttention). Always
  safe, but it needs a row maximum (a reduction) over every block on top of the exponentials.
* ``method="shift"``: an a-priori shift computed in O(N) before the blocked pass, so the pass is one matrix
  product, one exponential per score and one matrix product per block, with no reduction and no rescaling. With
  q_i = beta log2(e) Q x_i and k_j = K x_j (scores in base 2, t_ij = <q_i, k_j> = s_ij log2(e), so each score costs
  one exp2), Cauchy-Schwarz gives t_ij <= b_i := |q_i| max_j |k_j|, and the diagonal score t_ii is attained. The shift

      m_i = max(t_ii, b_i - margin),      margin = 64 (float32) or 512 (float64),

  bounds every term by 2^margin (so a sum of up to 2^60 terms cannot overflow) and keeps the largest term of the row
  at least 2^min(0, t_ii - b_i + margin). On the sphere with Q^T K = I (all of the paper's presets but Fig. 4) t_ii = b_i,
  so l_i >= 1. The normaliser can only underflow when every score of row i lies more than margin + 60 below b_i
  (in base 2): that is detected (l_i < 2^-60 in float32, 2^-900 in float64).
* ``method="jax"``: ``shift``, and if any row's l_i is below that threshold, the whole call is redone
  with ``online`` (a ``lax.cond``; under ``vmap`` a custom batching rule keeps the condition unbatched, so a batch of
  runs redoes the batch only when one of them needs it, instead of computing both kernels every time).
* ``method="native"``: the C kernel below, or a one-line ValueError where it does not apply.
* ``method="auto"`` (the default): in float32 on CPU with 2 <= d <= 8, the C kernel of
  :mod:`attnlab.bruno.native` (one exponential per unordered pair, valid when S = Q^T K is symmetric), used when
  S is symmetric (to 1e-6 relative) and the scores cannot overflow (S positive semi-definite, or the Cauchy-Schwarz
  bound), and kept when its result is finite with every l_i >= 2^-60; otherwise, and everywhere else (float64, GPU,
  no C compiler, ``ATTNLAB_NATIVE=0``), ``jax``. The fallback is decided for a whole vmapped batch at once, as above.
  Derivatives (JVP) always go through the JAX kernels.

On a GPU every query goes in one block (:func:`default_blocks`) and, in float32, the shift kernel's sums are one
Pallas kernel that keeps every score in registers (:mod:`attnlab.bruno.attention_gpu`; the forms: :data:`FORMS`);
matrix products are taken at full float32 precision (a GPU's default for float32 is TF32).

In float32 the shift kernel computes 2^t with a degree-5 polynomial on the reduced argument (t = n + f, n = round(t),
|f| <= 1/2, 2^t = p(f) * 2^n with 2^n assembled from its exponent bits; p is a minimax fit to 2^f in relative error,
7.5e-8 in exact arithmetic and 2.3e-7 when evaluated in float32, as accurate as float32 scores |s| ~ beta allow:
their rounding alone gives relative errors ~ beta * 6e-8 in exp(s)). Arguments below -127 give exactly 0. With
beta log2(e) folded into the queries, each exp is this exp2, and everything stays in one XLA loop fusion that
vectorises; XLA's own exp2 is used in float64.

``attention_dense`` materialises the N x N softmax and is the reference in the tests.
"""

from __future__ import annotations

from functools import cache, partial
from typing import Literal

import jax
import jax.numpy as jnp

from attnlab.bruno import native

__all__ = ["attention", "attention_dense", "log_normalizer", "log_normalizer_dense", "check_qkv", "exp2_f32",
           "default_blocks", "default_form", "METHODS", "FORMS", "ACCELERATOR_SCORES"]

Normalization = Literal["sa", "usa"]
Method = Literal["auto", "native", "jax", "shift", "online"]
METHODS = ("auto", "native", "jax", "shift", "online")
FORMS = ("matmul", "fused", "reduce", "pallas")
"""How the shift kernel asks XLA for one block's sums sum_j 2^(t_ij - m_i) [V x_j, 1]: ``matmul`` (scores by a
matrix product, then the exponentials, then a matrix product), ``fused`` (scores as d broadcast products, fused with
the exponentials into the operand of one matrix product), ``reduce`` (the same scores and exponentials fused into c
row sums, so no score is ever stored), ``pallas`` (float32 only: one GPU kernel written in Pallas,
:mod:`attnlab.bruno.attention_gpu`; the blocks are its own)."""

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# minimax (relative error) fit of 2^f on [-1/2, 1/2], degree 5, coefficients of f^0 ... f^5 (Lawson iteration on
# 4000 Chebyshev nodes; max relative error 7.49e-8)
_EXP2_COEFFS = (1.0000000716546733, 0.6931469670643617, 0.2402211972388161, 0.055507132741486324,
                0.009675541332786721, 0.0013276471782286067)
_MARGIN = {"float32": 64.0, "float64": 512.0}  # base-2 exponents: the shift's margin (method="shift" above)
_TINY_LOG2 = {"float32": -60.0, "float64": -900.0}


def check_qkv(d: int, Q, K, V) -> None:
    """Raise ValueError unless Q, K, V are d x d matrices (d >= 2)."""
    if d < 2:
        raise ValueError(f"tokens must live in dimension d >= 2 (got d = {d})")
    for name, M in (("Q", Q), ("K", K), ("V", V)):
        shape = tuple(jnp.shape(M))
        if shape != (d, d):
            raise ValueError(f"{name} must be a square {d} x {d} matrix (got shape {shape})")


def _check(x, beta, block_q, block_k, normalization, method="auto"):
    if x.ndim != 2:
        raise ValueError(f"tokens must have shape (N, d) (got shape {x.shape}); vmap for a batch of runs")
    if x.shape[0] < 1:
        raise ValueError(f"need at least one token (got N = {x.shape[0]})")
    if x.shape[1] < 2:
        raise ValueError(f"tokens must live in dimension d >= 2 (got d = {x.shape[1]})")
    if isinstance(beta, (int, float)) and not beta > 0:
        raise ValueError(f"beta must be > 0 (got {beta})")
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1 (got block_q = {block_q}, block_k = {block_k})")
    if normalization not in ("sa", "usa"):
        raise ValueError(f"normalization must be 'sa' or 'usa' (got {normalization!r})")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS} (got {method!r})")


def exp2_f32(t):
    """2^t in float32 by range reduction and a degree-5 minimax polynomial (:mod:`attnlab.bruno.attention`); 0 for
    t <= -127.

    Valid for t < 128 (the kernels only evaluate t <= 64 + rounding).
    """
    t = jnp.maximum(t.astype(jnp.float32), -127.0)
    n = jnp.round(t)
    f = t - n
    p = jnp.float32(_EXP2_COEFFS[-1])
    for c in _EXP2_COEFFS[-2::-1]:
        p = p * f + jnp.float32(c)
    scale = jax.lax.bitcast_convert_type((n.astype(jnp.int32) + 127) << 23, jnp.float32)  # 2^n; +0 for n = -127
    return p * scale


ACCELERATOR_SCORES = 2**27
"""Scores per key block on a GPU (all N queries times block_k keys; 512 MiB in float32): :func:`default_blocks`."""


def _resolve_blocks(x, block_q, block_k):
    n = jnp.shape(x)[0] if jnp.ndim(x) == 2 else 1
    dq, dk = default_blocks(max(int(n), 1))
    return (dq if block_q is None else block_q), (dk if block_k is None else block_k)


def _blocks(n, block):
    """Balanced blocks: (size, count) with count = ceil(n / block) and size = ceil(n / count) <= block."""
    count = -(-n // min(block, n))
    return -(-n // count), count


def _pad(a, n, value=0.0):
    extra = n - a.shape[0]
    return a if extra == 0 else jnp.concatenate([a, jnp.full((extra,) + a.shape[1:], value, a.dtype)])


def _map_blocks(one_query_block, xs, nq):
    if nq == 1:
        return jax.tree.map(lambda a: a[None], one_query_block(jax.tree.map(lambda a: a[0], xs)))
    return jax.lax.map(one_query_block, xs)


def _online(q, k, v1, beta, block_q, block_k):
    """Running (m, l, a) for queries q (N, d) against keys k (N, d) and values-with-ones v1 (N, c); m natural log."""
    n, dt = q.shape[0], q.dtype
    bq, nq = _blocks(n, block_q)
    bk, nk = _blocks(n, block_k)
    qb = _pad(q * beta, nq * bq).reshape(nq, bq, -1)
    kb = _pad(k, nk * bk).reshape(nk, bk, -1)
    vb = _pad(v1, nk * bk).reshape(nk, bk, -1)  # padded keys have a zero value row, ones column included
    valid = (jnp.arange(nk * bk) < n).reshape(nk, bk)

    def one_query_block(qi):
        def body(carry, blk):
            m, acc = carry
            kj, vj, ok = blk
            s = jnp.where(ok[None, :], _dot(qi, kj.T), -jnp.inf)
            m_new = jnp.maximum(m, jnp.max(s, axis=1))
            p = jnp.exp(s - m_new[:, None])
            acc = acc * jnp.exp(m - m_new)[:, None] + _dot(p, vj)
            return (m_new, acc), None

        init = (jnp.full((bq,), -jnp.inf, dt), jnp.zeros((bq, v1.shape[1]), dt))
        if nk == 1:
            (m, acc), _ = body(init, (kb[0], vb[0], valid[0]))
        else:
            (m, acc), _ = jax.lax.scan(body, init, (kb, vb, valid))
        return m, acc

    m, acc = _map_blocks(one_query_block, qb, nq)
    return m.reshape(-1)[:n], acc.reshape(nq * bq, -1)[:n]


def _dot(a, b):
    """a @ b in the operands' full precision (no TF32 on GPUs, whose default for float32 products it is)."""
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


def _scores(qi, kj):
    """qi kj^T, (bq, bk), as d broadcast products: elementwise, so XLA fuses it into its consumer."""
    return sum(qi[:, c, None] * kj[None, :, c] for c in range(qi.shape[1]))


def _block_sums(qi, mi, kj, vj, exp2, form):
    """sum_j 2^(t_ij - m_i) vj_j for one block, (bq, c); ``form`` (:data:`FORMS`) is how XLA is asked for it."""
    if form == "matmul":
        return _dot(exp2(_dot(qi, kj.T) - mi[:, None]), vj)
    p = exp2(_scores(qi, kj) - mi[:, None])
    if form == "fused":
        return _dot(p, vj)
    return jnp.stack([jnp.sum(p * vj[None, :, c], axis=1) for c in range(vj.shape[1])], axis=1)


def default_form(dtype=None, backend: str | None = None) -> str:
    """The form of the shift kernel (:data:`FORMS`) for ``dtype`` on ``backend`` (default: JAX's): ``matmul`` on a
    CPU; on a GPU ``pallas`` in float32 (the fastest of the forms bench/gpu.py measures there) and ``reduce``
    otherwise (float64)."""
    if (backend or jax.default_backend()) == "cpu":
        return "matmul"
    return "pallas" if dtype is not None and jnp.dtype(dtype).name == "float32" else "reduce"


def _differentiable(form: str) -> str:
    """The form a derivative goes through: ``pallas`` has no JVP rule, ``reduce`` computes the same sums."""
    return "reduce" if form == "pallas" else form


def _shift(q, k, beta):
    """(q2, m2): base-2 queries q2_i = beta log2(e) q_i and their a-priori shifts m2_i = max(t_ii, b_i - margin)
    (``method="shift"`` in :mod:`attnlab.bruno.attention`)."""
    q2 = q * (beta * LOG2E)
    b = jnp.linalg.norm(q2, axis=1) * jnp.max(jnp.linalg.norm(k, axis=1))
    return q2, jnp.maximum(jnp.sum(q2 * k, axis=1), b - _MARGIN[jnp.dtype(q.dtype).name])


def _shifted(q, k, v1, beta, block_q, block_k, form=None, exp="poly"):
    """(m, acc) with the a-priori shift (``method="shift"`` in :mod:`attnlab.bruno.attention`); m in natural-log
    units. No row maxima, one exp2/score. ``form``: :data:`FORMS` (default :func:`default_form`); ``exp``: ``poly``
    (:func:`exp2_f32` in float32) or ``xla`` (XLA's exp2; the ``pallas`` form always uses the GPU's exp2)."""
    n, dt = q.shape[0], q.dtype
    name = jnp.dtype(dt).name
    exp2 = exp2_f32 if name == "float32" and exp == "poly" else jnp.exp2
    form = form or default_form(dt)
    q2, m2 = _shift(q, k, beta)
    if form == "pallas":
        if name != "float32":
            raise ValueError(f"form='pallas' computes in float32 (got {name})")
        from attnlab.bruno.attention_gpu import shifted_sums

        return m2 * LN2, shifted_sums(q2, m2, k, v1, interpret=jax.default_backend() != "gpu")
    bq, nq = _blocks(n, block_q)
    bk, nk = _blocks(n, block_k)
    qb = _pad(q2, nq * bq).reshape(nq, bq, -1)
    mb = _pad(m2, nq * bq).reshape(nq, bq)
    kb = _pad(k, nk * bk).reshape(nk, bk, -1)  # padded keys: score 0 - m_i <= margin, times a zero value row
    vb = _pad(v1, nk * bk).reshape(nk, bk, -1)

    def one_query_block(args):
        qi, mi = args

        def body(acc, blk):
            kj, vj = blk
            return acc + _block_sums(qi, mi, kj, vj, exp2, form), None

        init = jnp.zeros((bq, v1.shape[1]), dt)
        if nk == 1:
            return body(init, (kb[0], vb[0]))[0]
        return jax.lax.scan(body, init, (kb, vb))[0]

    acc = _map_blocks(one_query_block, (qb, mb), nq)
    return m2 * LN2, acc.reshape(nq * bq, -1)[:n]


def _underflow_free(acc):
    return jnp.all(jnp.log2(acc[..., -1]) >= _TINY_LOG2[jnp.dtype(acc.dtype).name])


def _xla_plain(q, k, v1, beta, block_q, block_k, form=None):
    """``shift``, redone with ``online`` when some l_i underflows (plain ``lax.cond``)."""
    m, acc = _shifted(q, k, v1, beta, block_q, block_k, form)
    return jax.lax.cond(_underflow_free(acc), lambda: (m, acc), lambda: _online(q, k, v1, beta, block_q, block_k))


@cache
def _auto(block_q, block_k):
    """``shift`` with a fallback to ``online``. The batching rule keeps the fallback's condition unbatched; the JVP
    rule differentiates the plain ``lax.cond`` version (custom_vmap alone does not support autodiff)."""
    shifted = partial(_shifted, block_q=block_q, block_k=block_k)
    online = partial(_online, block_q=block_q, block_k=block_k)
    plain = partial(_xla_plain, block_q=block_q, block_k=block_k)

    batched = jax.custom_batching.custom_vmap(plain)

    @batched.def_vmap
    def _rule(axis_size, in_batched, q, k, v1, beta):
        axes = tuple(0 if b else None for b in in_batched)
        m, acc = jax.vmap(shifted, in_axes=axes)(q, k, v1, beta)
        out = jax.lax.cond(_underflow_free(acc), lambda: (m, acc),
                           lambda: jax.vmap(online, in_axes=axes)(q, k, v1, beta))
        return out, (True, True)

    @jax.custom_jvp
    def kernel(q, k, v1, beta):
        return batched(q, k, v1, beta)

    @kernel.defjvp
    def _jvp(primals, tangents):
        form = _differentiable(default_form(primals[0].dtype))
        return jax.jvp(partial(plain, form=form), primals, tangents)

    return kernel


def _native_applies(dt, d: int) -> bool:
    """Static: can ``method="auto"`` use the C kernel here (float32, CPU backend, 2 <= d <= MAX_D, compiled)?"""
    return (jnp.dtype(dt).name == "float32" and 2 <= d <= native.MAX_D and jax.default_backend() == "cpu"
            and native.available())


def _native_sums(q2, c, x, u):
    """The C kernel's sums: called by XLA through its FFI handler (:func:`attnlab.bruno.native.symmetric_sums_xla`),
    or, where the kernel was built without it, by a Python callback."""
    if native.xla_target() is not None:
        return native.symmetric_sums_xla(q2, c, x, u)
    return jax.pure_callback(native.symmetric_sums, jax.ShapeDtypeStruct(u.shape, u.dtype),
                             q2, c, x, u, vmap_method="sequential")


@jax.jit
def _native_inputs(x, S, beta):
    """(q2, c, C, usable): base-2 queries of the symmetrised S, c_i = t_ii / 2, C = max c, and whether the symmetric
    kernel applies (S symmetric to 1e-6 relative, and t_ij - c_i - c_j <= 64 for every pair: guaranteed when S is
    positive semi-definite, else checked by Cauchy-Schwarz)."""
    scale = jnp.max(jnp.abs(S)) + jnp.finfo(S.dtype).tiny
    sym = jnp.max(jnp.abs(S - S.T)) <= 1e-6 * scale
    Ss = 0.5 * (S + S.T)
    q2 = (beta * LOG2E) * _dot(x, Ss)
    c = 0.5 * jnp.sum(q2 * x, axis=1)
    psd = jnp.min(jnp.linalg.eigvalsh(Ss.astype(jnp.float64) if jax.config.jax_enable_x64 else Ss)) >= -1e-6 * scale
    cs = jnp.max(jnp.linalg.norm(q2, axis=1)) * jnp.max(jnp.linalg.norm(x, axis=1)) - 2.0 * jnp.min(c) <= 64.0
    return q2, c, jnp.max(c), sym & (psd | cs)


def _native_kernel(x, S, v1, beta):
    """(m, acc, ok) by the C kernel (:mod:`attnlab.bruno.native`); ``ok`` is False when it
    does not apply or its result is unusable."""
    n, d = x.shape
    q2, c, C, usable = _native_inputs(x, S, beta)
    width = v1.shape[1]
    u = v1 * exp2_f32(c - C)[:, None]
    if width < d + 1:  # log Z only: the kernel always carries d + 1 columns
        u = jnp.concatenate([jnp.zeros((n, d + 1 - width), u.dtype), u], axis=1)
    acc = jax.lax.cond(usable, lambda: _native_sums(q2, c, x, u), lambda: jnp.ones_like(u))[:, -width:]
    ok = usable & jnp.all(jnp.isfinite(acc)) & _underflow_free(acc)
    return (c + C) * LN2, acc, ok


@cache
def _auto_native(block_q, block_k):
    """The C kernel with the JAX kernels (``jax``) as fallback; same batching and JVP arrangement as :func:`_auto`."""
    xla = _auto(block_q, block_k)

    def plain(x, S, q, k, v1, beta):
        m, acc, ok = _native_kernel(x, S, v1, beta)
        return jax.lax.cond(ok, lambda: (m, acc), lambda: xla(q, k, v1, beta))

    batched = jax.custom_batching.custom_vmap(plain)

    @batched.def_vmap
    def _rule(axis_size, in_batched, x, S, q, k, v1, beta):
        axes = tuple(0 if b else None for b in in_batched)
        m, acc, ok = jax.vmap(_native_kernel, in_axes=(axes[0], axes[1], axes[4], axes[5]))(x, S, v1, beta)
        out = jax.lax.cond(jnp.all(ok), lambda: (m, acc), lambda: jax.vmap(xla, in_axes=axes[2:])(q, k, v1, beta))
        return out, (True, True)

    @jax.custom_jvp
    def kernel(x, S, q, k, v1, beta):
        return batched(x, S, q, k, v1, beta)

    @kernel.defjvp
    def _jvp(primals, tangents):  # the output depends on (q, k, v1, beta) alone; x and S only re-express q and k
        form = _differentiable(default_form(primals[2].dtype))
        return jax.jvp(partial(_xla_plain, block_q=block_q, block_k=block_k, form=form), primals[2:], tangents[2:])

    return kernel


def _kernel(q, k, v1, beta, method, block_q, block_k, x=None, S=None):
    if method in ("auto", "native") and x is not None and _native_applies(q.dtype, q.shape[1]):
        return _auto_native(block_q, block_k)(x, S, q, k, v1, beta)
    if method == "native":
        raise ValueError(f"method='native' needs float32, 2 <= d <= {native.MAX_D}, the CPU backend and the "
                         f"compiled kernel ({native.unavailable_reason() or 'available'}); got {q.dtype}, d = "
                         f"{q.shape[1]}")
    if method == "online":
        return _online(q, k, v1, beta, block_q, block_k)
    if method == "shift":
        return _shifted(q, k, v1, beta, block_q, block_k)
    return _auto(block_q, block_k)(q, k, v1, beta)  # "jax", or "auto" where the C kernel does not apply


def default_blocks(n: int, backend: str | None = None) -> tuple[int, int]:
    """``(block_q, block_k)`` for N = ``n`` tokens where the caller names none, on ``backend`` (default: JAX's).

    CPU: 1024 x 2048, tiles whose scores stay in cache. Elsewhere (GPU): every query at once (``block_q = N``: a GPU
    needs millions of scores in flight) against key blocks of :data:`ACCELERATOR_SCORES` / N keys (at least 1024, at
    most N), which bounds the scratch memory of a block when XLA does not fuse it away."""
    if (backend or jax.default_backend()) == "cpu":
        return 1024, 2048
    return n, min(n, max(1024, ACCELERATOR_SCORES // n))


def attention(x, Q, K, V, beta, *, normalization: Normalization = "sa", block_q: int | None = None,
              block_k: int | None = None, dtype=None, method: Method = "auto"):
    """Attention output ``A_i = sum_j w_ij V x_j``, ``w_ij = exp(beta <Q x_i, K x_j>) / Z_i`` (Bruno et al., Eq.
    (1)), (N, d), of tokens ``x`` (N, d), blocked (:mod:`attnlab.bruno.attention`); never forms N x N.
    ``normalization``: ``"sa"`` (softmax, ``Z_i = sum_j exp(beta <Q x_i, K x_j>)``) or ``"usa"`` (``Z_i = N``).

    ``dtype`` (e.g. ``jnp.float32``) sets the precision of the kernel; the result is cast back to ``x.dtype``.
    ``method``: ``"auto"`` (default), ``"native"``, ``"jax"``, ``"shift"`` or ``"online"``, each described in
    :mod:`attnlab.bruno.attention`. ``block_q``, ``block_k``: tile sizes (default :func:`default_blocks`).
    """
    block_q, block_k = _resolve_blocks(x, block_q, block_k)
    _check(x, beta, block_q, block_k, normalization, method)
    dt = None if dtype is None else jnp.dtype(dtype).name
    return _attention_jit(x, Q, K, V, beta, normalization, block_q, block_k, dt, method)


@partial(jax.jit, static_argnums=(5, 6, 7, 8, 9))
def _attention_jit(x, Q, K, V, beta, normalization, block_q, block_k, dtype, method):
    out_dtype = x.dtype
    dt = jnp.dtype(dtype) if dtype is not None else x.dtype
    xc = x.astype(dt)
    q, k = _dot(xc, jnp.asarray(Q, dt).T), _dot(xc, jnp.asarray(K, dt).T)
    v1 = jnp.concatenate([_dot(xc, jnp.asarray(V, dt).T), jnp.ones((x.shape[0], 1), dt)], axis=1)
    S = _dot(jnp.asarray(Q, dt).T, jnp.asarray(K, dt))
    m, acc = _kernel(q, k, v1, jnp.asarray(beta, dt), method, block_q, block_k, xc, S)
    a, l = acc[:, :-1], acc[:, -1:]
    if normalization == "sa":
        out = a / l
    else:
        out = a * (jnp.exp(m)[:, None] / x.shape[0])
    return out.astype(out_dtype)


def log_normalizer(x, Q, K, beta, *, block_q: int | None = None, block_k: int | None = None, dtype=None,
                   method: Method = "auto"):
    """log Z_i = logsumexp_j beta <Q x_i, K x_j> (N,), blocked, overflow-free."""
    block_q, block_k = _resolve_blocks(x, block_q, block_k)
    _check(x, beta, block_q, block_k, "sa", method)
    dt = None if dtype is None else jnp.dtype(dtype).name
    return _log_normalizer_jit(x, Q, K, beta, block_q, block_k, dt, method)


@partial(jax.jit, static_argnums=(4, 5, 6, 7))
def _log_normalizer_jit(x, Q, K, beta, block_q, block_k, dtype, method):
    dt = jnp.dtype(dtype) if dtype is not None else x.dtype
    xc = x.astype(dt)
    q, k = _dot(xc, jnp.asarray(Q, dt).T), _dot(xc, jnp.asarray(K, dt).T)
    S = _dot(jnp.asarray(Q, dt).T, jnp.asarray(K, dt))
    m, acc = _kernel(q, k, jnp.ones((x.shape[0], 1), dt), jnp.asarray(beta, dt), method, block_q, block_k, xc, S)
    return (m + jnp.log(acc[:, 0])).astype(x.dtype)


def attention_dense(x, Q, K, V, beta, *, normalization: Normalization = "sa"):
    """Reference: materialise the N x N scores and their softmax (memory O(N^2))."""
    _check(x, beta, 1, 1, normalization)
    return _attention_dense(x, Q, K, V, beta, normalization)


@partial(jax.jit, static_argnums=5)
def _attention_dense(x, Q, K, V, beta, normalization):
    s = beta * _dot(_dot(x, Q.T), _dot(x, K.T).T)
    vx = _dot(x, V.T)
    if normalization == "sa":
        return _dot(jax.nn.softmax(s, axis=1), vx)
    return _dot(jnp.exp(s), vx) / x.shape[0]


@jax.jit
def log_normalizer_dense(x, Q, K, beta):
    """Reference log Z_i with the N x N scores materialised."""
    return jax.scipy.special.logsumexp(beta * _dot(_dot(x, Q.T), _dot(x, K.T).T), axis=1)
