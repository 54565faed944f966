r"""Finite-width reference sampler: the multi-head attention layer exactly as the official code runs it.

Sakai, Karakida, Imaizumi (2025), arXiv:2506.00846, Algorithm 1 (Example 3.1); official ``single_run`` of
``src/multihead_attention.py`` (full rank), ``src/low_rank_attention.py`` (low rank), ``multihead_attention_relu.py``
(ReLU inputs) and ``src/score_distribution.py`` (score probe). For one network draw:

.. math::

    h \sim N(0, I_n),\quad x_i = \psi(W_i h),\quad Q^a = X W_Q^a,\ K^a = X W_K^a,\ V^a = X W_V^a,\\
    G^a = Q^a K^{a\top}/\sqrt{d},\quad A^a = \mathrm{softmax}_{\text{rows}}(G^a),\quad
    Y = H^{-1/2} \textstyle\sum_a A^a V^a W_O^a .

Notation: ``n`` is the width, ``s = n_tokens`` (rows of X), ``H = n_heads``, ``d`` the per-head width
(``d = n`` full rank; ``d = head_width = n_H`` low rank). ``W_i`` (n x n), ``W_Q, W_K, W_V`` (n x d) have variance
1/n; ``W_O`` (d x n) has variance 1/d. Everything is redrawn per network and X is shared by the heads.

This is the brute-force path (``(s + 4H) n^2`` normals per network): slow, obviously correct, kept for tests and
benchmarks. The exact fast sampler with the same law is :mod:`attnlab.sakai.sampler`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from attnlab import _validate as check
from attnlab import programs
from attnlab.sakai.model import check_layers, check_model, layer_activation, psi

__all__ = ["reference_network", "sample_reference", "sample_reference_first", "sample_reference_scores",
           "reference_stack", "sample_reference_stack"]


def _split_normals(z, n: int, d: int, n_heads: int, n_tokens: int):
    """Slice one network's flat normal vector into ``h`` (n), ``W_in`` (s, n, n) and the head weights
    ``W_Q, W_K, W_V`` (H, n, d) and ``W_O`` (H, d, n), all standard (unscaled)."""
    s, H = n_tokens, n_heads
    sizes = [n, s * n * n, H * n * d, H * n * d, H * n * d, H * d * n]
    parts, i = [], 0
    for size in sizes:
        parts.append(z[i:i + size])
        i += size
    h, W_in, Wq, Wk, Wv, Wo = parts
    return (h, W_in.reshape(s, n, n), Wq.reshape(H, n, d), Wk.reshape(H, n, d), Wv.reshape(H, n, d),
            Wo.reshape(H, d, n))


def _n_normals(n: int, d: int, n_heads: int, n_tokens: int) -> int:
    return n + n_tokens * n * n + 4 * n_heads * n * d


def _network(z, n: int, n_heads: int, n_tokens: int, activation: str, d: int, n_active=None):
    """The layer output ``Y`` (s x n) from one network's standard normals ``z`` (the weights, scaled as above).

    With ``n_active`` (may be traced) only the first ``n_active`` of the ``n_heads`` drawn heads enter the layer
    (the others are drawn and discarded), so one compiled program serves several numbers of heads.
    """
    h, W_in, Wq, Wk, Wv, Wo = _split_normals(z, n, d, n_heads, n_tokens)
    if n_active is not None:
        Wo = Wo * (jnp.arange(n_heads) < n_active)[:, None, None]
    X = psi(W_in @ h / math.sqrt(n), activation)  # (s, n): row i is psi(W_i h)
    return _attention(X, Wq, Wk, Wv, Wo, n, d, n_heads if n_active is None else n_active)


def _attention(X, Wq, Wk, Wv, Wo, n: int, d: int, H, scaling: str = "sqrt"):
    """The multi-head layer on tokens ``X`` (..., s, n) (leading axes: sequences sharing the weights) with the heads'
    standard weights ``Wq, Wk, Wv`` (h, n, d) and ``Wo`` (h, d, n): ``H^{-1/2} sum_a A^a V^a W_O^a`` with the
    scores ``Q^a K^{aT}/sqrt(d)`` (``scaling="linear"``: ``/d``), every weight scaled as in Algorithm 1."""
    Q = jnp.einsum("...sn,hnd->h...sd", X, Wq) / math.sqrt(n)
    K = jnp.einsum("...sn,hnd->h...sd", X, Wk) / math.sqrt(n)
    V = jnp.einsum("...sn,hnd->h...sd", X, Wv) / math.sqrt(n)
    A = jax.nn.softmax(Q @ jnp.swapaxes(K, -1, -2) / (math.sqrt(d) if scaling == "sqrt" else d), axis=-1)
    return jnp.einsum("h...st,h...td,hdn->...sn", A, V, Wo) / math.sqrt(d) / jnp.sqrt(H)


def reference_network(key, n: int, n_heads: int, n_tokens: int, activation: str = "clip",
                      head_width: int | None = None):
    """One network draw: the full output ``Y`` (s x n) of the layer, computed in full as the official code does.

    All ``n + s n^2 + 4 H n d`` weights come from one normal draw (one random call: compile time), sliced into
    ``h``, the ``W_i`` and the per-head ``W_Q, W_K, W_V, W_O``; the heads are batched.
    """
    d = n if head_width is None else head_width
    z = jax.random.normal(key, (_n_normals(n, d, n_heads, n_tokens),))
    return _network(z, n, n_heads, n_tokens, activation, d)


def sample_reference(key, *, n: int, n_heads: int, n_tokens: int = 4, activation: str = "clip",
                     head_width: int | None = None, n_samples: int, n_out: int = 1, batch_size: int = 64,
                     max_heads: int | None = None):
    """``n_samples`` independent networks by brute force; returns ``Y[:, :, :n_out]`` of shape (n_samples, s, n_out).

    ``max_heads`` (>= n_heads): draw that many heads per network and use the first ``n_heads`` (same law), so that
    calls with different ``n_heads`` share one compiled program (``n_heads`` is then a traced value).

    ``Y[:, 0, 0]`` is the official statistic (first token, first output feature). Networks are mapped in batches
    of ``batch_size`` (``lax.map`` over vmapped batches; a batch holds ``batch_size (n + s n^2 + 4 H n d)`` floats,
    so the batch is reduced at large networks) to bound memory.
    """
    check_model(n=n, n_heads=n_heads, n_tokens=n_tokens, activation=activation, head_width=head_width,
                n_samples=n_samples)
    if check.count("n_out", n_out) > n:
        raise ValueError(f"n_out must be in [1, n]; got n_out={n_out}, n={n}")
    check.count("batch_size", batch_size)
    if max_heads is not None and check.count("max_heads", max_heads) < n_heads:
        raise ValueError(f"max_heads must be >= n_heads; got max_heads={max_heads}, n_heads={n_heads}")
    d = n if head_width is None else head_width
    H = n_heads if max_heads is None else max_heads
    per = 3 * _n_normals(n, d, H, n_tokens)
    batch = max(1, min(batch_size, n_samples, (1 << 24) // per))
    active = None if max_heads is None else jnp.asarray(n_heads, jnp.float64)
    return _reference(key, active, n, H, n_tokens, activation, d, n_samples, n_out, batch)


@functools.partial(jax.jit, static_argnums=tuple(range(2, 10)))
def _reference(key, n_active, n, n_heads, n_tokens, activation, d, n_samples, n_out, batch):
    n_batches = -(-n_samples // batch)
    total = _n_normals(n, d, n_heads, n_tokens)

    def one_batch(k):
        z = jax.random.normal(k, (batch, total))
        return jax.vmap(lambda zz: _network(zz, n, n_heads, n_tokens, activation, d, n_active)[:, :n_out])(z)

    out = jax.lax.map(one_batch, jax.random.split(key, n_batches))
    return out.reshape((-1,) + out.shape[2:])[:n_samples]


def sample_reference_first(key, *, n: int, n_heads: int, n_tokens: int = 4, activation: str = "clip",
                           head_width: int | None = None, n_samples: int, method: str = "auto",
                           max_heads: int | None = None):
    """The official statistic ``Y[0, 0]`` of ``n_samples`` brute-force networks, (n_samples,).

    ``method``: ``"jax"`` is ``sample_reference(...)[:, 0, 0]``; ``"native"`` the same computation in C
    (:func:`attnlab.sakai.native.brute_first`: plain float64 loops over every weight that Y[0, 0] depends on, the
    kernel's ziggurat normals; no compilation, where the JAX path compiles one program per shape); ``"auto"``
    (default) takes ``"native"`` where it is available (CPU, n_tokens <= 16, the kernel compiled, n and the head width
    at most 100,000). Same law, other numbers (``tests/sakai/test_native.py`` compares them). ``max_heads``: on the
    JAX path, draw that many heads and use the first ``n_heads`` (one compiled program for several H, as in
    :func:`sample_reference`); the C path draws ``n_heads``.
    """
    from attnlab.sakai import native as width_native

    check_model(n=n, n_heads=n_heads, n_tokens=n_tokens, activation=activation, head_width=head_width,
                n_samples=n_samples)
    if max_heads is not None and check.count("max_heads", max_heads) < n_heads:
        raise ValueError(f"max_heads must be >= n_heads; got max_heads={max_heads}, n_heads={n_heads}")
    d = n if head_width is None else head_width
    applies = (n_tokens <= width_native.MAX_TOKENS and activation in ("clip", "relu") and max(n, d) <= 100_000
               and jax.default_backend() == "cpu" and width_native.available())
    if width_native.use_native(method, applies, f"n_tokens <= {width_native.MAX_TOKENS}, clip or relu inputs, "
                                                "n, head_width <= 100000"):
        return jnp.asarray(width_native.brute_first(width_native.seed_from_key(key), 0, n_samples, n=n, d=d,
                                                    n_heads=n_heads, n_tokens=n_tokens, activation=activation))
    return sample_reference(key, n=n, n_heads=n_heads, n_tokens=n_tokens, activation=activation,
                            head_width=head_width, n_samples=n_samples, batch_size=1024, max_heads=max_heads)[:, 0, 0]


def sample_reference_scores(key, *, n: int, n_tokens: int = 4, activation: str = "clip", n_samples: int,
                            batch_size: int = 256):
    r"""Score probe (official ``score_distribution.py``): ``(QK^T)_{00}/\sqrt{n}`` and ``(QK^T)_{00}/n`` of one head.

    Returns ``(g_sqrt, g_lin)``, each (n_samples,), from the same network draws.
    """
    check_model(n=n, n_tokens=n_tokens, activation=activation, n_samples=n_samples)
    check.count("batch_size", batch_size)

    out = _reference_scores(key, n, n_tokens, activation, n_samples, min(batch_size, n_samples))
    return out[:, 0], out[:, 1]


@functools.partial(programs.jit, static_argnums=(1, 2, 3, 4, 5))
def _reference_scores(key, n, n_tokens, activation, n_samples, batch_size):
    total = n + n_tokens * n * n + 2 * n * n
    n_batches = -(-n_samples // batch_size)

    def one(z):
        h, W, Wq, Wk = z[:n], z[n:n + n_tokens * n * n], z[n + n_tokens * n * n:total - n * n], z[total - n * n:]
        X = psi((W.reshape(n_tokens, n, n) / math.sqrt(n)) @ h, activation)
        Q = X @ (Wq.reshape(n, n) / math.sqrt(n))
        K = X @ (Wk.reshape(n, n) / math.sqrt(n))
        g = (Q @ K.T)[0, 0]
        return jnp.stack([g / math.sqrt(n), g / n])

    def one_batch(k):
        return jax.vmap(one)(jax.random.normal(k, (batch_size, total)))

    out = jax.lax.map(one_batch, jax.random.split(key, n_batches))
    return out.reshape(-1, 2)[:n_samples]


def reference_stack(key, U, *, n: int, n_heads: int, layers=("attention",), scaling: str = "sqrt"):
    r"""One brute-force network on a data set of m sequences: the output tokens ``X`` (m, s, n), all weights explicit.

    ``U`` (m, s, d_in) are the sequences' tokens. The network embeds them, ``X_0 = U W_E/sqrt(d_in)`` (W_E: d_in x n,
    iid N(0, 1)), then applies ``layers`` (:data:`attnlab.sakai.model.LAYERS`) to every sequence with the same
    weights: ``attention`` is Algorithm 1's layer on the previous tokens (H heads of width n, scores at
    ``1/sqrt(n)``, or ``1/n`` with ``scaling="linear"``); ``dense``/``relu``/``erf`` is ``phi(X W/sqrt(n))`` with a
    fresh n x n W. The heads are drawn one at a time (``lax.scan``), so a network holds ``4 n^2`` head weights at once.
    Every weight is a float32 standard normal widened to the tokens' dtype (:func:`_weights`).
    """
    layers = check_layers(layers)
    m, s, d_in = U.shape
    keys = jax.random.split(key, 1 + len(layers))
    X = U @ _weights(keys[0], (d_in, n), U.dtype) / math.sqrt(d_in)
    for k, name in zip(keys[1:], layers):
        if name == "attention":
            X = _attention_heads(k, X, n, n_heads, scaling)
        else:
            X = layer_activation(name)(X @ _weights(k, (n, n), X.dtype) / math.sqrt(n))
    return X


def _weights(key, shape, dtype):
    """Standard normal weights drawn in float32 and widened to ``dtype`` (the stack's networks only; the official
    code draws float64 normals): the draws are most of a brute-force network's cost and float32 ones take a third
    of the time, while a float32 normal's resolution (2^-24 relative) lies far below what the law checks that use
    these networks resolve."""
    return jax.random.normal(key, shape, jnp.float32).astype(dtype)


def _attention_heads(key, X, n: int, n_heads: int, scaling: str):
    """:func:`_attention` with its H heads' weights drawn one head at a time inside a ``lax.scan``."""
    def head(acc, kh):
        W = _weights(kh, (4, 1, n, n), X.dtype)
        return acc + _attention(X, W[0], W[1], W[2], W[3], n, n, 1.0, scaling), None

    Y, _ = jax.lax.scan(head, jnp.zeros_like(X), jax.random.split(key, n_heads))
    return Y / math.sqrt(n_heads)


def sample_reference_stack(key, U, *, n: int, n_heads: int, layers=("attention",), n_samples: int, n_out: int = 1,
                           scaling: str = "sqrt"):
    """``n_samples`` independent brute-force networks (:func:`reference_stack`) on the sequences ``U`` (m, s, d_in).

    Returns ``(Y, G)``: the first ``n_out`` output features Y (n_samples, m, s, n_out) and the empirical Gram of all n
    output features ``G = X X^T/n`` (n_samples, M, M), M = m s (its mean over networks estimates the finite-width
    covariance of an output feature, which :mod:`attnlab.sakai.kernel` gives as n -> infinity).
    """
    layers = check_layers(layers)
    m, s, d_in = check.shape("U", U, (None, None, None))
    if min(m, d_in) < 1:
        raise ValueError(f"U must hold at least one sequence of tokens of dimension >= 1; got shape {(m, s, d_in)}")
    check.real("U", U, sequence=True)
    check_model(n=n, n_heads=n_heads, n_tokens=s, n_samples=n_samples)
    if check.count("n_out", n_out) > n:
        raise ValueError(f"n_out must be in [1, n]; got n_out={n_out}, n={n}")
    if scaling not in ("sqrt", "linear"):
        raise ValueError(f"scaling must be 'sqrt' or 'linear'; got {scaling!r}")
    return _reference_stack(key, jnp.asarray(U, jnp.float64), n, n_heads, layers, n_samples, n_out, scaling)


@functools.partial(programs.jit, static_argnums=tuple(range(2, 8)))
def _reference_stack(key, U, n, n_heads, layers, n_samples, n_out, scaling):
    m, s, _ = U.shape

    def one(k):
        X = reference_stack(k, U, n=n, n_heads=n_heads, layers=layers, scaling=scaling).reshape(m * s, n)
        return X[:, :n_out].reshape(m, s, n_out), X @ X.T / n

    return jax.lax.map(one, jax.random.split(key, n_samples))
