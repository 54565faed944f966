r"""The joint law of a multi-head attention layer's outputs over many input sequences, at infinite width (finite H)
and at finite width (exactly), and of deep stacks ``[attention, relu, attention, ...]``.

Sakai, Karakida, Imaizumi (2025), arXiv:2506.00846: the layer of Example 3.1 / Algorithm 1 and the paper's
Tensor-Programs limit ("Gaussian conditional on random similarity scores", stated there for one input sequence; the
paper's theorem numbers are not cited here). Below, its derivation carried out for m sequences that share the
weights.

**Setting.** m sequences of s tokens, ``x^a_i`` in R^n (a = 1..m, i = 1..s), with the token-token kernel
``K_{(a,i),(b,j)} = lim x^a_i . x^b_j / n`` (M x M, M = m s; block ``K^{ab}`` is s x s). For data ``U`` (m, s, d_in)
embedded by ``x = W_E u/sqrt(d_in)`` (W_E iid N(0, 1)), ``K = U U^T/d_in``
(:func:`attnlab.sakai.kernel.token_kernel`). Per head h: ``W_Q^h, W_K^h, W_V^h, W_O^h`` with entries of variance
1/n, scores ``G^{h,a} = Q^{h,a} K^{h,a T}/sqrt(n)``, ``Y^a = H^{-1/2} sum_h softmax_rows(G^{h,a}) V^{h,a} W_O^h``.

**Derivation in the Tensor-Programs framework** (Netsor; Yang 2019, "Tensor Programs I"), one step per operation
of Algorithm 1, as in the paper but with the index set of the program's vectors grown from the s tokens of one
sequence to the M tokens of all sequences:

1. *MatMul with the shared weights.* ``q^{h,a}_i = W_Q^h x^a_i`` (and k, v likewise) are G-vars of one matrix for all
   (a, i), so their coordinates converge to a centred Gaussian vector over the M tokens with covariance K;
   ``W_Q^h, W_K^h, W_V^h`` and the heads are independent matrices, so these limits are independent of each other.
2. *Scores.* ``p^{h,a}_{ij} = q^{h,a}_i . k^{h,a}_j / sqrt(n)`` is an inner product of two independent G-vars at
   ``1/sqrt(n)`` scaling, not ``1/n``: its limit is not the (zero) expectation but a Gaussian fluctuation. The
   paper's limit theorem for these scores (a central limit theorem over the n coordinates, jointly with the program)
   applies verbatim to the ``m s^2`` scores of all sequences: they converge jointly to a centred Gaussian family,
   independent across heads and of the G-vars' limits, with

   .. math:: \mathrm{Cov}(p^{h,a}_{ij}, p^{h,b}_{kl}) = \mathbb E[Z^{q^a_i}Z^{q^b_k}]\,\mathbb E[Z^{k^a_j}Z^{k^b_l}]
             = K^{ab}_{ik} K^{ab}_{jl}.

   So the scores of different sequences are correlated through the **cross-Gram blocks** ``K^{ab}``; for a = b this
   is the one-sequence law ``Cov = Sigma (x) Sigma`` of :mod:`attnlab.sakai.limit`.
3. *Softmax and values.* ``o^{h,a}_i = sum_j softmax(p^{h,a}_{i,:})_j v^{h,a}_j``: a combination of G-vars with
   coefficients that are functions of the random scores, ``Z^{o^{h,a}_i} = sum_j S^{h,a}_{ij} Z^{v^{h,a}_j}``.
4. *MatMul with the fresh W_O^h and the head sum.* Conditionally on the scores the output is Gaussian (the paper's
   "Gaussian conditional on random similarity scores"), with

   .. math:: y \mid \{p^h\} \sim N\big(0,\ C(p)\big),\qquad
             C(p) = \frac1H\sum_{h=1}^H S^h K S^{h\top},\qquad S^h = \mathrm{blockdiag}(S^{h,1},\dots,S^{h,m}),

   i.e. ``Cov(y^a_i, y^b_k | p) = (1/H) sum_h (S^{h,a} K^{ab} S^{h,b T})_{ik}``, jointly over all M tokens. The n
   output coordinates of one network are iid given the scores, which they share.

At finite H the joint law is this **Gaussian mixture over the heads' score matrices**: not Gaussian (its projections
have positive excess kurtosis ``3 Var(w^T C w)/(w^T E[C] w)^2``, of order 1/H), with the same covariance
``E[C] = E[S K S^T]`` for every H. As H -> infinity, ``C(p) -> E[S K S^T]`` by the law of large numbers over the
heads: the output is the Gaussian process of :func:`attnlab.sakai.kernel.attention_kernel`.

**Sampling it exactly.** With ``L L^T = K`` (L: M x r, rows ``L^a`` of sequence a), ``p^{h,a} = L^a N^h L^{aT}`` with
one N^h (r x r, iid N(0, 1)) per head shared by the sequences has the covariance of step 2, and the values are
``z^{h} = L zeta^h``; so ``y = H^{-1/2} sum_h S^h L zeta^h`` and ``C = (1/H) sum_h (S^h L)(S^h L)^T``
(:func:`attnlab.sakai.sampler.heads_given_factor` at head width ``d = inf``).

**Deep stacks.** The next layer's Gram is ``lim y . y'/n = C(p)``: random at finite H but fixed given the scores. A
dense layer maps it by the closed forms of :mod:`attnlab.sakai.kernel`; the next attention layer is Gaussian given
its own scores, with the score covariance of step 2 built from that random Gram. Layer by layer the output is
Gaussian conditional on all the scores so far; :func:`sample_joint_limit` composes these steps. As H -> infinity
every Gram is deterministic and the composition is :func:`attnlab.sakai.kernel.stack_kernel`.

**Finite width, exactly** (:func:`sample_network`): the reduction of :mod:`attnlab.sakai.sampler` with the Gram of
all M tokens. The embedding's Gram is ``U (B_E B_E^T/n) U^T/d_in`` (B_E a Bartlett factor, df n); an attention layer
given a factor L of its input Gram is :func:`attnlab.sakai.sampler.heads_given_factor` (``d = n``), its output
columns iid ``N(0, C)`` given the heads, so its Gram is ``L_C (B B^T/n) L_C^T`` (B Bartlett, df n); a dense layer
multiplies the factor by ``B/sqrt(n)``; a ReLU or erf layer draws its M x n pre-activations ``L Xi`` explicitly.
Equal in law to the brute-force network :func:`attnlab.sakai.reference.sample_reference_stack`, at a cost free of n
except for the ReLU/erf layers (O(M^2 n)).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import _validate as check
from attnlab import programs
from attnlab._random import bartlett, chi2, normal
from attnlab.sakai.kernel import closed_form, token_kernel
from attnlab.sakai.model import check_layers, check_model, layer_activation
from attnlab.sakai.sampler import _chunked, chunk_size, heads_given_factor

__all__ = ["sample_joint_limit", "sample_network", "gram_factor", "projection_excess_kurtosis", "mixture_excess_kurtosis"]


def gram_factor(G):
    """A factor ``L`` with ``L L^T = G`` for a batch of PSD M x M matrices: ``V sqrt(max(lambda, 0))`` (eigh), which
    is exact for singular G (a rank-deficient head average, repeated tokens)."""
    lam, V = jnp.linalg.eigh(G)
    return V * jnp.sqrt(jnp.maximum(lam, 0.0))[..., None, :]


def _static_inf(n) -> bool:
    return isinstance(n, (int, float)) and math.isinf(n)


def _wishart_factor(key, L, n, B=None):
    """A factor of ``L (Xi Xi^T/n) L^T`` (Xi: r x n iid N(0, 1)), the Gram of n columns iid N(0, L L^T):
    ``L B/sqrt(n)`` with B Bartlett (df n, given or drawn here) when n >= r, else ``L Xi/sqrt(n)``; L at n = inf."""
    if _static_inf(n):
        return L
    N, _, r = L.shape
    if B is not None or not isinstance(n, int) or n >= r:
        B = bartlett(key, n, r, (N,)) if B is None else B
        return L @ B / jnp.sqrt(n)
    return L @ normal(key, (N, r, n)) / math.sqrt(n)


def _bartlett_plan(layers: tuple, d_in: int, M: int, n_heads: int) -> list[tuple[int, tuple]]:
    """The Bartlett factors (dimension r, batch shape) of one finite-width network, in the order :func:`_stack` uses
    them: the embedding's, then per attention layer the heads' key and value factors and (unless last) its output
    Gram's, per dense layer (unless last) its Gram's."""
    plan, r = [(d_in, ())], d_in
    for i, name in enumerate(layers):
        last = i == len(layers) - 1
        if name == "attention":
            plan.append((r, (n_heads, 2)))
            r = M
            if not last:
                plan.append((M, ()))
        elif name == "dense":
            if not last:
                plan.append((r, ()))
        else:
            r = M
    return plan


def _bartletts(key, n, plan, size: int):
    """Every Bartlett factor of ``plan`` for ``size`` networks from one chi-square call (one rejection loop,
    compiled once) and one normal call: ``B_ii = sqrt(chi^2_{n-i})``, ``B_ij ~ N(0, 1)`` for i > j."""
    kc, kn = jax.random.split(key)
    counts = [r * math.prod(shape) for r, shape in plan]
    dfs = jnp.concatenate([jnp.tile(n - jnp.arange(r, dtype=jnp.float64), math.prod(shape)) for r, shape in plan])
    chis = chi2(kc, dfs, (size, sum(counts)))
    lows = normal(kn, (size, sum(c * r for c, (r, _) in zip(counts, plan))))
    out, i, j = [], 0, 0
    for (r, shape), c in zip(plan, counts):
        diag = jnp.sqrt(chis[:, i:i + c]).reshape((size,) + shape + (r,))
        low = jnp.tril(lows[:, j:j + c * r].reshape((size,) + shape + (r, r)), -1)
        out.append(low + diag[..., :, None] * jnp.eye(r))
        i, j = i + c, j + c * r
    return out


def _stack(key, L, n, m: int, s: int, n_heads: int, layers: tuple, n_out: int, scaling: str, B=None, active=None,
           score_scale=None, pool: bool = False):
    """Draws ``(Y, C)`` of N networks from the factor L (N, M, r) of the first layer's input Gram; ``B``: an iterator
    over the Bartlett factors of :func:`_bartlett_plan` after the embedding's (None: each drawn where needed);
    ``active``: the number of the ``n_heads`` drawn heads used by every attention layer (None: all);
    ``score_scale``: a factor on every layer's scores (None: 1); ``pool``: the last (attention) layer's outputs
    averaged over each sequence's tokens (Y (N, m, 1, n_out), C (N, m, m))."""
    N = L.shape[0]
    keys = jax.random.split(key, 2 * len(layers))
    nxt = (lambda: None) if B is None else (lambda: next(B))
    Y = C = None
    for i, name in enumerate(layers):
        last = i == len(layers) - 1
        k1, k2 = keys[2 * i], keys[2 * i + 1]
        if name == "attention":
            Y, C = heads_given_factor(k1, L.reshape(N, m, s, -1), n, n_heads, n_out, scaling, B=nxt(), active=active,
                                      score_scale=score_scale, pool=pool and last)
            if not last:
                L = _wishart_factor(k2, gram_factor(C), n, nxt())
            continue
        if last:  # the output columns given the input Gram, and their conditional second moment
            C = jax.vmap(closed_form(name))(L @ jnp.swapaxes(L, -1, -2))
            Y = layer_activation(name)(L @ normal(k1, (N, L.shape[-1], n_out))).reshape(N, m, s, n_out)
        elif name == "dense":
            L = _wishart_factor(k1, L, n, nxt())
        elif _static_inf(n):
            L = gram_factor(jax.vmap(closed_form(name))(L @ jnp.swapaxes(L, -1, -2)))
        else:
            X = layer_activation(name)(L @ normal(k1, (N, L.shape[-1], n)))
            L = gram_factor(X @ jnp.swapaxes(X, -1, -2) / n)
    return Y, C


def _check(n_heads, n_tokens, n_samples, n_out, layers, scaling, readout=None, max_heads=None, chunk=None):
    check_model(n_heads=n_heads, n_tokens=n_tokens, n_samples=n_samples)
    if readout not in (None, "mean"):
        raise ValueError(f"readout must be None (every token) or 'mean' (each sequence's token mean); got {readout!r}")
    check.count("n_out", n_out)
    if max_heads is not None and check.count("max_heads", max_heads) < n_heads:
        raise ValueError(f"max_heads must be >= n_heads; got max_heads={max_heads}, n_heads={n_heads}")
    if chunk is not None:
        check.count("chunk", chunk)
    if scaling not in ("sqrt", "linear"):
        raise ValueError(f"scaling must be 'sqrt' (1/sqrt(n)) or 'linear' (1/n); got {scaling!r}")
    layers = check_layers(layers)
    if readout is not None and layers[-1] != "attention":
        raise ValueError("readout='mean' needs an attention layer last")
    return layers


def sample_joint_limit(key, K, *, n_tokens: int, n_heads: int, layers=("attention",), n_samples: int,
                       n_out: int = 1, scaling: str = "sqrt", max_heads: int | None = None, readout: str | None = None,
                       chunk: int | None = None):
    r"""Exact draws of the infinite-width joint law (finite H) of a stack's outputs on m sequences (module docstring).

    ``K`` (M x M, M = m s): the token-token kernel of the inputs of the first layer. Returns ``(Y, C)``: Y
    (n_samples, m, s, n_out), ``n_out`` output coordinates of one network (iid given the scores), and C
    (n_samples, M, M), their covariance given the scores (for a last dense/ReLU/erf layer: their second moment given
    the scores of the layers before). ``E C`` is the joint covariance; with one attention layer it is
    :func:`attnlab.sakai.kernel.attention_kernel`'s for every H. ``max_heads`` (>= n_heads): draw that many heads per
    layer and use the first ``n_heads`` (same law; calls with several H then share one compiled program).
    ``readout="mean"``: each sequence's mean over its tokens instead (Y (n_samples, m, 1, n_out), C (n_samples, m,
    m)): the features of a readout of the token mean.
    """
    layers = _check(n_heads, n_tokens, n_samples, n_out, layers, scaling, readout, max_heads, chunk)
    K = np.asarray(K, np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] < 1 or K.shape[0] % n_tokens:
        raise ValueError(f"K must be M x M with M a multiple of n_tokens = {n_tokens}; got {K.shape}")
    check.psd("K", K)
    lam, V = np.linalg.eigh(K)
    keep = lam > 1e-12 * max(float(lam.max()), 1e-300)  # the rank of K: r columns (dropped: below 1e-12 relative)
    L0 = V[:, keep] * np.sqrt(lam[keep]) if keep.any() else np.zeros((K.shape[0], 1))
    if max_heads is not None and max_heads < n_heads:
        raise ValueError(f"max_heads must be >= n_heads; got max_heads={max_heads}, n_heads={n_heads}")
    H = n_heads if max_heads is None else int(max_heads)
    active = None if max_heads is None else float(n_heads)  # host values: no program to move them
    return _limit(key, np.asarray(L0), active, K.shape[0] // n_tokens, n_tokens, H, layers, n_samples, n_out,
                  scaling, readout == "mean", chunk or chunk_size(n_samples, 8 * H * K.shape[0] ** 2))


@functools.partial(programs.jit, static_argnums=tuple(range(3, 12)))
def _limit(key, L0, active, m, s, n_heads, layers, n_samples, n_out, scaling, pool, chunk):
    def draw(k, size):
        return _stack(k, jnp.broadcast_to(L0, (size,) + L0.shape), math.inf, m, s, n_heads, layers, n_out, scaling,
                      active=active, pool=pool)

    return _chunked(draw, key, n_samples, chunk)


def sample_network(key, U, *, n, n_heads: int, layers=("attention",), n_samples: int, n_out: int = 1,
                   scaling: str = "sqrt", max_heads: int | None = None, readout: str | None = None,
                   chunk: int | None = None):
    r"""Exact draws of the finite-width network on the sequences ``U`` (m, s, d_in): the law of
    :func:`attnlab.sakai.reference.sample_reference_stack` (embedding ``U W_E/sqrt(d_in)``, then ``layers``, width n,
    H full-rank heads), by the reduction of the module docstring.

    Returns ``(Y, C)`` as :func:`sample_joint_limit`: Y (n_samples, m, s, n_out) output coordinates and C
    (n_samples, M, M) their covariance given the network's attention and value Grams (``E C`` is the finite-width
    covariance of an output coordinate, the brute force's ``E[X X^T/n]``). ``n = math.inf`` gives
    :func:`sample_joint_limit` on ``K = U U^T/d_in``. ``max_heads`` as in :func:`sample_joint_limit`; without ReLU or
    erf layers before the last, the width is a traced value too, so one compiled program serves every (n, H).
    ``readout`` as in :func:`sample_joint_limit`.
    """
    m, s, d_in = check.shape("U", U, (None, None, None))
    layers = _check(n_heads, s, n_samples, n_out, layers, scaling, readout, max_heads, chunk)
    if min(m, s, d_in) < 1:
        raise ValueError(f"U must hold at least one sequence of one token of dimension >= 1; got shape {(m, s, d_in)}")
    U = np.asarray(check.real("U", U, sequence=True), np.float64)
    if isinstance(n, float) and n == math.inf:
        return sample_joint_limit(key, token_kernel(U), n_tokens=s, n_heads=n_heads, layers=layers,
                                  n_samples=n_samples, n_out=n_out, scaling=scaling, max_heads=max_heads,
                                  readout=readout, chunk=chunk)
    check_model(n=n)
    n = int(n)
    M = m * s
    need = max(r for r, _ in _bartlett_plan(layers, d_in, M, 1))  # the Bartlett factors' dimensions (df n)
    if n < need:
        raise ValueError(f"the exact sampler needs n >= {need} here (d_in, and m s = {M} after an attention or dense "
                         f"layer that is not last); got n={n} (the brute force attnlab.sakai.reference."
                         "sample_reference_stack has no such bound)")
    if max_heads is not None and max_heads < n_heads:
        raise ValueError(f"max_heads must be >= n_heads; got max_heads={max_heads}, n_heads={n_heads}")
    H = n_heads if max_heads is None else int(max_heads)
    active = None if max_heads is None else float(n_heads)  # host values: no program to move them
    explicit = any(x in ("relu", "erf") for x in layers[:-1])
    per = M * (8 * H * M + (n if explicit else 0) + 8 * d_in)
    # without explicit (ReLU/erf) layers the width is a traced value (and 1/n scaling a traced factor on the scores):
    # one compiled program for every n, H and scaling
    U0 = np.asarray(U.reshape(M, d_in) / math.sqrt(d_in))
    chunk = chunk or chunk_size(n_samples, per)
    pool = readout == "mean"
    if explicit:
        return _network_static(key, U0, n, active, m, s, H, layers, n_samples, n_out, scaling, pool, chunk)
    factor = 1.0 if scaling == "sqrt" else 1.0 / math.sqrt(n)
    return _network(key, U0, float(n), active, factor, m, s, H, layers, n_samples, n_out, pool, chunk)


@functools.partial(programs.jit, static_argnums=tuple(range(5, 13)))
def _network(key, U0, n, active, factor, m, s, n_heads, layers, n_samples, n_out, pool, chunk):
    return _network_draws(key, U0, n, active, m, s, n_heads, layers, n_samples, n_out, "sqrt", pool, chunk, factor)


@functools.partial(programs.jit, static_argnums=(2,) + tuple(range(4, 13)))
def _network_static(key, U0, n, active, m, s, n_heads, layers, n_samples, n_out, scaling, pool, chunk):
    return _network_draws(key, U0, n, active, m, s, n_heads, layers, n_samples, n_out, scaling, pool, chunk)


def _network_draws(key, U0, n, active, m, s, n_heads, layers, n_samples, n_out, scaling, pool, chunk, factor=None):
    plan = _bartlett_plan(layers, U0.shape[1], m * s, n_heads)

    def draw(k, size):
        kb, kl = jax.random.split(k)
        B = iter(_bartletts(kb, n, plan, size))
        L0 = _wishart_factor(None, jnp.broadcast_to(U0, (size,) + U0.shape), n, next(B))  # U (B_E B_E^T/n) U^T/d_in
        return _stack(kl, L0, n, m, s, n_heads, layers, n_out, scaling, B, active, factor, pool)

    return _chunked(draw, key, n_samples, chunk)


def projection_excess_kurtosis(C, w) -> tuple[float, float]:
    """Excess kurtosis of ``w^T y`` under the Gaussian mixture ``y | C ~ N(0, C)`` from draws of C (N, M, M), and its
    standard error: ``3 Var(v)/E[v]^2`` with ``v = w^T C w`` (0 for a Gaussian; of order 1/H for one attention
    layer), the SE by the delta method on ``(E v, E v^2)``."""
    N, M, _ = check.shape("C", C, (None, None, None))
    check.shape("w", w, (M,))
    if N < 2:
        raise ValueError(f"C must hold at least 2 draws (for a standard error); got {N}")
    return mixture_excess_kurtosis(np.einsum("i,nij,j->n", np.asarray(w), np.asarray(C), np.asarray(w)))


def mixture_excess_kurtosis(v) -> tuple[float, float]:
    """Excess kurtosis of a Gaussian mixture ``x | v ~ N(0, v)`` from draws of its variance ``v`` (N,), and its
    standard error: ``3 Var(v)/E[v]^2``, the SE by the delta method on ``(E v, E v^2)``
    (:func:`projection_excess_kurtosis` with ``v = w^T C w``)."""
    v = np.asarray(v, dtype=float)
    m1, m2 = v.mean(), np.mean(v**2)
    grad = np.array([-6.0 * m2 / m1**3, 3.0 / m1**2])
    cov = np.cov(np.stack([v, v**2])) / v.size
    return float(3.0 * (m2 / m1**2 - 1.0)), float(np.sqrt(grad @ cov @ grad))
