r"""The attention-weight family sigma of Duranthon et al. (2025): ``f(X) = sigma(X k/sqrt(D))^T (X v/sqrt(D))``.

| name | sigma(chi)_l | label in figures |
|---|---|---|
| ``softmax`` | exp(chi_l) / sum exp(chi) (log-sum-exp) | softmax |
| ``linear`` | 1 + chi_l | linear 1+chi |
| ``centred_linear`` | (1 + chi_l - mean(chi)) / L, the true linearisation of softmax at 0 | centred linear |
| ``erf`` | 1 + erf(c + chi_l) | erf 1+erf(c+chi) |
| ``softplus`` | softplus(chi_l) / sum softplus(chi) (no shift) | softplus-normalised |
| user | g(chi_l), optionally divided by sum g(chi) | the given name |

Every weight function takes scores ``chi`` (..., L_max) and a boolean ``mask`` of the same shape (padding of random
lengths): padded entries get weight 0 and do not enter sums or means. An :class:`Activation` is a frozen, hashable
dataclass, so it can be a static argument of a jitted function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp

__all__ = ["Activation", "activation", "ACTIVATIONS", "custom_activation"]

ACTIVATIONS = ("softmax", "linear", "centred_linear", "erf", "softplus")
"""The names of the built-in attention-weight functions sigma(chi)_l, for scores chi of the L valid tokens:

* ``softmax``: ``exp(chi_l) / sum_j exp(chi_j)``;
* ``linear``: ``1 + chi_l``;
* ``centred_linear``: ``(1 + chi_l - mean(chi)) / L``, the linearisation of softmax at chi = 0;
* ``erf``: ``1 + erf(c + chi_l)``, with the shift ``c``;
* ``softplus``: ``softplus(chi_l) / sum_j softplus(chi_j)``.

:func:`activation` builds one by name; :func:`custom_activation` makes a user-defined sigma."""

_LABELS = {"softmax": "softmax", "linear": "linear 1+chi", "centred_linear": "centred linear",
           "erf": "erf 1+erf(c+chi)", "softplus": "softplus-normalised"}


@dataclass(frozen=True)
class Activation:
    """One member of the family. ``c`` is the erf shift; ``fn``/``normalised`` define a user activation."""

    name: str
    c: float = 0.0
    fn: Callable | None = None
    normalised: bool = False

    @property
    def label(self) -> str:
        base = _LABELS.get(self.name, self.name)
        return f"erf 1+erf({self.c:.3g}+chi)" if self.name == "erf" else base

    @property
    def is_normalised(self) -> bool:
        return self.name in ("softmax", "softplus") or (self.fn is not None and self.normalised)

    def __call__(self, chi, mask=None, c=None):
        """Weights sigma(chi) (..., L_max); ``c`` (traceable) overrides the erf shift ``self.c``."""
        c = self.c if c is None else c
        if mask is None:
            mask = jnp.ones(chi.shape, dtype=bool)
        if self.name == "softmax":
            logits = jnp.where(mask, chi, -jnp.inf)
            return jnp.where(mask, jax.nn.softmax(logits, axis=-1), 0.0)
        if self.name == "linear":
            return jnp.where(mask, 1.0 + chi, 0.0)
        if self.name == "centred_linear":
            n = jnp.sum(mask, axis=-1, keepdims=True)
            mean = jnp.sum(jnp.where(mask, chi, 0.0), axis=-1, keepdims=True) / n
            return jnp.where(mask, (1.0 + chi - mean) / n, 0.0)
        if self.name == "erf":
            return jnp.where(mask, 1.0 + jax.scipy.special.erf(c + chi), 0.0)
        if self.name == "softplus":
            # normalised in log space: log softplus(x) = x + log1p(-x e^x / 2 + ...) ~ x for x << 0, so that far
            # negative scores (large key scales) do not underflow to 0/0
            safe = jnp.where(chi < -30.0, -30.0, chi)
            log_sp = jnp.where(chi < -30.0, chi, jnp.log(jax.nn.softplus(safe)))
            return jnp.where(mask, jax.nn.softmax(jnp.where(mask, log_sp, -jnp.inf), axis=-1), 0.0)
        g = jnp.where(mask, self.fn(chi), 0.0)
        return g / jnp.sum(g, axis=-1, keepdims=True) if self.normalised else g


def activation(name: str, c: float = 0.0) -> Activation:
    """A built-in activation by name (see :data:`ACTIVATIONS`); ``c`` is used by ``erf`` only."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}: expected one of {list(ACTIVATIONS)} or custom_activation()")
    return Activation(name, c=float(c) if name == "erf" else 0.0)


def custom_activation(name: str, fn: Callable, normalised: bool = False) -> Activation:
    """A user activation: element-wise ``fn`` (JAX-traceable), divided by its sum over tokens if ``normalised``."""
    if not callable(fn):
        raise ValueError(f"custom activation {name!r} needs a callable, got {fn!r}")
    if name in ACTIVATIONS:
        raise ValueError(f"custom activation name {name!r} clashes with a built-in activation")
    return Activation(name, fn=fn, normalised=bool(normalised))
