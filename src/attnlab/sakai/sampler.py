r"""Exact fast samplers of the finite-width law: same law as :mod:`attnlab.sakai.reference`, cost free of n.

Sakai, Karakida, Imaizumi (2025), arXiv:2506.00846, Example 3.1; the derivation is below.

Reduction (all steps are equalities in law, not approximations):

1. **Inputs.** Given h, ``W_i h ~ N(0, r I_n)`` with ``r = |h|^2/n ~ chi^2_n/n``, so ``X = psi(sqrt(r) Xi_0)`` with
   ``Xi_0`` (s x n) iid N(0, 1). For psi = identity, ``Gamma = X X^T/n = r B_0 B_0^T/n`` with ``B_0`` a Bartlett
   factor (df n), so the Cholesky factor is ``L = sqrt(r/n) B_0`` at O(s^2) cost. For ReLU (or n < s) X is drawn
   explicitly (O(sn)) and L is a (semi-definite) Cholesky factor of Gamma, or ``L = X/sqrt(n)`` when n < s.
2. **Heads given X** (independent across heads, X shared): ``Q = L Xi_Q``, ``K = L Xi_K``, ``V = L Xi_V`` with
   ``Xi`` (r x d) iid N(0, 1), and ``u = V W_O[:, 0] = L Xi_V g/sqrt(d)``, ``g ~ N(0, I_d)``.
3. **First token only** (:func:`sample_first_token`): ``Q[0] Xi_K^T ~ N(0, |Q[0]|^2 I)`` given ``Q[0]``, and
   ``|Q[0]|^2 = Gamma_00 chi^2_d``; likewise ``Xi_V g ~ N(0, chi^2_d I)``. So per head a::

       G^a_{0,:} = sqrt(Gamma_00 c_Q^a) (L nu^a)^T,     y_0 | (heads) ~ N(0, v_n),     v_n = (1/H) sum_a c_V^a |L^T s_a|^2,

   with ``c_Q, c_V ~ chi^2_d/d`` and ``nu ~ N(0, I_r)`` independent and ``s_a = softmax(G^a_{0,:})``: O(H s^2) per
   network, independent of n. ``v_n`` is the conditional variance used for Rao-Blackwellised densities.
4. **All tokens** (:func:`sample_tokens`): given ``Xi_K``, the rows of ``M = Xi_Q Xi_K^T`` are iid
   ``N(0, Xi_K Xi_K^T)``, so ``M = N B_K^T`` (N iid, B_K Bartlett with df d); likewise the output columns
   ``Xi_V g_alpha = B_V z_alpha``. Then ``G = L M L^T/sqrt(d)``, ``Y = H^{-1/2} sum_a A^a L B_V^a Z^a/sqrt(d)``:
   O(H s^3) per network. When d < r the Xi are drawn explicitly (O(s^2 d), still small).

Clip versus identity: with n >= s and psi = clip, the Wishart route samples the identity law, which differs from the
clip law only on the event {some |W_i h| > 100}, of probability at most ``s * clip_event_probability(n)`` < 1e-40
for every n >= 1 (maximal at n = 1). ReLU inputs always use explicit X.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import _validate as check
from attnlab._random import bartlett, chi2, normal
from attnlab.sakai import native as width_native
from attnlab.sakai.model import CLIP, check_model, psi

__all__ = ["input_factor", "semidefinite_cholesky", "first_token_variance", "heads_given_factor", "sample_first_token",
           "sample_first_token_sweep", "sample_tokens", "sample_scores", "sample_scores_sweep", "clip_event_probability",
           "chunk_size"]


def semidefinite_cholesky(G, rtol: float = 1e-12):
    """Lower-triangular ``L`` with ``L L^T = G`` for a batch of PSD s x s matrices, zero pivots allowed.

    A pivot below ``rtol * max diag`` is set to zero together with its column (exact when the Schur complement column
    is zero, e.g. a ReLU input row that is identically 0, which happens with probability 2^-n per token).
    """
    s = G.shape[-1]
    scale = jnp.max(jnp.diagonal(G, axis1=-2, axis2=-1), axis=-1)
    cols = []
    for j in range(s):  # shapes only: s is static and small
        prev = jnp.stack(cols, -1) if cols else jnp.zeros(G.shape[:-1] + (0,))
        piv = G[..., j, j] - jnp.sum(prev[..., j, :] ** 2, -1)
        ok = piv > rtol * scale
        ljj = jnp.sqrt(jnp.where(ok, piv, 1.0))
        col = G[..., :, j] - (prev @ prev[..., j, :][..., None])[..., 0] if cols else G[..., :, j]
        col = jnp.where(ok[..., None], col / ljj[..., None], 0.0)
        col = jnp.where(jnp.arange(s) >= j, col, 0.0)
        cols.append(col)
    return jnp.stack(cols, -1)


def empirical_gram(X):
    """``X X^T / n`` for a batch of s x n inputs, as one reduction over n of the broadcast products ``X_i X_j``.
    A batched ``X @ X^T`` with an s x s output is a dot that XLA does not fuse with the draw of X (so X goes through
    memory), and s(s + 1)/2 separate sums read X that many times; this single reduction fuses with the draw inside
    the ReLU sampler's chunk loop."""
    return jnp.sum(X[..., :, None, :] * X[..., None, :, :], -1) / X.shape[-1]


def _limit_gram(activation: str, s: int) -> np.ndarray:
    """The limit input Gram (``E psi(Z_i) psi(Z_j)``): I for clip/identity, the uncentred ReLU Gram."""
    if activation == "relu":
        return (0.5 - 0.5 / math.pi) * np.eye(s) + 0.5 / math.pi * np.ones((s, s))
    return np.eye(s)


def _wishart_path(n, s: int, activation: str) -> bool:
    """Whether Gamma is drawn from its Wishart law (psi = clip/identity and n >= s); n may then be traced."""
    return activation != "relu" and not (isinstance(n, int) and n < s)


def _chis(key, m: int, n, s: int, activation: str, extra=()):
    """All chi-squares of m networks in one exact draw (one rejection loop, compiled once).

    Returns ``r = chi^2_n/n`` (m,), the scaled Bartlett diagonal ``chi^2_{n-i}/n`` (m, s) (empty off the Wishart
    path) and, for each ``(df, count)`` in ``extra``, an (m, count) array of ``chi^2_df/df``. An infinite n or df
    gives exactly 1 (the n -> infinity limit), so the same program also samples the limit law.
    """
    n_diag = s if _wishart_path(n, s, activation) else 0
    dfs = [jnp.full((1,), n, jnp.float64), n - jnp.arange(n_diag, dtype=jnp.float64)]
    dfs += [jnp.full((count,), df, jnp.float64) for df, count in extra]
    dfs = jnp.concatenate(dfs)
    finite = jnp.isfinite(dfs)
    safe = jnp.where(finite, dfs, 1.0)
    c = jnp.where(finite, chi2(key, safe, (m, dfs.shape[0])) / safe, 1.0)
    out, i = [c[:, 0], c[:, 1:1 + n_diag] * jnp.where(finite[0], safe[1:1 + n_diag] / safe[0], 1.0)], 1 + n_diag
    for _, count in extra:
        out.append(c[:, i:i + count])
        i += count
    return out


def _factor(key, r, diag, n, s: int, activation: str):
    """``L`` (m, s, min(s, n)) from ``r`` and the scaled Bartlett diagonal (Wishart path) or from an explicit X.

    Wishart path: ``L = sqrt(r) (tril(N, -1)/sqrt(n) + diag(sqrt(chi^2_{n-i}/n)))`` = ``sqrt(r/n) B_0``; it is the
    identity matrix at n = inf.
    """
    m = r.shape[0]
    if _wishart_path(n, s, activation):
        B = jnp.tril(normal(key, (m, s, s)), -1) / jnp.sqrt(n) + jnp.sqrt(diag)[..., None] * jnp.eye(s)
        return jnp.sqrt(r)[:, None, None] * B
    X = psi(jnp.sqrt(r)[:, None, None] * normal(key, (m, s, n)), activation)
    if n < s:
        return X / math.sqrt(n)
    return semidefinite_cholesky(empirical_gram(X))


def input_factor(key, m: int, n, s: int, activation: str):
    """Factors ``L`` (m, s, r) of the input Gram ``Gamma = X X^T/n`` of m independent networks, r = min(s, n).

    Wishart path (clip/identity, n >= s; n may be traced): ``L = sqrt(r/n) B_0``, O(s^2) and free of n. Otherwise
    (ReLU, or n < s; n a Python int): explicit ``X = psi(sqrt(r) Xi_0)`` and ``L`` its (semi-definite) Cholesky
    factor, or ``X/sqrt(n)`` when n < s.
    """
    kc, kx = jax.random.split(key)
    r, diag = _chis(kc, m, n, s, activation)
    return _factor(kx, r, diag, n, s, activation)


def _sweep_kinds(widths, n_tokens: int, activation: str):
    """Static plan of a sweep: per width 0 (Wishart path, n traced), the static n (explicit X) or -1 (limit)."""
    kinds = []
    for n in widths:
        if math.isinf(n):
            kinds.append(-1)
        elif _wishart_path(int(n), n_tokens, activation):
            kinds.append(0)
        else:
            kinds.append(int(n))
    return tuple(kinds)


def _sweep_chunk(key, ns, ds, hs, kinds, n_heads: int, s: int, activation: str, m: int, n_seeds: int):
    """One chunk of a sweep: ``(y, v)`` each (n_seeds, len(kinds), m).

    All the randomness of the chunk comes from two calls: one :func:`chi2` over every finite width (``chi^2_n``, the
    Bartlett diagonal ``chi^2_{n-i}`` and the 2H query/value norms ``chi^2_d``) and one normal array sliced into the
    Bartlett off-diagonals, the explicit inputs ``Xi_0`` of the explicit widths, the head logits ``nu`` and the
    output noise (step 3 of :mod:`attnlab.sakai.sampler`). The limit widths (kind -1) draw no chi-square. ``hs`` (None or
    (W,)): the number of heads used at each width (the first ``hs[w]`` of the ``n_heads`` drawn).
    """
    S, H, W = n_seeds, n_heads, len(kinds)
    fin = [w for w, k in enumerate(kinds) if k >= 0]
    kc, kn, kx = jax.random.split(key, 3)
    n_chi = 1 + s + 2 * H
    if fin:
        nf, df = ns[jnp.asarray(fin)], ds[jnp.asarray(fin)]
        dfs = jnp.concatenate([nf[:, None], nf[:, None] - jnp.arange(s), jnp.broadcast_to(df[:, None], (len(fin), 2 * H))],
                              1)
        safe = jnp.maximum(dfs, 1.0)  # explicit widths with n < s: the unused Bartlett entries get df 1
        c = chi2(kc, safe, (S, m, len(fin), n_chi)) / safe
    n_tril = s * (s - 1) // 2
    wis = [w for w, k in enumerate(kinds) if k == 0]
    xs = [w for w, k in enumerate(kinds) if k > 0]
    # ReLU inputs: one normal call per width (it fuses into psi and the Gram reduction; slicing them out of the shared
    # array costs about 15% more CPU on the ReLU preset); clip inputs with n < s (tiny) stay in the shared array
    n_x = 0 if activation == "relu" else s * sum(kinds[w] for w in xs)
    z = normal(kn, (S, m, len(wis) * n_tril + n_x + W * (H * s + 1)))
    Ls, cqs, cvs = [None] * W, [None] * W, [None] * W
    ones = jnp.ones((S, m, H))
    L_inf = jnp.broadcast_to(jnp.asarray(np.linalg.cholesky(_limit_gram(activation, s))), (S, m, s, s))
    for w, k in enumerate(kinds):
        if k < 0:
            Ls[w], cqs[w], cvs[w] = L_inf, ones, ones
        else:
            cw = c[:, :, fin.index(w)]
            cqs[w], cvs[w] = cw[..., 1 + s:1 + s + H], cw[..., 1 + s + H:]
    if wis:  # L = sqrt(r) (tril(N, -1)/sqrt(n) + diag(sqrt(chi^2_{n-i}/n))), all Wishart widths at once
        cw = c[:, :, jnp.asarray([fin.index(w) for w in wis])]  # (S, m, Ww, n_chi)
        n = ns[jnp.asarray(wis)][:, None]
        sel = np.zeros((n_tril, s, s))
        sel[np.arange(n_tril), *np.tril_indices(s, -1)] = 1.0
        low = jnp.einsum("smwk,kij->smwij", z[..., :len(wis) * n_tril].reshape(S, m, len(wis), n_tril), sel)
        diag = cw[..., 1:1 + s] * (n - jnp.arange(s)) / n
        B = low / jnp.sqrt(n)[..., None] + jnp.sqrt(diag)[..., None] * jnp.eye(s)
        Lw = jnp.sqrt(cw[..., 0])[..., None, None] * B
        for j, w in enumerate(wis):
            Ls[w] = Lw[:, :, j]
    i = len(wis) * n_tril
    for w in xs:  # explicit inputs X = psi(sqrt(r) Xi_0), s x n
        k = kinds[w]
        r = c[:, :, fin.index(w), 0]
        if activation == "relu":
            Xi = normal(jax.random.fold_in(kx, w), (S, m, s, k))
        else:
            Xi = z[..., i:i + s * k].reshape(S, m, s, k)
            i += s * k
        X = psi(jnp.sqrt(r)[..., None, None] * Xi, activation)
        if k < s:  # L = X/sqrt(n), padded with zero columns (they add nothing to the logits or to v)
            Ls[w] = jnp.concatenate([X / math.sqrt(k), jnp.zeros((S, m, s, s - k))], -1)
        else:
            Ls[w] = semidefinite_cholesky(empirical_gram(X))
    L, cq, cv = jnp.stack(Ls, 1), jnp.stack(cqs, 1), jnp.stack(cvs, 1)  # (S, W, m, ...)
    rest = z[..., i:].reshape(S, m, W, H * s + 1).swapaxes(1, 2)
    nu = rest[..., :H * s].reshape(S, W, m, H, s)
    v = _variance(nu, L, cq, cv, None if hs is None else jnp.broadcast_to(hs[None, :, None], (S, W, m)))
    return jnp.sqrt(v) * rest[..., -1], v


def _variance(nu, L, cq, cv, active=None):
    """``mean_a cv_a |L^T softmax(sqrt(Gamma_00 cq_a) L nu_a)|^2``; ``L`` (..., s, r), ``nu`` (..., H, r); with
    ``active`` (...) the mean runs over the first ``active`` heads only."""
    g00 = jnp.sum(L[..., 0, :] ** 2, -1)
    logits = jnp.sqrt(g00[..., None, None] * cq[..., None]) * jnp.einsum("...sr,...hr->...hs", L, nu)
    sm = jax.nn.softmax(logits, axis=-1)
    terms = cv * jnp.sum(jnp.einsum("...sr,...hs->...hr", L, sm) ** 2, -1)
    if active is None:
        return jnp.mean(terms, -1)
    return jnp.sum(jnp.where(jnp.arange(terms.shape[-1]) < active[..., None], terms, 0.0), -1) / active


def first_token_variance(key, L, cq, cv):
    """Conditional variance of ``y_0`` given the scores: ``mean_a cv_a |L^T softmax(sqrt(Gamma_00 cq_a) L nu_a)|^2``.

    ``L`` (m, s, r); ``cq``, ``cv`` (m, H) are the chi^2_d/d query and value norms (ones in the n -> infinity limit).
    """
    return _variance(normal(key, cq.shape + (L.shape[-1],)), L, cq, cv)


def chunk_size(n_samples: int, per_sample: int, budget: int | None = None) -> int:
    """Samples per compiled chunk so that one chunk holds about ``budget`` floats: by default 2^22 on a CPU (a chunk's
    arrays stay in cache) and 2^26 on an accelerator (a chunk must fill the device: each holds a few sequential
    steps, such as the rejection loops of the chi-squares, whose cost per step is fixed)."""
    if budget is None:
        budget = 1 << 22 if jax.default_backend() == "cpu" else 1 << 26
    return int(max(1, min(n_samples, budget // max(1, per_sample))))


@functools.partial(jax.jit, static_argnums=(4, 5, 6, 7, 8, 9))
def _first_sweep(key, ns, ds, hs, kinds, n_heads, n_tokens, activation, n_samples, n_seeds):
    s, H, W = n_tokens, n_heads, len(kinds)
    per = n_seeds * (W * (6 * H * s + 3 * s * s + 8 * (1 + s + 2 * H)) + s * sum(k for k in kinds if k > 0))
    size = chunk_size(n_samples, per)
    keys = jax.random.split(key, -(-n_samples // size))
    out = jax.lax.map(lambda k: _sweep_chunk(k, ns, ds, hs, kinds, H, s, activation, size, n_seeds), keys)
    return tuple(jnp.moveaxis(x, 0, 2).reshape(n_seeds, W, -1)[..., :n_samples] for x in out)


def _use_native(method: str, n_tokens: int, activation: str, kinds) -> bool:
    """Whether ``method`` takes the C kernel: it applies for s small, the CPU backend and the kernel compiled (every
    kind of width: Wishart, explicit clip or ReLU inputs, limit; explicit identity inputs, n < s, are left to the JAX
    path)."""
    applies = (n_tokens <= width_native.MAX_TOKENS and not (activation == "identity" and any(k > 0 for k in kinds))
               and jax.default_backend() == "cpu" and width_native.available())
    return width_native.use_native(method, applies, f"n_tokens <= {width_native.MAX_TOKENS}, no explicit identity "
                                                    "inputs (n < s)")


def _native_sweep(key, widths, head_widths, kinds, n_heads: int, n_tokens: int, activation: str, n_samples: int,
                  n_seeds: int, active_heads):
    """:func:`sample_first_token_sweep` by the C kernel of :mod:`attnlab.sakai.native`: one call per (seed, width),
    the stream ``seed * len(widths) + width index`` of a 64-bit seed taken from ``key``."""
    seed = width_native.seed_from_key(key)
    Linf = np.linalg.cholesky(_limit_gram(activation, n_tokens))
    W = len(widths)
    y, v = np.empty((n_seeds, W, n_samples)), np.empty((n_seeds, W, n_samples))
    for i in range(n_seeds):
        for w, (n, d, k) in enumerate(zip(widths, head_widths, kinds)):
            H = n_heads if active_heads is None else int(active_heads[w])
            inputs = "wishart" if k == 0 else activation
            y[i, w], v[i, w] = width_native.first_token(seed, i * W + w, n_samples, n=n, d=d, n_heads=H,
                                                        n_tokens=n_tokens, inputs=inputs,
                                                        limit_factor=Linf if k < 0 else None)
    return jnp.asarray(y), jnp.asarray(v)


def sample_first_token_sweep(key, *, widths, n_heads: int, n_tokens: int = 4, activation: str = "clip",
                             head_widths=None, n_samples: int, n_seeds: int = 1, active_heads=None,
                             method: str = "auto"):
    """Exact ``(y, v)`` of shape (n_seeds, len(widths), n_samples) for a sweep of widths (and per-head widths).

    One compiled program per (pattern of widths, H, s, psi, sizes). On the Wishart path (clip/identity, n >= s) the
    width enters as a traced value and the cost does not depend on n; other widths (ReLU, or n < s) draw their
    explicit input matrix (cost O(s n)). A width ``math.inf`` (with head width inf) draws the n -> infinity limit law
    (input Gram, unit query/value norms) in the same program. ``active_heads`` (one int <= n_heads per
    width): use the first ``active_heads[w]`` of the ``n_heads`` heads drawn at width w (several H in one program;
    the discarded heads cost their draws).

    ``method``: ``"jax"`` draws in one compiled JAX program; ``"native"`` in the C kernel of
    :mod:`attnlab.sakai.native` (float64, its own generators, so other numbers of the same law; ziggurat normals and
    four heads per AVX2 vector at s = 4, which is why the CPU presets use it; ``bench/width.py`` measures it);
    ``"auto"`` (default) takes ``"native"`` where it is available (CPU, n_tokens <= 16, the kernel compiled).
    """
    def as_num(w):
        if isinstance(w, float) and w == math.inf:
            return w
        if not check.is_integer(w) or w < 1:
            raise ValueError(f"every width must be an integer >= 1 or math.inf; got {w!r}")
        return int(w)

    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__len__") or not len(widths):
        raise ValueError(f"widths must be a nonempty sequence of widths; got {widths!r}")
    if head_widths is not None and (not hasattr(head_widths, "__len__") or isinstance(head_widths, str)):
        raise ValueError(f"head_widths must be a sequence of head widths, one per width; got {head_widths!r}")

    widths = tuple(as_num(w) for w in widths)
    head_widths = widths if head_widths is None else tuple(as_num(w) for w in head_widths)
    if len(head_widths) != len(widths):
        raise ValueError(f"head_widths must match widths; got {len(head_widths)} and {len(widths)} entries")
    infinite = [math.isinf(n) or math.isinf(d) for n, d in zip(widths, head_widths)]
    for n, d, inf in zip(widths, head_widths, infinite):
        check_model(n=None if inf else n, n_heads=n_heads, n_tokens=n_tokens, activation=activation,
                    head_width=None if inf else d, n_samples=n_samples)
        if inf and not (math.isinf(n) and math.isinf(d)):
            raise ValueError(f"the limit law needs both width and head width infinite; got n={n}, head_width={d}")
    check_model(n_samples=n_seeds)
    kinds = _sweep_kinds(widths, n_tokens, activation)
    hs = None
    if active_heads is not None:
        if (not hasattr(active_heads, "__len__") or len(active_heads) != len(widths)
                or any(not check.is_integer(h) or not 1 <= h <= n_heads for h in active_heads)):
            raise ValueError(f"active_heads must give one number in [1, n_heads] per width; got {active_heads!r}")
        hs = jnp.asarray(active_heads, jnp.float64)
    if _use_native(method, n_tokens, activation, kinds):
        return _native_sweep(key, widths, head_widths, kinds, n_heads, n_tokens, activation, n_samples, n_seeds,
                             active_heads)
    return _first_sweep(key, jnp.asarray(widths, jnp.float64), jnp.asarray(head_widths, jnp.float64), hs, kinds,
                        n_heads, n_tokens, activation, n_samples, n_seeds)


def sample_first_token(key, *, n: int, n_heads: int, n_tokens: int = 4, activation: str = "clip",
                       head_width: int | None = None, n_samples: int, method: str = "auto"):
    """Exact draws of the official statistic ``y = Y[0, 0]`` and its conditional variance ``v_n`` (both (n_samples,)).

    Same law as ``sample_reference(...)[:, 0, 0]`` (any output coordinate has the same law). Cost O(H s^2) per
    network, independent of n for clip/identity inputs; ReLU inputs cost O(s n) more (explicit X).
    """
    check_model(n=n, head_width=head_width)
    y, v = sample_first_token_sweep(key, widths=(n,), n_heads=n_heads, n_tokens=n_tokens, activation=activation,
                                    head_widths=None if head_width is None else (head_width,), n_samples=n_samples,
                                    method=method)
    return y[0, 0], v[0, 0]


def _chunked(fn, key, n_samples: int, chunk: int):
    """Concatenate ``fn(key_c, chunk)`` over ceil(n_samples/chunk) chunks (``lax.map``), cut to n_samples."""
    n_chunks = max(1, math.ceil(n_samples / chunk))
    size = min(chunk, n_samples)
    out = jax.lax.map(lambda k: fn(k, size), jax.random.split(key, n_chunks))
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:])[:n_samples], out)


@functools.partial(jax.jit, static_argnums=(0, 1, 3, 4))
def _sample(kind: str, params: tuple, key, n_samples: int, chunk: int):
    """Jitted chunked draw of ``_DRAWS[kind](key, m, *params)``; compiled once per (kind, params, sizes)."""
    return _chunked(lambda k, m: _DRAWS[kind](k, m, *params), key, n_samples, chunk)


def heads_given_factor(key, L, d, n_heads: int, n_out: int, scaling: str = "sqrt", B=None, active=None,
                       score_scale=None, pool: bool = False):
    r"""One attention layer applied to m sequences that share its weights, given a factor of their tokens' Gram.

    ``L`` (N, m, s, r): for each of N networks, ``L[:, a]`` is the factor of sequence a's tokens, so that the Gram of
    all ``M = m s`` tokens is ``Gamma = L_flat L_flat^T`` (L_flat = L reshaped (N, M, r)); ``d`` the head width
    (``math.inf``: the n -> infinity limit). Step 4 of :mod:`attnlab.sakai.sampler` with the weights shared by the
    sequences: per head, ``Q^a = L^a Xi_Q``, ``K^a = L^a Xi_K`` with the same ``Xi``, so ``G^a = L^a M L^{aT}/sqrt(d)``
    with one ``M = N B_K^T`` per head for every sequence, and the output columns ``Y^a = H^{-1/2} sum_h F^{h,a} Z^h``
    with ``F^{h,a} = softmax_rows(G^{h,a}) L^a B_V/sqrt(d)`` and one ``Z^h`` (r x n_out) per head. At ``d = inf``
    ``B/sqrt(d) -> I``: ``G^a = L^a N L^{aT}``, the scores of :mod:`attnlab.sakai.joint`. ``scaling="linear"``
    divides the scores by ``sqrt(d)`` once more (1/d scaling; uniform attention at ``d = inf``). ``d`` may be traced
    (then ``d >= r`` is the caller's to ensure); ``B`` (N, H, 2, r, r): the key and value Bartlett factors (df d),
    drawn here when None. ``active`` (may be traced): use the first ``active`` of the ``n_heads`` heads drawn (one
    compiled program for several H; the others cost their draws). ``score_scale`` (may be traced): a factor on the
    scores (``1/sqrt(d)`` gives the 1/d scaling in the same compiled program). ``pool``: the outputs' mean over the
    s tokens of each sequence instead (Y (N, m, 1, n_out), C (N, m, m)), formed before the M x M products.

    Returns ``(Y, C)``: Y (N, m, s, n_out) and C (N, M, M) ``= (1/H) sum_h F^h F^{hT}``, the covariance of each
    output column given the attention and value Grams (the columns are iid N(0, C) given them).
    """
    N, m, s, r = L.shape
    kb, kv, kn, kz = jax.random.split(key, 4)
    shape = (N, n_heads)
    P = None
    static = isinstance(d, (int, float))
    if static and math.isinf(d):
        M = normal(kn, shape + (r, r))
        Z = normal(kz, shape + (r, n_out))
        root = 1.0
    elif not static or d >= r:
        B = bartlett(kb, d, r, shape + (2,)) if B is None else B
        M = normal(kn, shape + (r, r)) @ jnp.swapaxes(B[:, :, 0], -1, -2)
        P = B[:, :, 1]
        Z = normal(kz, shape + (r, n_out))
        root = jnp.sqrt(d) if not static else math.sqrt(d)
    else:
        xi = normal(kn, (3,) + shape + (r, d))
        M = xi[0] @ jnp.swapaxes(xi[1], -1, -2)
        P = xi[2]
        Z = normal(kz, shape + (d, n_out))
        root = math.sqrt(d)
    if scaling not in ("sqrt", "linear"):
        raise ValueError(f"scaling must be 'sqrt' (1/sqrt(n)) or 'linear' (1/n); got {scaling!r}")
    Lh = L[:, None]  # (N, 1, m, s, r)
    G = Lh @ M[:, :, None] @ jnp.swapaxes(Lh, -1, -2) / root
    if scaling == "linear":
        G = jnp.zeros_like(G) if static and math.isinf(d) else G / root
    if score_scale is not None:
        G = G * score_scale
    F = jax.nn.softmax(G, axis=-1) @ Lh
    if P is not None:
        F = F @ P[:, :, None] / root  # (N, H, m, s, r or d)
    if pool:
        F = jnp.mean(F, -2, keepdims=True)
        s = 1
    Ff = F.reshape(N, n_heads, m * s, F.shape[-1])
    if active is None:
        Y = jnp.sum(F @ Z[:, :, None], 1) / math.sqrt(n_heads)
        return Y, jnp.mean(Ff @ jnp.swapaxes(Ff, -1, -2), 1)
    w = (jnp.arange(n_heads) < active).astype(F.dtype)
    Y = jnp.einsum("h,nhmso->nmso", w, F @ Z[:, :, None]) / jnp.sqrt(active)
    return Y, jnp.einsum("h,nhij->nij", w, Ff @ jnp.swapaxes(Ff, -1, -2)) / active


def _heads_tokens(key, L, d: int, n_heads: int, n_out: int):
    """All-token outputs (m, s, n_out) and their conditional covariance (m, s, s) (step 4 of
    :mod:`attnlab.sakai.sampler`): :func:`heads_given_factor` with one sequence per network."""
    Y, C = heads_given_factor(key, L[:, None], d, n_heads, n_out)
    return Y[:, 0], C


def sample_tokens(key, *, n: int, n_heads: int, n_tokens: int = 4, activation: str = "clip",
                  head_width: int | None = None, n_samples: int, n_out: int = 1, chunk: int = 5_000):
    """Exact joint draws of ``Y[:, :n_out]`` (all s tokens, n_out output features) of n_samples networks.

    Returns ``(Y, C)``: Y (n_samples, s, n_out) with the law of ``sample_reference(..., n_out=n_out)``, and C
    (n_samples, s, s), the conditional covariance of each output column given the attention and value Grams (the
    columns are conditionally iid N(0, C): exchangeable, not independent, across output features).
    """
    check_model(n=n, n_heads=n_heads, n_tokens=n_tokens, activation=activation, head_width=head_width,
                n_samples=n_samples)
    check.count("n_out", n_out)
    check.count("chunk", chunk)
    d = n if head_width is None else head_width

    return _sample("tokens", (n, d, n_heads, n_tokens, activation, n_out), key, n_samples, chunk)


def _draw_tokens(k, m, n, d, n_heads, n_tokens, activation, n_out):
    kl, kh = jax.random.split(k)
    return _heads_tokens(kh, input_factor(kl, m, n, n_tokens, activation), d, n_heads, n_out)


def sample_scores(key, *, n: int, n_tokens: int = 4, activation: str = "clip", n_samples: int,
                  chunk: int = 50_000, method: str = "auto"):
    r"""Exact score probe: ``G_00 = Gamma_00 sqrt(chi^2_n/n) N(0,1)`` at 1/sqrt(n) scaling, and ``G_00/sqrt(n)``.

    For psi = identity ``Gamma_00 = (chi^2_n/n)(chi^2'_n/n)`` and ``Var G_00 = (1 + 2/n)^2``.
    Returns ``(g_sqrt, g_lin)`` like :func:`attnlab.sakai.reference.sample_reference_scores`. ``method`` as in
    :func:`sample_scores_sweep`.
    """
    check_model(n=n, n_tokens=n_tokens, activation=activation, n_samples=n_samples)
    check.count("chunk", chunk)
    if method != "jax":
        g, gl = sample_scores_sweep(key, widths=(n,), n_tokens=n_tokens, activation=activation, n_samples=n_samples,
                                    chunk=chunk, method=method)
        return g[0], gl[0]
    return _sample("scores", (n, n_tokens, activation), key, n_samples, chunk)


def _draw_scores(k, m, n, n_tokens, activation):
    kc, kx, ke = jax.random.split(k, 3)
    r, diag, cq = _chis(kc, m, n, n_tokens, activation, ((n, 1),))
    g00 = jnp.sum(_factor(kx, r, diag, n, n_tokens, activation)[:, 0, :] ** 2, -1)
    g = g00 * jnp.sqrt(cq[:, 0]) * normal(ke, (m,))
    return g, g / jnp.sqrt(n)


def sample_scores_sweep(key, *, widths, n_tokens: int = 4, activation: str = "clip", n_samples: int,
                        chunk: int = 50_000, method: str = "auto"):
    """:func:`sample_scores` at several widths: ``(g_sqrt, g_lin)``, each (len(widths), n_samples).

    ``method``: ``"jax"``: on the Wishart path (clip/identity, every n >= s) the widths are traced values of one
    compiled program, otherwise each width is drawn by :func:`sample_scores`; ``"native"``: the C kernel of
    :mod:`attnlab.sakai.native` (the network's input factor, then a chi-square and a normal; no compilation; other
    numbers of the same law); ``"auto"``
    (default) takes ``"native"`` where it is available (CPU, n_tokens <= 16, the kernel compiled).
    """
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__len__") or not len(widths):
        raise ValueError(f"widths must be a nonempty sequence of widths; got {widths!r}")
    for n in widths:
        check_model(n=n, n_tokens=n_tokens, activation=activation, n_samples=n_samples)
    widths = tuple(int(n) for n in widths)
    kinds = _sweep_kinds(widths, n_tokens, activation)
    if _use_native(method, n_tokens, activation, kinds):
        seed = width_native.seed_from_key(key)
        g = np.stack([width_native.scores(seed, w, n_samples, n=n, n_tokens=n_tokens,
                                          inputs="wishart" if k == 0 else activation)
                      for w, (n, k) in enumerate(zip(widths, kinds))])
        return jnp.asarray(g), jnp.asarray(g / np.sqrt(np.asarray(widths, np.float64))[:, None])
    if all(_wishart_path(n, n_tokens, activation) for n in widths):
        return _scores_sweep(key, jnp.asarray(widths, jnp.float64), n_tokens, activation, n_samples, chunk)
    parts = [sample_scores(k, n=n, n_tokens=n_tokens, activation=activation, n_samples=n_samples, chunk=chunk,
                           method="jax") for k, n in zip(jax.random.split(key, len(widths)), widths)]
    return tuple(jnp.stack([p[i] for p in parts]) for i in range(2))


@functools.partial(jax.jit, static_argnums=(2, 3, 4, 5))
def _scores_sweep(key, ns, n_tokens, activation, n_samples, chunk):
    def one(k, n):
        return _chunked(lambda kk, m: _draw_scores(kk, m, n, n_tokens, activation), k, n_samples, chunk)

    return jax.vmap(one)(jax.random.split(key, ns.shape[0]), ns)


_DRAWS = {"tokens": _draw_tokens, "scores": _draw_scores}


def clip_event_probability(n: int) -> float:
    r"""``P(|W_i h| > C)`` for one coordinate: ``E[2 Phi(-C/sqrt(r))]``, r ~ chi^2_n/n (numerical quadrature).

    Bounds the total-variation gap between the clip and identity input laws by ``s n`` times this value.
    """
    import scipy.integrate as si
    import scipy.special as sp
    import scipy.stats as st

    def integrand(x):  # log-space product of the chi^2_n/n density and the normal tail
        if x <= 0:
            return 0.0
        return math.exp(st.chi2.logpdf(x * n, n) + math.log(n) + math.log(2.0) + sp.log_ndtr(-CLIP / math.sqrt(x)))

    # the integrand peaks where the chi^2 density meets the tail; integrate in pieces over a wide range
    edges = np.concatenate([[0.0], np.geomspace(1e-3, 1e5, 60)])
    return float(sum(si.quad(integrand, a, b, limit=200, epsabs=0.0, epsrel=1e-8)[0] for a, b in zip(edges[:-1], edges[1:])))
