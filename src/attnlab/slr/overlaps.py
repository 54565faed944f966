r"""The overlaps of a student pair with the teacher pair: one named structure per paper's notation.

Both erf attention (Marion et al., ICLR 2025) and softmax attention (Dohmatob, NeurIPS 2025) on SLR have a
population risk that depends on the student pair only through five inner products with the teacher pair
(``k* . v* = 0``, all four vectors on the unit sphere):

=========================  ==================  ======================
inner product              Marion (k, v)       Dohmatob (u, v)
=========================  ==================  ======================
key . key*                 ``kappa = k.k*``    ``mu = u.u*``
value . value*             ``nu = v.v*``       ``nu = v.v*``
value . key*               ``theta = v.k*``    ``zeta = v.u*``
key . value*               ``eta = k.v*``      ``eta = u.v*``
key . value                ``rho = k.v``       ``rho = u.v``
=========================  ==================  ======================

:class:`Overlaps` holds them in Marion's notation, field order ``(kappa, nu, theta, eta, rho)``;
:class:`DohmatobOverlaps` in Dohmatob's (eq. 19 of that paper), field order ``(mu, nu, eta, zeta, rho)``. The two
orders differ (theta <-> zeta sits third in one and fourth in the other), so code reads fields by name and converts
with :meth:`Overlaps.to_dohmatob` / :meth:`DohmatobOverlaps.to_marion`. Where an array must carry them on its last
axis (an ODE state), the axis follows the field order of the structure (:meth:`DohmatobOverlaps.stack`,
:meth:`DohmatobOverlaps.unstack`). The invariant manifold M of both papers is ``theta = eta = rho = 0``.

:func:`overlaps` is the one function computing them from vectors; :func:`frame_coordinates` goes back, to
coordinates of the student in an orthonormal frame ``(k*, v*, e1, e2)``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Overlaps", "DohmatobOverlaps", "overlaps", "frame_coordinates"]


class Overlaps(NamedTuple):
    """Marion et al.'s five overlaps of (k, v) with (k*, v*), in this order: ``kappa = k.k*``, ``nu = v.v*``,
    ``theta = v.k*``, ``eta = k.v*``, ``rho = k.v``. The oracle has kappa = nu = +-1 and the invariant manifold M is
    theta = eta = rho = 0. In Dohmatob's letters: kappa = mu, theta = zeta (:meth:`to_dohmatob`)."""

    kappa: jax.Array
    nu: jax.Array
    theta: jax.Array
    eta: jax.Array
    rho: jax.Array

    def to_dohmatob(self) -> DohmatobOverlaps:
        """The same overlaps in Dohmatob's notation: ``mu = kappa``, ``zeta = theta``."""
        return DohmatobOverlaps(mu=self.kappa, nu=self.nu, eta=self.eta, zeta=self.theta, rho=self.rho)


class DohmatobOverlaps(NamedTuple):
    """Dohmatob's five overlaps of (u, v) with (u*, v*) (eq. 19), in this order: ``mu = u.u*``, ``nu = v.v*``,
    ``eta = u.v*``, ``zeta = v.u*``, ``rho = u.v``. In Marion's letters: mu = kappa, zeta = theta
    (:meth:`to_marion`). ``zeta`` here is an overlap, not Marion's zeta function."""

    mu: jax.Array
    nu: jax.Array
    eta: jax.Array
    zeta: jax.Array
    rho: jax.Array

    def to_marion(self) -> Overlaps:
        """The same overlaps in Marion's notation: ``kappa = mu``, ``theta = zeta``."""
        return Overlaps(kappa=self.mu, nu=self.nu, theta=self.zeta, eta=self.eta, rho=self.rho)

    @classmethod
    def on_M(cls, mu, nu) -> DohmatobOverlaps:
        """A point of the invariant manifold M: ``eta = zeta = rho = 0``."""
        return cls(mu=mu, nu=nu, eta=0.0, zeta=0.0, rho=0.0)

    def stack(self):
        """The overlaps on the last axis of one array, in the field order ``(mu, nu, eta, zeta, rho)``."""
        return jnp.stack(jnp.broadcast_arrays(*self), axis=-1)

    @classmethod
    def unstack(cls, y) -> DohmatobOverlaps:
        """Inverse of :meth:`stack`: the fields from the last axis of ``y`` (an ODE state, a batch of points)."""
        return cls(*(y[..., i] for i in range(len(cls._fields))))


def _dot(a, b):
    """``a . b`` over the last axis: ``@`` for two vectors; for batches, the product summed over the last axis when
    the shapes agree and a broadcasting einsum otherwise (no broadcast copy of a teacher); NumPy for NumPy arrays."""
    if np.ndim(a) == 1 and np.ndim(b) == 1:
        return a @ b
    if np.shape(a) == np.shape(b):
        return (a * b).sum(-1)
    xp = np if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) else jnp
    return xp.einsum("...d,...d->...", a, b)


def overlaps(k, v, k_star, v_star) -> Overlaps:
    """The five overlaps ``(k.k*, v.v*, v.k*, k.v*, k.v)`` (Marion et al.; :meth:`Overlaps.to_dohmatob` for
    Dohmatob's ``(u.u*, v.v*, u.v*, v.u*, u.v)``). Vectors on the last axis; leading axes broadcast (NumPy or JAX)."""
    return Overlaps(_dot(k, k_star), _dot(v, v_star), _dot(v, k_star), _dot(k, v_star), _dot(k, v))


def frame_coordinates(o: Overlaps):
    """Coordinates of k and v in the orthonormal frame (k*, v*, e1, e2) built from the overlaps:
    ``k = (kappa, eta, p, 0)``, ``v = (theta, nu, q1, q2)`` with ``p = sqrt(1 - kappa^2 - eta^2)``,
    ``q1 = (rho - kappa theta - eta nu) / p`` and ``q2 = sqrt(1 - theta^2 - nu^2 - q1^2)`` (negative squares
    clipped to 0). Returns ``(k4, v4)``, each with the overlaps' shape plus a last axis of 4."""
    tiny = 1e-300
    p = jnp.sqrt(jnp.maximum(1.0 - o.kappa**2 - o.eta**2, 0.0))
    q1 = jnp.where(p > tiny, (o.rho - o.kappa * o.theta - o.eta * o.nu) / jnp.maximum(p, tiny), 0.0)
    q2 = jnp.sqrt(jnp.maximum(1.0 - o.theta**2 - o.nu**2 - q1**2, 0.0))
    zero = jnp.zeros_like(p)
    k4 = jnp.stack([o.kappa, o.eta, p, zero], axis=-1)
    v4 = jnp.stack([o.theta, o.nu, q1, q2], axis=-1)
    return k4, v4
