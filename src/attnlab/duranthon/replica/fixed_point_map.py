r"""The replica fixed-point map F: order parameters -> channel integrals (hats) -> prior update.

Per sample (frozen draws, :mod:`attnlab.duranthon.replica.samples`), with s_a = sqrt(q_a - m_a^2)::

    omega^k = m_k chi* + s_k xi^k,   omega^v = m_v zeta* + s_v xi^v
    r = (y - sigma_hat^T omega^v)/(1 + V_v |sigma_hat|^2),   f^v = sigma_hat r,   f^k = (chi_hat - omega^k)/V_k
    q_hat_a = alpha E|f^a|^2,  V_hat_a = -alpha E[sum_l df^a_l/domega^a_l],  m_hat_a = alpha E[f^a . h*^a] + m_a V_hat_a
    V_a = 1/(lambda_a + V_hat_a),   m_a = m_hat_a V_a,   q_a = (m_hat_a^2 + q_hat_a) V_a^2

with chi_hat the proximal point (:mod:`attnlab.duranthon.replica.proximal`) and alpha = N/D the sample ratio.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.duranthon.activations import Activation
from attnlab.duranthon.replica.blocks import PRESOLVE_STEPS, _channel, _lowest, _presolve
from attnlab.duranthon.replica.proximal import INNER_GTOL, _channel_one, _prox_diag, _starts
from attnlab.duranthon.replica.samples import FrozenSamples, _host, _omegas
from attnlab.duranthon.replica.stability import at_eigenvalue

__all__ = ["Order", "MapValue", "prior_update", "evaluate_map", "replica_map"]


class Order(NamedTuple):
    """The six order parameters on M."""

    m_k: float
    q_k: float
    V_k: float
    m_v: float
    q_v: float
    V_v: float


TRACK_TOL = 1e-4  # multistart loops of a sample ending farther apart than this: its local minima are tracked


def _track_from_ends(ends):
    """The tracked minima after a multistart evaluation: ``(idx, starts)`` with ``idx`` the samples whose 2L + 1
    Newton loops (end points ``ends`` (n, S, L)) did not all end at one point and ``starts`` (m, S, L) their end
    points (host arrays); None if there is none."""
    ends = np.asarray(ends)
    idx = np.nonzero(np.max(np.abs(ends - ends[:, :1]), axis=(1, 2)) > TRACK_TOL)[0]
    return (idx, ends[idx]) if idx.size else None


@partial(jax.jit, static_argnames=("act", "n_newton", "multistart"))
def _unrolled_fields(act, order, samples: FrozenSamples, c, n_newton: int = 30, multistart: bool = True):
    """Per-sample integrands with the "unrolled" V_hat (forward mode through the Newton loops, from the cold starts):
    the fields of :func:`_channel_block` plus the non-convexity flag, frob NaN. One program per sample shape (used
    by tests and comparisons only)."""
    _, _, V_k, _, _, V_v = order
    om_k, om_v, _, _ = _omegas(order, samples)

    def one(ok, ov, y, mask):
        L = ok.shape[0]

        def fields(o):  # (f_k, f_v) of omega = (omega_k, omega_v), and every field as the aux: one Newton loop
            fk, fv, r = _channel_one(act, o[:L], o[L:], y, mask, V_k, V_v, c, n_newton, multistart)
            return (fk, fv), (fk, fv, r)

        (jk, jv), (fk, fv, r) = jax.jacfwd(fields, has_aux=True)(jnp.concatenate([ok, ov]))
        dfk, dfv = jnp.diag(jk[:, :L]), jnp.diag(jv[:, L:])
        chi, bad, ncvx = _prox_diag(act, ok, ov, y, mask, V_k, V_v, c, n_newton, multistart)
        return (fk, fv, r, jnp.sum(jnp.where(mask, dfk, 0.0)), jnp.sum(jnp.where(mask, dfv, 0.0)),
                jnp.full((2, 2, 2, 2), jnp.nan), bad, chi, ncvx)

    return jax.vmap(one)(om_k, om_v, samples.y, samples.mask)


def _reduce_hats(order, alpha: float, s: FrozenSamples, s_k: float, s_v: float, fields, ncvx, jacobian: str):
    """The hats (:mod:`attnlab.duranthon.replica.fixed_point_map`) from the per-sample integrands (host arrays):
    ``(hats, E[r^2]/2, diagnostics, alpha E[frob])``, the diagnostics being (unconverged fraction, non-convex
    fraction, jump_k, its SE, jump_v, its SE).

    Stein's lemma: E[sum_l df_l/domega_l] = E[sum_l f_l xi_l]/s_a, the distributional derivative, which includes the
    jumps of f where the global minimiser of the proximal problem switches between local minima (the pointwise
    implicit/unrolled derivative misses them). Needs s_a > 0."""
    m_k, _, _, m_v, _, _ = (float(t) for t in order)
    fk, fv, r, dk, dv, frob, bad = fields[:7]
    st_k = np.sum(fk * s.xi_k, -1) / (s_k if s_k > 0 else 1.0)
    st_v = np.sum(fv * np.where(s.mask, s.xi_v, 0.0), -1) / (s_v if s_v > 0 else 1.0)
    n = r.shape[0]

    def se(t):
        return alpha * float(np.std(t, ddof=1)) / math.sqrt(n) if n > 1 else math.nan

    # jump term of V_hat_a = (Stein - pointwise) estimate on common samples, with its SE (NaN where s_a = 0)
    jump_k = -alpha * float(np.mean(st_k - dk)) if s_k > 1e-8 else math.nan
    jump_v = -alpha * float(np.mean(st_v - dv)) if s_v > 1e-8 else math.nan
    diag = np.array([np.mean(bad), np.mean(ncvx), jump_k, se(st_k - dk), jump_v, se(st_v - dv)])
    if jacobian == "stein":
        dk = st_k if s_k > 1e-8 else dk
        dv = st_v if s_v > 1e-8 else dv
    Vh_k, Vh_v = -alpha * np.mean(dk), -alpha * np.mean(dv)
    qh_k = alpha * np.mean(np.sum(fk**2, -1))
    qh_v = alpha * np.mean(np.sum(fv**2, -1))
    mh_k = alpha * np.mean(np.sum(fk * s.chi, -1)) + m_k * Vh_k
    mh_v = alpha * np.mean(np.sum(fv * s.zeta, -1)) + m_v * Vh_v
    return (np.array([mh_k, qh_k, Vh_k, mh_v, qh_v, Vh_v], dtype=np.float64), 0.5 * float(np.mean(r**2)), diag,
            alpha * np.mean(frob, axis=0))


class MapValue(NamedTuple):
    """One evaluation of the fixed-point map: the new order parameters (NaN where ``lambda_a + V_hat_a <= 0``), the
    hats, the training loss per sample ``E[r^2/2]``, the fraction of samples whose inner problem did not converge,
    the fraction where it is non-convex (several local minima were found), and the jump term of each V_hat_a: the
    Stein estimate minus the pointwise (implicit or unrolled) one on the same samples, with its standard error. The
    pointwise derivative misses the jumps of f where the global minimiser switches between local minima, so a
    jump term many SE away from 0 means the pointwise V_hat is biased there."""

    order: np.ndarray
    hats: np.ndarray
    train_loss: float
    inner_unconverged: float
    nonconvex: float
    jump_k: float = math.nan
    jump_k_se: float = math.nan
    jump_v: float = math.nan
    jump_v_se: float = math.nan
    at: float = math.nan
    chi: object = None
    track: object = None

    @property
    def valid(self) -> bool:
        return bool(np.all(np.isfinite(self.order)))


def prior_update(hats, lam_k: float, lam_v: float) -> np.ndarray:
    """The ridge prior's update: ``V_a = 1/(lambda_a + V_hat_a)``, ``m_a = m_hat_a V_a``,
    ``q_a = (m_hat_a^2 + q_hat_a) V_a^2``, from the hats ``(m_hat_k, q_hat_k, V_hat_k, m_hat_v, q_hat_v, V_hat_v)``;
    NaN where ``lambda_a + V_hat_a <= 0`` or a hat is not finite."""
    mh_k, qh_k, Vh_k, mh_v, qh_v, Vh_v = (float(h) for h in hats)
    if not (np.all(np.isfinite(hats)) and lam_k + Vh_k > 0 and lam_v + Vh_v > 0):
        return np.full(6, np.nan)
    V_k, V_v = 1.0 / (lam_k + Vh_k), 1.0 / (lam_v + Vh_v)
    return np.array([mh_k * V_k, (mh_k**2 + qh_k) * V_k**2, V_k, mh_v * V_v, (mh_v**2 + qh_v) * V_v**2, V_v])


def evaluate_map(act: Activation, order, alpha, lam_k, lam_v, samples: FrozenSamples, n_newton: int = 30,
                 jacobian: str = "implicit", multistart: bool = True, chi0=None, track=None,
                 known=None) -> MapValue:
    """The fixed-point map with its diagnostics (see :class:`MapValue`); prior updates
    ``V_a = 1/(lambda_a + V_hat_a)``, ``m_a = m_hat_a V_a``, ``q_a = (m_hat_a^2 + q_hat_a) V_a^2``. When
    ``lambda_a + V_hat_a <= 0`` the ridge prior update has no positive V_a: the replica-symmetric saddle point does
    not exist at this order (non-convex channel, small lambda) and the new order is NaN.

    ``chi0`` (n, L_max), single start only: warm start of every sample's inner Newton iteration (the proximal points
    ``MapValue.chi`` of a previous evaluation at a nearby order) instead of omega^k. Where the proximal problem is
    convex this changes chi_hat only at round-off; where it is not, the warm start follows the local minimum it
    starts in (the multistart map does not use it). ``MapValue.at`` is the replicon eigenvalue of
    :func:`at_eigenvalue` at the input order (NaN with ``jacobian="unrolled"``).

    Tracked minima: a multistart evaluation returns in ``MapValue.track`` the samples whose 2L + 1 Newton loops
    ended at different points, with those end points. Passed back as ``track`` to a warm-started single-start
    evaluation, each such sample also runs warm Newton loops from its tracked points, and its proximal point is the
    lowest of them and of the warm-started loop (the track is advanced and returned again). Near a point where a
    sample's global minimiser switches between two local minima (low alpha), the single-start iteration then
    follows the switch itself instead of converging to a point that the next multistart verification rejects:
    at low alpha most rejected verifications were switches of samples with tracked minima.

    ``known`` (n, L_max), multistart only: a local minimum of each sample's proximal problem at this order (or at an
    order within the outer tolerance of it), e.g. the proximal points of the single-start iteration that a
    multistart evaluation verifies. A Newton loop that comes within ``SNAP_RADIUS sqrt(V_k)`` of it continues from
    there (:func:`_newton_loop`): it ends at the same minimum it was converging to, to round-off, in fewer steps.
    The value is the multistart map's to round-off (tested); the verifications of the benchmark curve took 339k
    Newton pair-steps instead of 898k."""
    if jacobian not in ("implicit", "unrolled", "stein"):
        raise ValueError(f"jacobian must be 'implicit', 'unrolled' or 'stein', got {jacobian!r}")
    if chi0 is not None and multistart:
        raise ValueError("a warm start chi0 is for the single-start map (multistart=False) only")
    if known is not None and not multistart:
        raise ValueError("known minima are for the multistart map (multistart=True) only")
    order_np = np.asarray(order, dtype=np.float64)
    act0, alpha = dataclasses.replace(act, c=0.0), float(alpha)
    s = _host(samples)
    om_k, om_v, s_k, s_v = _omegas(order_np, s, np)
    V_k, V_v = float(order_np[2]), float(order_np[5])
    track_out = None
    if jacobian == "unrolled":
        fields = [np.asarray(a) for a in _unrolled_fields(act0, jnp.asarray(order_np), samples, act.c, n_newton,
                                                           bool(multistart))]
        chi, ncvx = fields[7], fields[8]
    else:
        pairs = (om_k, om_v, s.y, s.mask)
        starts = _starts(om_k if chi0 is None else np.asarray(chi0), s.y, s.mask, V_k,
                         bool(multistart) and chi0 is None, np)
        if chi0 is not None and track is not None:  # also warm Newton loops from every tracked start
            idx = track[0]
            ends, tracked = _presolve(act0, V_k, V_v, act.c, pairs, starts, n_newton,
                                      more=[(tuple(a[idx] for a in pairs), np.asarray(track[1]))])
        else:
            ends = _presolve(act0, V_k, V_v, act.c, pairs, starts, n_newton, target=known,
                             steps=PRESOLVE_STEPS if known is None else 1)
        x, J = _lowest(ends)
        if chi0 is not None and track is not None:
            track_out = (idx, tracked.x)
            xs, Js = _lowest(tracked)
            better = Js < J[idx]
            x[idx[better]] = xs[better]
        fields = _channel(act0, V_k, V_v, act.c, pairs, x)
        chi = fields[7]
        if multistart:
            track_out = _track_from_ends(ends.x)
            # non-convex here: another start ended at a different stationary point (with a higher value)
            ncvx = np.any((np.max(np.abs(ends.x - chi[:, None]), axis=-1) > 1e-4) & (ends.gmax < INNER_GTOL), axis=1)
        else:
            ncvx = np.zeros(chi.shape[0], bool)
    hats, train, diag, frob = _reduce_hats(order_np, alpha, s, s_k, s_v, fields, ncvx, jacobian)
    hats = np.asarray(hats, dtype=np.float64)
    new = prior_update(hats, lam_k, lam_v)
    diag = np.asarray(diag)
    at = at_eigenvalue(np.asarray(frob), float(order_np[2]), float(order_np[5]))
    return MapValue(new, hats, float(train), *(float(t) for t in diag), at, chi, track_out)


def replica_map(act: Activation, order, alpha, lam_k, lam_v, samples: FrozenSamples, n_newton: int = 30,
                jacobian: str = "implicit", multistart: bool = True):
    """One application of the fixed-point map: order -> (new order, training loss per sample E[r^2/2]).
    ``jacobian``: "implicit" (implicit function theorem at the proximal point) or "unrolled" (forward-mode through
    the Newton steps); they agree when the Newton steps have converged."""
    v = evaluate_map(act, order, alpha, lam_k, lam_v, samples, n_newton, jacobian, multistart)
    return v.order, v.train_loss
