r"""Mean-field overlap flows of softmax attention on SLR (Dohmatob, NeurIPS 2025: the gradient flow (30), Cor. 2,
Props. 6-10), with diffrax.

The state of every flow is an array whose last axis holds overlaps in the field order of
:class:`attnlab.slr.overlaps.DohmatobOverlaps`, ``(mu, nu, eta, zeta, rho)`` (5-D), its first four (4-D) or first two
(2-D, on M). Solves never raise and never hide a failure: :func:`integrate` returns a :class:`FlowSolution` with
diffrax's status (``result``, ``succeeded``); the trajectory of a failed solve is whatever diffrax left there.

**5-D flow (any risk in the overlaps).** For a risk ``R(mu, nu, eta, zeta, rho)`` the Riemannian gradient flow
``u' = -P_u grad_u R``, ``v' = -P_v grad_v R`` on the two spheres closes on the overlaps (``grad_u R = R_mu u* +
R_eta v* + R_rho v``, ``grad_v R = R_nu v* + R_zeta u* + R_rho u``)::

    mu'   = -(R_mu + R_rho zeta - g_u mu),         eta'  = -(R_eta + R_rho nu - g_u eta),
    nu'   = -(R_nu + R_rho eta - g_v nu),          zeta' = -(R_zeta + R_rho mu - g_v zeta),
    rho'  = -(R_mu zeta + R_eta nu + R_rho - g_u rho) - (R_nu eta + R_zeta mu + R_rho - g_v rho),

with ``g_u = R_mu mu + R_eta eta + R_rho rho`` and ``g_v = R_nu nu + R_zeta zeta + R_rho rho``. It is the s -> 0 limit of
the RGD of :mod:`attnlab.dohmatob.rgd` (time t = s x step).

**4-D flow (Cor. 2, r = 0)** in (mu, nu, eta, zeta) with ``T1 = dR/dmu``, ``T2 = dR/dnu``, ``T3 = dR/dzeta``::

    mu' = -T1 (1 - mu^2),   eta' = T1 mu eta,   nu' = -T2 (1 - nu^2) + T3 zeta nu,   zeta' = -T3 (1 - zeta^2) + T2 nu zeta

(derived from the 5-D flow; tested equal to it when r = 0). **2-D flow on M** (eta = zeta = rho = 0):
``mu' = -(1 - mu^2) dR/dmu``, ``nu' = -(1 - nu^2) dR/dnu``.

**Stationary points on M** (Prop. 7): on M, ``R = p^2 H1 - 2 p H2(nu) + H0`` (a = b = 0), so the field vanishes iff
``mu in {+-1}`` or ``B = 2 (p H1 - H2(nu)) = 0`` (i.e. ``p(mu) = H2(nu) / H1``), and ``nu in {+-1}`` or
``dH2/dnu = 0`` (the dual kernel's critical points). They are found from this factorisation (not by a root finder on
the field, which is exponentially flat in mu away from the transition; the critical points of the dual kernel are
bracketed on a grid and bisected, each with a ``converged`` flag) and classified by the eigenvalues of the
Jacobian of the 2-D field (sink: all < 0, source: all > 0, saddle: mixed, degenerate: some exactly 0 within
``zero_tol``). Finite-d caveat: the mu-eigenvalues at mu = +-1 carry the factor ``A(+-1)``, exponentially small in d
(about 1e-38 at (1, 1) for the linear link at d = 100), so the classification is by sign.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs
from attnlab.dohmatob.meanfield import DohmatobModel, kernel_terms, localisation_probability, mean_field_risk
from attnlab.slr.overlaps import DohmatobOverlaps

__all__ = ["field5", "field4", "field2", "FlowSolution", "integrate", "integrate_joint", "StationaryPoint",
           "stationary_points_on_M", "classify", "jacobian_eigenvalues"]


def field5(y, m: DohmatobModel, risk=None):
    """Right-hand side of the 5-D overlap flow (the gradient flow (30) on the overlaps), ``y`` the overlaps
    ``(mu, nu, eta, zeta, rho)`` on the last axis, for the mean-field risk of ``m`` or any ``risk(o)`` of a
    :class:`~attnlab.slr.overlaps.DohmatobOverlaps`."""
    risk = (lambda o: mean_field_risk(o, m)) if risk is None else risk
    o = DohmatobOverlaps.unstack(y)
    mu, nu, eta, zeta, rho = o.mu, o.nu, o.eta, o.zeta, o.rho
    g = jax.grad(risk)(o)
    Rmu, Rnu, Reta, Rzeta, Rrho = g.mu, g.nu, g.eta, g.zeta, g.rho
    gu = Rmu * mu + Reta * eta + Rrho * rho
    gv = Rnu * nu + Rzeta * zeta + Rrho * rho
    return jnp.stack([
        -(Rmu + Rrho * zeta - gu * mu),
        -(Rnu + Rrho * eta - gv * nu),
        -(Reta + Rrho * nu - gu * eta),
        -(Rzeta + Rrho * mu - gv * zeta),
        -(Rmu * zeta + Reta * nu + Rrho - gu * rho) - (Rnu * eta + Rzeta * mu + Rrho - gv * rho),
    ])


def field4(y, m: DohmatobModel):
    """Cor. 2, the 4-D flow in ``y = (mu, nu, eta, zeta)`` under Condition 3 (r = 0, whatever ``m.zero_r``):
    ``mu' = -T1 (1 - mu^2)``, ``nu' = -T2 (1 - nu^2) + T3 zeta nu``, ``eta' = T1 mu eta``,
    ``zeta' = -T3 (1 - zeta^2) + T2 nu zeta`` with ``(T1, T2, T3) = dR_bar/d(mu, nu, zeta)`` at rho = 0."""
    m0 = dataclasses.replace(m, zero_r=True)
    mu, nu, eta, zeta = (y[..., i] for i in range(4))

    def risk(a, b, c):
        return mean_field_risk(DohmatobOverlaps(mu=a, nu=b, eta=eta, zeta=c, rho=0.0), m0)

    T1, T2, T3 = jax.grad(risk, argnums=(0, 1, 2))(mu, nu, zeta)
    return jnp.stack([-T1 * (1 - mu**2), -T2 * (1 - nu**2) + T3 * zeta * nu, T1 * mu * eta,
                      -T3 * (1 - zeta**2) + T2 * nu * zeta])


def field2(y, m: DohmatobModel):
    """The 2-D flow on M (Prop. 6), ``y = (mu, nu)``: ``mu' = -(1 - mu^2) dR_bar/dmu``,
    ``nu' = -(1 - nu^2) dR_bar/dnu`` at eta = zeta = rho = 0."""
    mu, nu = y[..., 0], y[..., 1]
    Rmu, Rnu = jax.grad(lambda a, b: mean_field_risk(DohmatobOverlaps.on_M(a, b), m), argnums=(0, 1))(mu, nu)
    return jnp.stack([-(1 - mu**2) * Rmu, -(1 - nu**2) * Rnu])


class FlowSolution(NamedTuple):
    """A solve of :func:`integrate` (or :func:`integrate_joint`): the save times ``ts``, the states ``ys`` at them
    (len(ts), dim) (a list of (k_i, len(ts), dim) arrays for a joint solve), and diffrax's status ``result``
    (``diffrax.RESULTS``; batched under ``vmap``). ``ys`` is meaningful only where :attr:`succeeded`."""

    ts: jax.Array
    ys: object
    result: object

    @property
    def succeeded(self):
        """``result == diffrax.RESULTS.successful`` (a bool array under ``vmap``)."""
        import diffrax

        return self.result == diffrax.RESULTS.successful


def _solve(rhs, y0, ts, rtol, atol, max_steps, norm=None):
    import diffrax  # imported at the first solve: it (with equinox and optimistix) is a large share of this paper's
    # import time, and listing the catalogue or running a preset that solves no flow needs none of it

    controller = (diffrax.PIDController(rtol=rtol, atol=atol) if norm is None
                  else diffrax.PIDController(rtol=rtol, atol=atol, norm=norm))
    return diffrax.diffeqsolve(diffrax.ODETerm(rhs), diffrax.Tsit5(), t0=ts[0], t1=ts[-1], dt0=None, y0=y0,
                               saveat=diffrax.SaveAt(ts=ts), stepsize_controller=controller, max_steps=max_steps,
                               throw=False)


def integrate(field, y0, ts, m: DohmatobModel, rtol: float = 1e-8, atol: float = 1e-10,
              max_steps: int = 100_000) -> FlowSolution:
    """Integrate ``y' = field(y, m)`` from ``y0`` at t = ts[0], saving at ``ts`` (diffrax Tsit5, adaptive steps,
    ``throw=False``). Returns a :class:`FlowSolution`; a failed solve (e.g. ``max_steps`` reached) is reported by
    its ``result`` / ``succeeded``, never raised."""
    ts = jnp.asarray(ts, dtype=jnp.float64)
    sol = _solve(lambda t, y, args: field(y, m), jnp.asarray(y0, jnp.float64), ts, rtol, atol, max_steps)
    return FlowSolution(ts, sol.ys, sol.result)


def _max_norm(y):
    return jnp.max(jnp.abs(y))


def integrate_joint(fields, y0s, ts, rtol: float = 1e-8, atol: float = 1e-10, max_steps: int = 100_000):
    """Integrate several batches of trajectories, each with its own field, as one ODE system (one compiled solve).

    ``fields[i]`` maps a state ``y`` (dim,) to ``y'``; ``y0s[i]`` (k_i, dim) are its starting points. The joint state
    is the concatenation of all trajectories and the step control uses the max norm over it, so every component is
    held to ``rtol``, ``atol`` as in :func:`integrate` (a shared step is the smallest any trajectory needs). One trace
    and one compilation serve every field (the Dohmatob presets integrate the three links' flows together: about a
    third of the tracing and compilation time of three solves). Returns a :class:`FlowSolution` whose ``ys`` is a
    list of (k_i, len(ts), dim) arrays; its ``result`` is the status of the joint solve.
    """
    ts = jnp.asarray(ts, dtype=jnp.float64)
    sizes = [int(np.shape(y)[0]) for y in y0s]
    cuts = np.cumsum(sizes)[:-1]

    def rhs(t, y, args):
        parts = jnp.split(y, cuts)
        return jnp.concatenate([jax.vmap(f)(part) for f, part in zip(fields, parts)])

    y0 = jnp.concatenate([jnp.asarray(y, jnp.float64) for y in y0s])
    sol = _solve(rhs, y0, ts, rtol, atol, max_steps, norm=_max_norm)  # ys (T, N, dim)
    return FlowSolution(ts, [jnp.moveaxis(y, 0, 1) for y in jnp.split(sol.ys, cuts, axis=1)], sol.result)


class StationaryPoint(NamedTuple):
    """A stationary point (mu, nu) of the flow on M, the eigenvalues of its Jacobian, its kind (:func:`classify`),
    its family (Prop. 7's sets) and whether the root finding that located it converged."""

    mu: float
    nu: float
    eigenvalues: tuple
    kind: str
    family: str
    converged: bool = True


@functools.lru_cache(maxsize=64)
def _jacobian_fn(field, m: DohmatobModel):
    return jax.jit(jax.jacfwd(lambda z: field(z, m)))


@partial(programs.jit, static_argnames=("m",))
def _kernel_values(x, m: DohmatobModel):
    """The kernel terms ``kernel_terms(x, 0, 0)`` at each point of ``x`` (n,), stacked (n, 2)."""
    return jax.vmap(lambda x: jnp.stack(kernel_terms(x, 0.0, 0.0, m.gamma, m.link)))(x)


@partial(programs.jit, static_argnames=("m",))
def _dual_kernel_slopes(x, m: DohmatobModel):
    """The derivative in nu of the second kernel term at each point of ``x`` (n,)."""
    return jax.vmap(jax.grad(lambda x: kernel_terms(x, 0.0, 0.0, m.gamma, m.link)[1]))(x)


@partial(programs.jit, static_argnames=("m",))
def _field2_jacobians(ys, m: DohmatobModel):
    """Jacobians of :func:`field2` at each point of ``ys`` (n, 2), forward mode: (n, 2, 2), one program."""
    return jax.vmap(jax.jacfwd(lambda z: field2(z, m)))(ys)


def jacobian_eigenvalues(field, y, m: DohmatobModel):
    """Eigenvalues of the Jacobian of ``field(., m)`` at ``y`` (forward mode), sorted by real part."""
    return _sorted_eigenvalues(np.asarray(_jacobian_fn(field, m)(jnp.asarray(y, jnp.float64))))


def _sorted_eigenvalues(J):
    """The eigenvalues of the matrix ``J``, sorted by real part."""
    ev = np.linalg.eigvals(J)
    return ev[np.argsort(ev.real)]


def classify(eigenvalues, zero_tol: float = 0.0) -> str:
    """"sink" (all real parts < 0), "source" (all > 0), "saddle" (mixed), "degenerate" (some |Re| <= zero_tol)."""
    re = np.real(np.asarray(eigenvalues))
    if np.any(np.abs(re) <= zero_tol):
        return "degenerate"
    if np.all(re < 0):
        return "sink"
    if np.all(re > 0):
        return "source"
    return "saddle"


def _bisect(f, lo, hi, n_iter=60, xtol=1e-12):
    """Bisection of a sign change of ``f`` in ``[lo, hi]``: ``(root, converged)``, converged when the bracket is
    narrower than ``xtol`` after ``n_iter`` halvings (the overlaps live in [-1, 1])."""
    flo = f(lo)
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        if (fm > 0) == (flo > 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return 0.5 * (lo + hi), bool(hi - lo <= xtol)


def stationary_points_on_M(m: DohmatobModel, zero_tol: float = 0.0, n_grid: int = 2001):
    """All stationary points of the 2-D flow on M (Prop. 7, sets E1-E4), classified (Prop. 10), each with the
    ``converged`` flag of the bisection that found its nu (True for nu = +-1)."""
    def dH2(nu):
        return float(_dual_kernel_slopes(np.array([nu]), m)[0])

    grid = np.linspace(-1.0, 1.0, n_grid)[1:-1]
    vals = np.asarray(_dual_kernel_slopes(grid, m))
    nu_crit = []
    for i in range(len(grid) - 1):
        if vals[i] == 0.0:
            nu_crit.append((float(grid[i]), True))
        elif vals[i] * vals[i + 1] < 0:
            nu_crit.append(_bisect(dH2, float(grid[i]), float(grid[i + 1])))
    nus = [(-1.0, "nu=-1", True), (1.0, "nu=+1", True)] + [(x, "dual-kernel critical point", ok) for x, ok in nu_crit]
    Hs = np.asarray(_kernel_values(np.array([1.0] + [nu for nu, _, _ in nus]), m))
    H1 = float(Hs[0, 0])
    p_lo, p_hi = float(localisation_probability(-1.0, m)), float(localisation_probability(1.0, m))
    found = []  # (mu, nu, family, converged)
    for i, (nu, nu_family, converged) in enumerate(nus):
        mus = [(-1.0, "mu=-1"), (1.0, "mu=+1")]
        p_star = float(Hs[i + 1, 1]) / H1
        if p_lo < p_star < p_hi:
            mu_star = (m.psi + math.log(p_star / (1 - p_star)) / (m.beta * m.d)) / m.c
            if -1 < mu_star < 1:
                mus.append((mu_star, "B=0"))
        found += [(mu, nu, f"{mu_family}, {nu_family}", converged) for mu, mu_family in mus]
    jacobians = np.asarray(_field2_jacobians(np.array([[mu, nu] for mu, nu, _, _ in found], dtype=np.float64), m))
    points = []
    for (mu, nu, family, converged), J in zip(found, jacobians):
        ev = _sorted_eigenvalues(J)
        points.append(StationaryPoint(mu, nu, tuple(complex(e) for e in ev), classify(ev, zero_tol), family,
                                      converged))
    return points
