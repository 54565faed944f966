r"""Shared definitions of the Sakai et al. model: the input activation psi, the clip level C and argument checks.

Sakai, Karakida, Imaizumi (NeurIPS 2025), "Infinite-Width Limit of a Single Attention Layer: Analysis via Tensor
Programs", arXiv:2506.00846, Example 3.1 / Algorithm 1; official code ``manasakai/infinite-width-attention``.

Inputs are ``x_i = psi(W_i h)`` with ``h ~ N(0, I_n)`` and ``W_i`` iid N(0, 1/n) entries; psi is
``clip(t, -C, C)`` with C = 100 (``clip``), ``max(t, 0)`` (``relu``) or the identity (``identity``, the law the
Wishart reduction samples; it differs from ``clip`` only on an event of probability below 1e-40, see
:func:`attnlab.sakai.sampler.clip_event_probability`).
"""

from __future__ import annotations

import jax.numpy as jnp

from attnlab import _validate as check

__all__ = ["ACTIVATIONS", "CLIP", "LAYERS", "psi", "check_model", "check_layers", "layer_activation"]

ACTIVATIONS = ("clip", "relu", "identity")
"""The input activations psi (inputs ``x_i = psi(W_i h)``) accepted as ``activation``: ``clip``
(``clip(t, -C, C)``, C = 100), ``relu`` (``max(t, 0)``) and ``identity``; see :func:`psi`."""

LAYERS = ("attention", "dense", "relu", "erf")
"""The layers of a deep stack (:mod:`attnlab.sakai.joint`, :mod:`attnlab.sakai.kernel`), each of width n and applied
to every token: ``attention`` (the paper's multi-head layer, Example 3.1, on the previous layer's tokens), ``dense``
(``X W/sqrt(n)``, W iid N(0, 1) entries), ``relu`` and ``erf`` (a dense layer followed by ReLU or erf)."""

CLIP = 100.0
"""The clip level C of the ``clip`` input activation ``psi(t) = clip(t, -C, C)``."""


def psi(x, activation: str):
    """The input activation applied elementwise (``clip`` at C = 100, ``relu`` or ``identity``)."""
    if activation == "clip":
        return jnp.clip(x, -CLIP, CLIP)
    if activation == "relu":
        return jnp.maximum(x, 0.0)
    if activation == "identity":
        return x
    raise ValueError(f"unknown input activation {activation!r}; expected one of {', '.join(ACTIVATIONS)}")


def check_model(*, n: int | None = None, n_heads: int = 1, n_tokens: int = 1, activation: str = "clip",
                head_width: int | None = None, n_samples: int = 1) -> None:
    """Raise a one-line ValueError naming the first bad argument: sizes must be integers >= 1 (Python or NumPy, not
    bools or floats), psi one of :data:`ACTIVATIONS`; the optional sizes ``n`` and ``head_width`` may be None."""
    for name, value in (("width n", n), ("n_heads", n_heads), ("n_tokens", n_tokens), ("head_width", head_width),
                        ("n_samples", n_samples)):
        if value is not None or name not in ("width n", "head_width"):
            check.count(name, value)
    check.choice("input activation", activation, ACTIVATIONS)


def check_layers(layers) -> tuple[str, ...]:
    """``layers`` as a tuple of names of :data:`LAYERS` (a one-line ValueError names the first unknown one)."""
    if not isinstance(layers, (str, list, tuple)):
        raise ValueError(f"layers must be a layer name or a sequence of them; got {layers!r}")
    layers = (layers,) if isinstance(layers, str) else tuple(layers)
    if not layers:
        raise ValueError("layers must name at least one layer")
    for name in layers:
        if name not in LAYERS:
            raise ValueError(f"unknown layer {name!r}; expected one of {', '.join(LAYERS)}")
    return layers


def layer_activation(name: str):
    """The elementwise function of a dense layer ``name`` (``dense``: identity, ``relu``, ``erf``)."""
    import jax.scipy.special as jsp

    return {"dense": lambda x: x, "relu": lambda x: jnp.maximum(x, 0.0), "erf": jsp.erf}[name]
