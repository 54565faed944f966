r"""Replica-symmetric fixed point for ERM on the manifold M (Duranthon et al.; spec 4.2, a RECONSTRUCTION [I]).

Six order parameters ``(m_a, q_a, V_a)``, a in {k, v}, and their hats. Per sample (frozen Monte Carlo draws, so the
iteration map is deterministic)::

    omega^k = m_k chi* + s_k xi^k,   omega^v = m_v zeta* + s_v xi^v,   s_a = sqrt(q_a - m_a^2)
    chi_hat = argmin_chi  |chi - omega^k|^2/(2 V_k) + (y - sigma(chi)^T omega^v)^2 / (2 (1 + V_v |sigma(chi)|^2))
    r = (y - sigma_hat^T omega^v)/(1 + V_v |sigma_hat|^2),   f^v = sigma_hat r,   f^k = (chi_hat - omega^k)/V_k
    q_hat_a = alpha E|f^a|^2,  V_hat_a = -alpha E[sum_l df^a_l/domega^a_l],  m_hat_a = alpha E[f^a . h*^a] + m_a V_hat_a
    V_a = 1/(lambda_a + V_hat_a),   m_a = m_hat_a V_a,   q_a = (m_hat_a^2 + q_hat_a) V_a^2

Proximal problem. Monotone modified Newton (positive Hessian eigenvalues floored at ``0.01/V_k``, negative ones
replaced by ``max(|.|, 0.5/V_k)``, best of a few trial step lengths, early stop at |grad| <= 1e-12, then a final full
Newton step; the eigendecomposition by fixed-sweep Jacobi for L <= 4, :func:`_sym_eig`) from omega^k, or from 2L + 1
starts (omega^k and omega^k +- sqrt(V_k)(1+|y|) e_l) keeping the lowest value: at small lambda V_k is large and the
problem is non-convex for a few per cent of the samples, where one start from omega^k misses the global minimum
(tested against a brute-force grid). Inside a fixed-point solve the single-start evaluations are warm-started at the
previous evaluation's proximal points, and the batch of Newton loops is run in rounds of a few steps, gathering the
unfinished (sample, start) pairs after each round (:func:`_presolve`), so that the slowest sample no longer sets the
cost of the whole batch. Every compiled program of the inner solver runs on blocks of a few fixed sizes
(:func:`_blocks`), so a new number of samples or starts costs no compilation; the integrals over the samples are
reduced on the host (:func:`_reduce_hats`).

V_hat integrand. "implicit": the implicit function theorem at the proximal point; "unrolled": forward mode through
the Newton steps (equal to implicit once converged); "stein": Stein's lemma ``E[sum_l df_l/domega_l] =
E[sum_l f_l xi_l]/s_a``. The first two are pointwise derivatives; where the global minimiser switches between local
minima f jumps, and the derivative that the replica computation needs (the heat equation for the Moreau envelope,
``d_C E[phi] = E[phi'']/2``) is the distributional one, which the Stein form includes and the pointwise forms miss.
Every evaluation reports the difference (the "jump term") with its SE: within SE of 0 where every proximal problem
is convex (tested at lambda = 1), many SE away at small lambda.

Solver. :func:`solve_replica`: safeguarded Anderson acceleration (memory 6, carried along a continuation path; or
plain damping) with a convergence report per point (residual, map evaluations, status, branch, training objective,
diagnostics); :func:`continue_in_lambda` and :func:`replica_curve`: continuation in lambda and alpha and branch
tracking from informed and uninformed starts (:func:`standard_starts`), the ERM branch being the converged one with
the lowest training objective per sample. The test error at the fixed point is the spec 3.2 formula evaluated by
:func:`attnlab.duranthon.population.overlap_risk` on fresh samples. Every evaluation also returns the replicon (de
Almeida-Thouless) eigenvalue of the RS point (:func:`at_eigenvalue`): RS is locally stable iff it is below 1.
:func:`solve_bayes_optimal`: the Bayes-optimal state evolution of spec 4.3 (spiked-SLR, and max-SLR at nu = inf).

Status of the reconstruction. Tested: L = 1 reproduces the classical ridge equations (5 SE over frozen-sample
seeds). Measured once (not a test: too slow for the suite), spec's acceptance point, softmax, spiked-SLR nu = 5, L = 2,
alpha = 4, lambda_k = lambda_v = 1, informed start:

| | m_k | q_k | m_v | q_v | train loss/sample |
|---|---|---|---|---|---|
| replica, 3 frozen sets of 3000 samples (mean) | 0.443 | 0.261 | 0.779 | 0.652 | 0.0801 |
| (spread between the 3 sets) | 0.432-0.450 | 0.253-0.265 | 0.770-0.784 | 0.638-0.660 | 0.0799-0.0805 |
| L-BFGS ERM, D = 1000, N = 4000, 3 seeds (mean +- SE) | 0.444(2) | 0.260(2) | 0.787(4) | 0.662(5) | 0.0785(7) |
| L-BFGS ERM, D = 250, N = 1000, 4 seeds | 0.453(4) | 0.272(4) | 0.796(7) | 0.679(9) | 0.0793(13) |

so theory and simulation agree within about 2 combined standard errors on every overlap at this point.

Low nu, low lambda (measured once, not a test; the ``duranthon-low-snr`` preset reruns it at smaller sizes):
softmax, spiked-SLR nu = 1, L = 3, alpha = 2, lambda_k = lambda_v = 0.1 (L-BFGS ERM at D = 707, N = 1414, 4 seeds;
replica on one frozen set):

| | m_k | q_k | m_v | q_v | objective/sample | test error |
|---|---|---|---|---|---|---|
| ERM, informed start (mean of 4) | 0.40 | 1.03 | 0.94 | 1.55 | 0.0915 | 1.00 |
| ERM, random start (mean of 4) | 0.31 | 1.02 | 0.87 | 1.59 | 0.0923 | 1.11 |
| replica, pointwise (implicit) V_hat, 2000 samples | 0.404 | 0.905 | 0.922 | 1.489 | 0.0902 | 0.96 |
| replica, Stein V_hat, 2000 samples | 0.262 | 1.050 | 0.772 | 1.638 | 0.0886 | 1.21 |

About 1-3 % of the proximal problems are non-convex there and the jump term of V_hat is 5-7 SE from 0. With
1000 samples the pointwise map does not converge at lambda = 0.1 (Anderson stalls at a residual ~1e-2: near-degenerate
minima make the implicit derivative heavy-tailed), while the Stein map converges to 1e-8 down to lambda = 0.01 from
both starts (which give the same fixed point). Neither matches ERM on every overlap: the ERM runs from informed and
random starts end at different minima of the training loss, and the Stein (distributionally correct RS) fixed point
has a lower training objective than any ERM run. Both signs point at replica-symmetry breaking or an ERM that does not
reach the global minimum, rather than at the solver.

Replica-symmetry stability (replicon eigenvalue, :func:`at_eigenvalue`; measured with ``attnlab run
duranthon-low-snr --quick --set lams=[1,0.3,0.1,0.03,0.01]``, nu = 1, L = 3, alpha = 2, 2 QMC sets of 256 samples,
both estimators and both starts): 0.22-0.36 at lambda = 1, 0.9-1.3 at lambda = 0.3, 1.1-1.8 at lambda <= 0.1. The RS
fixed point is AT-unstable in the low-lambda regime where replica and ERM part, and each of the 5 points where the
RS iteration did not converge (lambda <= 0.03) had a replicon eigenvalue >= 1 at its last iterate: there the RS
ansatz itself is locally unstable, so a converged RS point would not be the right description either.
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
from attnlab.duranthon.data import c_nu, check_model, length_law, sample_scores

__all__ = ["Order", "FrozenSamples", "frozen_samples", "replica_map", "evaluate_map", "MapValue", "ReplicaResult",
           "solve_replica", "lambda_path", "continue_in_lambda", "continue_in_alpha", "standard_starts", "BranchCurve",
           "replica_curve", "ridge_fixed_point", "fixed_point", "secant_predictor", "solve_bayes_optimal", "BOResult",
           "bayes_optimal_test_error", "log_argmax_probs"]


class Order(NamedTuple):
    """The six order parameters on M."""

    m_k: float
    q_k: float
    V_k: float
    m_v: float
    q_v: float
    V_v: float


class FrozenSamples(NamedTuple):
    chi: jax.Array
    zeta: jax.Array
    y: jax.Array
    mask: jax.Array
    xi_k: jax.Array
    xi_v: jax.Array


def frozen_samples(key, model: str, nu, L, n: int, noise_std: float = 0.0, qmc: bool = False) -> FrozenSamples:
    """Teacher fields, labels and the two Gaussian noises of the channel, drawn once (common random numbers).

    ``qmc=True``: randomised quasi-Monte Carlo instead, one scrambled Sobol point (scipy.stats.qmc.Sobol, Owen
    scrambling seeded from ``key``) of dimension 4 L_max + 3 per sample, mapped by inverse CDFs: the base scores,
    values and both channel noises through the Gaussian quantile, the label noise likewise, the length through the
    length law's CDF and the location uniformly on the valid tokens (spiked-SLR) or through the CDF of
    ``softmax(nu chi*)`` (max-SLR; argmax at nu = inf). Same law as the Monte Carlo draws (spec 1.2-1.3); n a power
    of 2 keeps the Sobol balance properties."""
    nu = check_model(model, nu)
    if not qmc:
        ks, k1, k2 = jax.random.split(key, 3)
        s = sample_scores(ks, model, nu, L, n, noise_std)
        return FrozenSamples(s.chi, s.zeta, s.y, s.mask, jax.random.normal(k1, s.chi.shape),
                             jax.random.normal(k2, s.chi.shape))
    from scipy.special import ndtri
    from scipy.stats import qmc as sqmc

    law = length_law(L)
    Lm = law.L_max
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    u = sqmc.Sobol(4 * Lm + 3, scramble=True, seed=seed).random(n)
    u = np.clip(u, 1e-16, 1 - 1e-16)
    g = ndtri(u[:, : 4 * Lm + 1])
    base, zeta, xi_k, xi_v, noise = (g[:, :Lm], g[:, Lm:2 * Lm], g[:, 2 * Lm:3 * Lm], g[:, 3 * Lm:4 * Lm],
                                     g[:, 4 * Lm])
    cdf_len = np.cumsum([sum(p for v, p in zip(law.values, law.probs) if v == ell) for ell in range(1, Lm + 1)])
    lengths = 1 + np.minimum(np.searchsorted(cdf_len, u[:, 4 * Lm + 1], side="right"), Lm - 1)
    mask = np.arange(Lm)[None, :] < lengths[:, None]
    ue = u[:, 4 * Lm + 2]
    if model == "spiked":
        eps = np.minimum((ue * lengths).astype(int), lengths - 1)
    else:
        if math.isinf(nu):
            eps = np.argmax(np.where(mask, base, -np.inf), axis=1)
        else:
            z = np.where(mask, nu * base, -np.inf)
            p = np.exp(z - z.max(1, keepdims=True))
            cdf = np.cumsum(p / p.sum(1, keepdims=True), axis=1)
            eps = np.minimum((cdf < ue[:, None]).sum(1), lengths - 1)
    onehot = np.arange(Lm)[None, :] == eps[:, None]
    chi = base + (math.sqrt(nu) if model == "spiked" else 0.0) * onehot
    chi, zeta = np.where(mask, chi, 0.0), np.where(mask, zeta, 0.0)
    y = np.sum(np.where(onehot, zeta, 0.0), axis=1) + noise_std * noise
    return FrozenSamples(*(jnp.asarray(a) for a in (chi, zeta, y, mask, xi_k, xi_v)))


_STEPS = (1.0, 0.5, 0.25, 0.1, 0.03, 0.01)  # trial lengths of the monotone Newton line search
VERIFY_ROUNDS = 3  # multistart verifications in solve_replica(multistart="verify") before iterating that map directly
AUTO_IMPLICIT_BUDGET = 60  # map evaluations of the pointwise estimator before jacobian="auto" switches to Stein
NEWTON_STOP = 1e-12  # the inner Newton iteration stops when max |grad J| falls below this
ROUNDOFF_DECREASE = 1e-15  # ... or after a step whose predicted decrease -g.d was below this times (1 + |J|)
HESS_FLOOR = 0.01  # positive Hessian eigenvalues of the inner problem are floored at HESS_FLOOR / V_k
NEG_CURV_FLOOR = 0.5  # negative ones are replaced by max(|.|, NEG_CURV_FLOOR / V_k): short steps out of concave regions
SNAP_RADIUS = 0.05  # multistart verification: a Newton loop within SNAP_RADIUS sqrt(V_k) of the known minimum jumps there
INNER_GTOL = 1e-7  # |grad J| above this at the returned point: the sample's proximal problem did not converge


def _objective(act, chi, omega_k, omega_v, y, mask, V_k, V_v, c):
    """The proximal objective J(chi) of spec 4.2 (z eliminated)."""
    w = act(chi, mask, c)
    res = y - w @ omega_v
    return (jnp.sum(jnp.where(mask, (chi - omega_k) ** 2, 0.0)) / (2 * V_k)
            + res**2 / (2 * (1 + V_v * (w @ w))))


def _starts(omega_k, y, mask, V_k, multistart: bool, xp=jnp):
    """Starting points of the inner minimisation: omega^k, and (multistart) omega^k +- delta e_l for every valid
    token l, with delta = sqrt(V_k) (1 + |y|): the data term is at most y^2/2, so the minimiser moves by at most
    sqrt(V_k) |y| from omega^k, and these starts put one token ahead of (or behind) the others by that much.
    Shapes: omega_k, mask (..., L), y (...) -> (..., S, L) with S = 2L + 1 or 1; ``xp`` is jax.numpy (one sample,
    traced) or numpy (every sample at once, on the host: :func:`evaluate_map`)."""
    base = omega_k[..., None, :]
    if not multistart:
        return base
    L = omega_k.shape[-1]
    e = xp.where(mask[..., None, :], xp.eye(L), 0.0) * (xp.sqrt(V_k) * (1.0 + xp.abs(y)))[..., None, None]
    return xp.concatenate([base, base + e, base - e], axis=-2)


JACOBI_SWEEPS = {1: 1, 2: 2, 3: 5, 4: 6}  # cyclic Jacobi sweeps per matrix size (larger L: LAPACK's eigh)


@jax.custom_jvp
def _sym_eig(H):
    """Eigenvalues and eigenvectors (columns) of a small symmetric matrix ``H`` (L, L), unsorted.

    For L <= 4, cyclic Jacobi with a fixed number of sweeps (:data:`JACOBI_SWEEPS`, a ``fori_loop`` over one compiled
    sweep), written as scalar arithmetic so that under ``vmap`` a sweep is elementwise over the batch: rotation ``(p,
    q)`` with ``theta = (h_qq - h_pp) / (2 h_pq)``, ``t = sign(theta) / (|theta| + sqrt(theta^2 + 1))``, ``c =
    1/sqrt(1 + t^2)``, ``s = t c`` (Golub & Van Loan, Matrix Computations, Alg. 8.5.2; the smaller of the two angles,
    so the iteration converges quadratically). Measured on this CPU for 7000 3x3 matrices under vmap: about 3x faster
    than ``jnp.linalg.eigh`` (one LAPACK call per matrix), and the Newton step of the proximal problem about 2x
    faster. Accuracy (tests): reconstruction and eigenvalues to ~1e-14 relative, including repeated eigenvalues.
    Derivatives: the same JVP rule as ``jnp.linalg.eigh`` (below), so forward mode never runs through the sweeps
    (differentiating the unrolled sweeps inside the Newton loop made the "unrolled" V_hat program take minutes to
    compile)."""
    L = H.shape[-1]
    if L not in JACOBI_SWEEPS:
        return jnp.linalg.eigh(H)
    one, zero = jnp.ones_like(H[0, 0]), jnp.zeros_like(H[0, 0])

    def sweep(_, state):
        a = [list(state[0][i * L:(i + 1) * L]) for i in range(L)]
        u = [list(state[1][i * L:(i + 1) * L]) for i in range(L)]
        for p in range(L - 1):
            for q in range(p + 1, L):
                apq = a[p][q]
                nz = apq != 0
                theta = (a[q][q] - a[p][p]) / (2 * jnp.where(nz, apq, 1.0))
                t = jnp.where(theta >= 0, 1.0, -1.0) / (jnp.abs(theta) + jnp.sqrt(theta * theta + 1.0))
                t = jnp.where(nz, t, 0.0)
                cs = jax.lax.rsqrt(t * t + 1.0)
                sn = t * cs
                for r in range(L):
                    if r != p and r != q:
                        arp, arq = a[r][p], a[r][q]
                        a[r][p] = a[p][r] = cs * arp - sn * arq
                        a[r][q] = a[q][r] = sn * arp + cs * arq
                a[p][p], a[q][q] = a[p][p] - t * apq, a[q][q] + t * apq
                a[p][q] = a[q][p] = zero
                for r in range(L):
                    urp, urq = u[r][p], u[r][q]
                    u[r][p], u[r][q] = cs * urp - sn * urq, sn * urp + cs * urq
        return tuple(x for row in a for x in row), tuple(x for row in u for x in row)

    # one compiled sweep in a loop (unrolling the sweeps made the Newton programs compile ~1.7x slower)
    a0 = tuple(H[i, j] for i in range(L) for j in range(L))
    u0 = tuple(one if i == j else zero for i in range(L) for j in range(L))
    af, uf = jax.lax.fori_loop(0, JACOBI_SWEEPS[L], sweep, (a0, u0))
    a = [list(af[i * L:(i + 1) * L]) for i in range(L)]
    u = [list(uf[i * L:(i + 1) * L]) for i in range(L)]
    return jnp.stack([a[i][i] for i in range(L)]), jnp.stack([jnp.stack(row) for row in u])


@_sym_eig.defjvp
def _sym_eig_jvp(primals, tangents):
    """``dlam = diag(U^T dH U)``, ``dU = U (F o U^T dH U)`` with ``F_ij = 1/(lam_j - lam_i)`` off the diagonal: the
    rule of ``jnp.linalg.eigh`` (distinct eigenvalues)."""
    (H,), (dH,) = primals, tangents
    lam, U = _sym_eig(H)
    eye = jnp.eye(H.shape[-1], dtype=H.dtype)
    vdv = U.T @ ((dH + dH.T) / 2) @ U
    F = 1.0 / (lam[None, :] - lam[:, None] + eye) - eye
    return (lam, U), (jnp.diagonal(vdv), U @ (F * vdv))


def _newton(act, omega_k, omega_v, y, mask, V_k, V_v, c):
    """The inner problem's objective J, the modified Newton direction, one monotone step, and max|grad J|."""
    J = lambda x: _objective(act, x, omega_k, omega_v, y, mask, V_k, V_v, c)  # noqa: E731
    eye = jnp.eye(omega_k.shape[0])
    mm = mask[:, None] & mask[None, :]
    steps = jnp.asarray(_STEPS)

    def direction_grad(chi):
        g = jnp.where(mask, jax.grad(J)(chi), 0.0)
        H = jnp.where(mm, jax.hessian(J)(chi), eye)
        lam, U = _sym_eig(H)
        lam = jnp.where(lam > 0, jnp.maximum(lam, HESS_FLOOR / V_k), jnp.maximum(-lam, NEG_CURV_FLOOR / V_k))
        return -U @ ((U.T @ g) / lam), g

    def direction(chi):
        return direction_grad(chi)[0]

    def step(chi):
        """The monotone step and whether it was meaningful: ``False`` when the predicted decrease -g.d of J lies
        below J's round-off (ROUNDOFF_DECREASE (1 + |J|)), where the line search's comparisons of J are noise."""
        d, g = direction_grad(chi)
        cands = chi[None] + steps[:, None] * d[None]
        Jc = jax.vmap(J)(cands)
        b = jnp.argmin(Jc)
        J0 = J(chi)
        better = Jc[b] < J0
        return (jnp.where(better, cands[b], chi), jnp.where(better, Jc[b], J0),
                -(g @ d) > ROUNDOFF_DECREASE * (1.0 + jnp.abs(J0)))

    def gmax(x):
        return jnp.max(jnp.abs(jnp.where(mask, jax.grad(J)(x), 0.0)))

    return J, direction, step, gmax


def _newton_loop(act, omega_k, omega_v, y, mask, V_k, V_v, c, x0, i0, moved0, n_newton, target=None):
    """Monotone Newton steps from x0 (step counter i0): at most n_newton steps in all, stopping once |grad J| <=
    NEWTON_STOP, once a step leaves x unchanged (no trial step lowers J: round-off level; the step is
    deterministic, so every later step would leave it unchanged too and the result is the same), or after a step
    whose predicted decrease -g.d was below J's round-off (ROUNDOFF_DECREASE (1 + |J|)): there the line search
    compares values of J that differ by round-off only, so further steps wander at the 1e-10 level of |grad J|
    without progress (seen on about 10% of the samples of a warm-started evaluation, which then ran until the step
    cap); the final full Newton step of :func:`_prox_all` polishes the point either way. Returns the loop
    state (i, x, moved) and whether the loop would go on (only when i reached ``n_newton`` is that ``True``).

    ``target`` (L,): a known local minimum of this J (the multistart verification of :func:`solve_replica` passes
    the single-start iteration's proximal point; +inf for none). A step that lands within ``SNAP_RADIUS sqrt(V_k)``
    (max norm) of it continues from the target instead, if J is lower there: one more candidate of the monotone
    step, taken only where the loop is already deep in that minimum's basin, so the loop ends at the same minimum
    (to round-off) in one step from there instead of two or three."""
    J, _, step, gmax = _newton(act, omega_k, omega_v, y, mask, V_k, V_v, c)
    if target is None:
        target = jnp.full_like(x0, jnp.inf)
    has_target = jnp.all(jnp.isfinite(target))
    target = jnp.where(mask, target, x0)  # padded tokens never move: keep the loop's own values there
    J_target = jnp.where(has_target, J(jnp.where(has_target, target, x0)), jnp.inf)
    radius = SNAP_RADIUS * jnp.sqrt(V_k)

    def go_on(i, x, moved):
        return (i < n_newton) & (gmax(x) > NEWTON_STOP) & moved

    def body(st):
        i, x, _ = st
        xn, Jn, meaningful = step(x)
        snap = (jnp.max(jnp.abs(xn - target)) < radius) & (J_target < Jn)
        xn = jnp.where(snap, target, xn)
        return i + 1, xn, jnp.any(xn != x) & meaningful & ~snap

    i, x, moved = jax.lax.while_loop(lambda st: go_on(*st), body, (i0, x0, moved0))
    return i, x, moved


def _prox_all(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton, multistart):
    """Every start of the inner problem run to a local minimum in one program: (points (S, L), values (S,), max|grad|
    (S,)). Used by the "unrolled" V_hat and the tests; map evaluations run the loops in blocks (:func:`_presolve`) and
    the final step in :func:`_channel_block`."""
    J, direction, _, _ = _newton(act, omega_k, omega_v, y, mask, V_k, V_v, c)

    def run(x0):
        _, x, _ = _newton_loop(act, omega_k, omega_v, y, mask, V_k, V_v, c, x0, 0, True, n_newton)
        # a final full Newton step, kept unless it raises J beyond round-off: at a converged minimum it leaves x in
        # place and makes forward-mode derivatives through the steps equal the implicit-function ones
        xn = x + direction(x)
        x = jnp.where(J(xn) <= J(x) + 1e-12 * (1.0 + jnp.abs(J(x))), xn, x)
        return x, J(x), jnp.max(jnp.abs(jnp.where(mask, jax.grad(J)(x), 0.0)))

    return jax.vmap(run)(_starts(omega_k, y, mask, V_k, multistart))


def _prox_one(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton, multistart=True):
    """chi_hat for one sample: the lowest of the local minima reached from :func:`_starts` by monotone modified Newton
    (positive Hessian eigenvalues floored at HESS_FLOOR/V_k, negative ones replaced by max(|.|, NEG_CURV_FLOOR/V_k);
    best of the trial steps ``_STEPS``): the small floor keeps quadratic convergence at nearly degenerate minima, the
    larger one keeps steps out of concave regions short, so that one start lands in its nearest local minimum."""
    xs, Js, _ = _prox_all(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton, multistart)
    return xs[jnp.argmin(Js)]


def _prox_diag(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton, multistart):
    """chi_hat plus two per-sample flags: the inner problem did not converge (|grad J| > INNER_GTOL at chi_hat), and
    it is non-convex here (another start ended at a different stationary point with a higher value)."""
    xs, Js, gs = _prox_all(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton, multistart)
    b = jnp.argmin(Js)
    other = (jnp.max(jnp.abs(xs - xs[b]), axis=-1) > 1e-4) & (gs < INNER_GTOL)
    return xs[b], gs[b] > INNER_GTOL, jnp.any(other)


def _channel_one(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton, multistart=True):
    chi = _prox_one(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton, multistart)
    w = act(chi, mask, c)
    r = (y - w @ omega_v) / (1 + V_v * (w @ w))
    f_k = jnp.where(mask, (chi - omega_k) / V_k, 0.0)
    f_v = w * r
    return f_k, f_v, r


def _omegas(order, samples: FrozenSamples, xp=jnp):
    """The fields omega^k = m_k chi* + s_k xi^k and omega^v = m_v zeta* + s_v xi^v (zero on padded tokens) with
    s_a = sqrt(q_a - m_a^2): ``(omega^k, omega^v, s_k, s_v)``; ``xp`` is jax.numpy (traced) or numpy (host arrays,
    :func:`_host`)."""
    m_k, q_k, V_k, m_v, q_v, V_v = order
    s_k = xp.sqrt(xp.maximum(q_k - m_k**2, 0.0))
    s_v = xp.sqrt(xp.maximum(q_v - m_v**2, 0.0))
    om_k = m_k * samples.chi + s_k * samples.xi_k
    om_v = xp.where(samples.mask, m_v * samples.zeta + s_v * samples.xi_v, 0.0)
    return om_k, om_v, s_k, s_v


def _host(samples: FrozenSamples) -> FrozenSamples:
    """The frozen samples as host (NumPy) arrays: the inner solver gathers and reduces them on the host."""
    return FrozenSamples(*(np.asarray(a) for a in samples))


PRESOLVE_STEPS = 3  # Newton steps per round of _presolve; after each round the unfinished pairs are gathered
BLOCKS = (256, 64, 16)  # the batch sizes for which the inner-solver programs are compiled (see _blocks)


def _blocks(count: int) -> list[tuple[int, int]]:
    """``(start, size)`` blocks covering ``count`` items: full blocks of ``BLOCKS[0]``, then the remainder in the
    smallest block size that holds it (padded).

    Every program of the inner solver (:func:`_advance_block`, :func:`_channel_block`) runs on blocks of these fixed
    sizes, whatever the number of samples, of starts per sample or of unfinished pairs in a round: it is compiled
    once per (activation, L, block size), three programs, instead of once per (samples, starts, batch size). On this
    2-core CPU a block of 256 pairs costs the same per Newton step as one batch of 4096 (1.34 against 1.57 us per
    pair-step), so the cut costs only the dispatches (about 0.2 ms each). Before (one program per shape), the replica
    test file compiled 104 Newton-loop programs (about 145 s of its 195 s with the compile cache off)."""
    big = BLOCKS[0]
    out = [(start, big) for start in range(0, count - count % big, big)]
    rest = count % big
    if rest:
        out.append((count - rest, min(b for b in BLOCKS if b >= rest)))
    return out


def _pad(idx, size: int):
    """Indices ``idx`` padded to ``size`` by repeating the first (the padding computes that item again)."""
    return np.concatenate([idx, np.full(size - idx.size, idx[0])]) if idx.size < size else idx


def _scalars(*values):
    """Host float64 scalars: the traced scalar arguments of the block programs always have the same type (a Python
    float is weakly typed and would compile a second program)."""
    return tuple(np.float64(v) for v in values)


@partial(jax.jit, static_argnames=("act",))
def _advance_block(act, pairs, V_k, V_v, c, x, i, moved, cap, n_newton, target):
    """One block of (sample, start) Newton loops (:func:`_newton_loop`), each resumed from its state ``(x, i, moved)``
    until its step counter reaches ``cap`` (per pair) or it stops. ``pairs = (omega^k, omega^v, y, mask)`` of each
    pair. Returns the new states, whether each loop would go on (only a loop that reached its cap below ``n_newton``
    can), and J and max|grad J| at the new points. ``target``: each pair's known minimum (+inf for none), see
    :func:`_newton_loop`."""
    ok, ov, y, mask = pairs
    i, x, moved = jax.vmap(lambda a, b, yy, m, xx, ii, mv, cp, t: _newton_loop(act, a, b, yy, m, V_k, V_v, c, xx, ii,
                                                                               mv, cp, t))(ok, ov, y, mask, x, i,
                                                                                           moved, cap, target)

    def ends(a, b, yy, m, xx):
        J, _, _, gmax = _newton(act, a, b, yy, m, V_k, V_v, c)
        return J(xx), gmax(xx)

    Jx, g = jax.vmap(ends)(ok, ov, y, mask, x)
    return x, i, moved, (i < n_newton) & (g > NEWTON_STOP) & moved, Jx, g


class _Ends(NamedTuple):
    """End points of the Newton loops of ``_presolve`` (host arrays, leading shape (n, S)): points (n, S, L), J,
    max|grad J|, steps taken, and which loops are unfinished (only when ``max_rounds`` stopped the rounds)."""

    x: np.ndarray
    J: np.ndarray
    gmax: np.ndarray
    steps: np.ndarray
    active: np.ndarray


def _presolve(act, V_k, V_v, c, pairs, starts, n_newton: int, max_rounds: int | None = None, more=(),
              target=None, steps: int = PRESOLVE_STEPS) -> _Ends:
    """The Newton loops of every (sample, start) pair, from ``starts`` (n, S, L), for the samples' ``pairs =
    (omega^k, omega^v, y, mask)`` (host arrays, leading dimension n): rounds of PRESOLVE_STEPS steps, after each of
    which the unfinished pairs are gathered and cut into blocks (:func:`_blocks`), so that neither the slowest pair
    sets the cost of the whole batch nor a new batch size costs a compilation. Per pair the step sequence is the
    same as in one long loop. ``act`` has c = 0 (``c`` is passed as a number).

    ``more``: further ``(pairs, starts)`` groups (other sizes n', S') run in the same rounds and blocks (the tracked
    minima of a warm evaluation: one read-back per round for both); then a list of one ``_Ends`` per group.
    ``target`` (n, L): a known local minimum per sample of the first group, a shortcut for its loops
    (:func:`_newton_loop`). ``steps``: Newton steps per round (a block's vmapped loop runs as many steps as its
    slowest pair, so rounds of one step waste less where the pairs need different numbers of steps, as with
    targets: a verification took 41 instead of 51 ms with one step per round)."""
    groups = [(pairs, starts), *more]
    ok, ov, y, mask, x, tg, shapes = [], [], [], [], [], [], []
    for g, (prs, st) in enumerate(groups):
        n, S, L = st.shape
        sample = np.repeat(np.arange(n), S)
        for dst, a in zip((ok, ov, y, mask), prs):
            dst.append(a[sample])
        x.append(np.asarray(st, dtype=np.float64).reshape(n * S, L))
        tg.append(np.asarray(target, dtype=np.float64)[sample] if g == 0 and target is not None
                  else np.full((n * S, L), np.inf))
        shapes.append((n, S, L))
    ok, ov, y, mask, x, tg = (np.concatenate(a) for a in (ok, ov, y, mask, x, tg))
    P = x.shape[0]
    i, moved = np.zeros(P, np.int32), np.ones(P, bool)
    J, g, active = np.full(P, np.nan), np.full(P, np.nan), np.ones(P, bool)
    V_k, V_v, c = _scalars(V_k, V_v, c)
    cap_all, rounds = np.int32(n_newton), 0
    while active.any() and (max_rounds is None or rounds < max_rounds):
        idx = np.nonzero(active)[0]
        calls = []
        for start, size in _blocks(idx.size):  # dispatched one after the other, read back afterwards
            sel = idx[start:start + size]
            p = _pad(sel, size)
            cap = np.minimum(i[p] + steps, n_newton).astype(np.int32)
            calls.append((sel, _advance_block(act, (ok[p], ov[p], y[p], mask[p]), V_k, V_v, c, x[p], i[p], moved[p],
                                              cap, cap_all, tg[p])))
        for sel, out in calls:
            xb, ib, mb, ab, Jb, gb = (np.asarray(a)[:sel.size] for a in out)
            # A pair whose loop took no step in this round has stopped by the loop's own test. The activity test is
            # evaluated after the loop, whose round-off can put |grad J| on the other side of NEWTON_STOP = 1e-12:
            # without this, such a pair was "active" forever and _presolve never returned (seen at lambda = 0.01 in
            # duranthon-low-snr).
            active[sel] = ab & (ib != i[sel])
            x[sel], i[sel], moved[sel], J[sel], g[sel] = xb, ib, mb, Jb, gb
        rounds += 1
    out, start = [], 0
    for n, S, L in shapes:
        part = slice(start, start + n * S)
        out.append(_Ends(x[part].reshape(n, S, L), J[part].reshape(n, S), g[part].reshape(n, S),
                         i[part].reshape(n, S), active[part].reshape(n, S)))
        start += n * S
    return out if more else out[0]


def _lowest(ends: _Ends):
    """Per sample, the end point with the lowest J: points (n, L) and values (n,)."""
    b = np.argmin(ends.J, axis=1)
    rows = np.arange(b.size)
    return ends.x[rows, b], ends.J[rows, b]


def _implicit_fields(act, ok, ov, y, mask, V_k, V_v, c, chi):
    """Per-sample integrands at the proximal point ``chi``: f^k, f^v, r, the pointwise divergences sum_l df^a_l /
    d omega^a_l by the implicit function theorem (``d chi_hat/d omega = -H^{-1} d(grad J)/d omega``), and the
    Frobenius products of the channel Jacobian blocks for the replicon (:func:`at_eigenvalue`)."""
    mm = mask[:, None] & mask[None, :]

    def grad_J(x, o_k, o_v):
        return jnp.where(mask, jax.grad(lambda x: _objective(act, x, o_k, o_v, y, mask, V_k, V_v, c))(x), 0.0)

    def f_v(x, o_v):
        w = act(x, mask, c)
        return w * (y - w @ o_v) / (1 + V_v * (w @ w))

    H = jnp.where(mm, jax.jacfwd(grad_J, 0)(chi, ok, ov), jnp.eye(chi.shape[0]))
    dchi_k = -jnp.linalg.solve(H, jnp.where(mm, jax.jacfwd(grad_J, 1)(chi, ok, ov), 0.0))
    dchi_v = -jnp.linalg.solve(H, jnp.where(mm, jax.jacfwd(grad_J, 2)(chi, ok, ov), 0.0))
    # the Jacobian blocks J^{ac} = d f^a / d omega^c (L x L each; zero on padded tokens)
    dfv_chi = jax.jacfwd(f_v, 0)(chi, ov)
    eye = jnp.eye(chi.shape[0])
    blocks = jnp.stack([jnp.stack([jnp.where(mm, dchi_k - eye, 0.0) / V_k, dchi_v / V_k]),
                        jnp.stack([dfv_chi @ dchi_k, dfv_chi @ dchi_v + jax.jacfwd(f_v, 1)(chi, ov)])])
    # Frobenius products P[a, c, b, d] = <J^{ac}, J^{bd}>_F (the replicon / AT operator, see at_eigenvalue)
    frob = jnp.einsum("acij,bdij->acbd", blocks, blocks)
    w = act(chi, mask, c)
    r = (y - w @ ov) / (1 + V_v * (w @ w))
    fk = jnp.where(mask, (chi - ok) / V_k, 0.0)
    return (fk, w * r, r, jnp.sum(jnp.where(mask, jnp.diagonal(blocks[0, 0]), 0.0)),
            jnp.sum(jnp.where(mask, jnp.diagonal(blocks[1, 1]), 0.0)), frob)


@partial(jax.jit, static_argnames=("act",))
def _channel_block(act, pairs, V_k, V_v, c, x):
    """One block of samples: the final full Newton step of :func:`_prox_all` from the loops' end points ``x`` (kept
    unless it raises J beyond round-off), then :func:`_implicit_fields` there. Returns (f^k, f^v, r, div_k, div_v,
    frob, unconverged (|grad J| > INNER_GTOL), chi_hat)."""

    def one(ok, ov, y, mask, x0):
        J, direction, _, gmax = _newton(act, ok, ov, y, mask, V_k, V_v, c)
        xn = x0 + direction(x0)
        chi = jnp.where(J(xn) <= J(x0) + 1e-12 * (1.0 + jnp.abs(J(x0))), xn, x0)
        return _implicit_fields(act, ok, ov, y, mask, V_k, V_v, c, chi) + (gmax(chi) > INNER_GTOL, chi)

    return jax.vmap(one)(*pairs, x)


def _channel(act, V_k, V_v, c, pairs, x):
    """:func:`_channel_block` over every sample, in blocks (:func:`_blocks`): host arrays with leading dimension n."""
    n = x.shape[0]
    V_k, V_v, c = _scalars(V_k, V_v, c)
    calls = []
    for start, size in _blocks(n):
        p = _pad(np.arange(start, min(start + size, n)), size)
        calls.append(_channel_block(act, tuple(a[p] for a in pairs), V_k, V_v, c, x[p]))
    parts = [[np.asarray(a) for a in out] for out in calls]
    return [np.concatenate([part[j] for part in parts])[:n] for j in range(len(parts[0]))]


def compile_blocks(act: Activation, samples: FrozenSamples, n_newton: int = 30):
    """Compile the inner solver's programs (:func:`_advance_block`, :func:`_channel_block`) for every block size
    (:data:`BLOCKS`) at the samples' L (benchmarks call this so that no compilation falls inside a timing). The
    programs do not depend on the number of samples or of starts."""
    L = samples.chi.shape[1]
    act0 = dataclasses.replace(act, c=0.0)
    V_k, V_v, c = _scalars(1.0, 1.0, act.c)
    for size in BLOCKS:
        pairs = (np.zeros((size, L)), np.zeros((size, L)), np.zeros(size), np.ones((size, L), bool))
        x, i = np.zeros((size, L)), np.zeros(size, np.int32)
        jax.block_until_ready(_advance_block(act0, pairs, V_k, V_v, c, x, i, np.ones(size, bool), i,
                                             np.int32(n_newton), np.full((size, L), np.inf)))
        jax.block_until_ready(_channel_block(act0, pairs, V_k, V_v, c, x))


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
        fk, fv, r = _channel_one(act, ok, ov, y, mask, V_k, V_v, c, n_newton, multistart)
        dfk = jnp.diag(jax.jacfwd(lambda o: _channel_one(act, o, ov, y, mask, V_k, V_v, c, n_newton,
                                                         multistart)[0])(ok))
        dfv = jnp.diag(jax.jacfwd(lambda o: _channel_one(act, ok, o, y, mask, V_k, V_v, c, n_newton,
                                                         multistart)[1])(ov))
        chi, bad, ncvx = _prox_diag(act, ok, ov, y, mask, V_k, V_v, c, n_newton, multistart)
        return (fk, fv, r, jnp.sum(jnp.where(mask, dfk, 0.0)), jnp.sum(jnp.where(mask, dfv, 0.0)),
                jnp.full((2, 2, 2, 2), jnp.nan), bad, chi, ncvx)

    return jax.vmap(one)(om_k, om_v, samples.y, samples.mask)


def _reduce_hats(order, alpha: float, s: FrozenSamples, s_k: float, s_v: float, fields, ncvx, jacobian: str):
    """The hats of spec 4.2 from the per-sample integrands (host arrays): ``(hats, E[r^2]/2, diagnostics, alpha
    E[frob])``, the diagnostics being (unconverged fraction, non-convex fraction, jump_k, its SE, jump_v, its SE).

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


def at_eigenvalue(P, V_k: float, V_v: float) -> float:
    r"""Replicon (de Almeida-Thouless) eigenvalue of the RS fixed point on M: the RS saddle point is locally stable
    against replica-symmetry breaking iff the returned value is < 1 [I: derived here, not from the paper].

    Formula. With the channel Jacobian blocks ``J^{ac}_{ll'} = d f^a_l / d omega^c_{l'}`` (a, c in {k, v}; l, l' the
    L tokens; f^k = (chi_hat - omega^k)/V_k, f^v = sigma(chi_hat) r, evaluated pointwise by the implicit function
    theorem at the proximal point) and ``P[a, c, b, d] = alpha E[<J^{ac}, J^{bd}>_F]`` (argument ``P``), the
    replicon operator acting on symmetric 2 x 2 perturbations dQ of the (k, v) overlap matrix is::

        T(dQ)_{ab} = V_a V_b sum_{c,d} P[a, c, b, d] dQ_{cd}
                   = V_a V_b alpha E[ sum_{l,l'} (J_{ll'} dQ J_{ll'}^T)_{ab} ],     J_{ll'} = (J^{ac}_{ll'})_{a,c} in R^{2x2}

    and the condition is ``rho(T) < 1`` (spectral radius over symmetric dQ). f = -grad of the Moreau envelope of the
    proximal problem, so J (2L x 2L) is symmetric, ``A: dQ -> E sum J dQ J^T`` is self-adjoint for the Frobenius
    product and T = V A V is similar to a self-adjoint map: its eigenvalues are real; A maps positive semi-definite
    matrices to positive semi-definite ones, so rho(T) is itself an eigenvalue (Krein-Rutman).

    Derivation. At zero temperature the replicon mode perturbs the overlap between two different replicas away from
    its RS value; each replica's fields then carry an extra independent Gaussian fluctuation ``d omega_l ~ N(0, dQ)``,
    independent across tokens (the student directions orthogonal to k*, v* see i.i.d. Gaussian tokens under the
    base measure, and the tilt acts on chi* only). The channel answers linearly, ``d f_l = sum_{l'} J_{ll'} d
    omega_{l'}``, and the conjugate overlaps move by ``dQ_hat = alpha E[sum_l d f_l d f_l^T]`` =
    ``alpha E[sum_{l,l'} J_{ll'} dQ J_{ll'}^T]``. The ridge prior's proximal map is linear with slope V_a =
    1/(lambda_a + V_hat_a) per vector, so the overlaps answer ``dQ = V dQ_hat V`` with V = diag(V_k, V_v). The
    perturbation grows under this loop, i.e. RS is unstable, iff rho(T) >= 1. This is the vector form of the scalar
    GLM/ERM condition ``alpha E[(d f_out/d omega)^2] E[(d f_in/d B)^2] < 1`` (de Almeida & Thouless, J. Phys. A 11,
    983 (1978), for the SK model; the scalar form is the zero-temperature replicon of generalised linear ERM).

    Check (tested): at L = 1 the k-sector is inert (J^{kk} = J^{kv} = J^{vk} = 0) and ``J^{vv} = -1/(1 + V_v)``, so
    ``rho(T) = alpha V_v^2 / (1 + V_v)^2 = (1 - lambda V_v) V_v / (1 + V_v) < 1`` at the ridge fixed point: ridge
    is always RS-stable.

    Args: P (2, 2, 2, 2) as above (alpha included), V_k, V_v. Returns rho(T) (NaN if P is not finite)."""
    P = np.asarray(P, dtype=np.float64)
    if not np.all(np.isfinite(P)):
        return math.nan
    V = np.array([V_k, V_v])
    r = 1.0 / math.sqrt(2.0)
    basis = [np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[0.0, 0.0], [0.0, 1.0]]),
             np.array([[0.0, r], [r, 0.0]])]
    T = lambda dQ: np.outer(V, V) * np.einsum("acbd,cd->ab", P, dQ)  # noqa: E731
    M = np.array([[np.sum(Bi * T(Bj)) for Bj in basis] for Bi in basis])
    return float(np.max(np.abs(np.linalg.eigvals(M))))


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
    """The ridge prior's update of spec 4.2: ``V_a = 1/(lambda_a + V_hat_a)``, ``m_a = m_hat_a V_a``,
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
    """The fixed-point map with its diagnostics (see :class:`MapValue`); prior updates of spec 4.2
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


class ReplicaResult(NamedTuple):
    """Fixed point and its convergence report.

    ``residual`` is max |F(x) - x| over the six order parameters at the returned point, ``n_iter`` the number of
    map evaluations, ``branch`` the name of the start it was continued from, ``status`` "converged",
    "max_iter", "invalid" (lambda + V_hat <= 0 or a non-finite map even after backtracking) or "bad_start".
    ``objective`` is the training objective per sample at the fixed point, ``E[r^2/2] + (lambda_k q_k + lambda_v
    q_v)/(2 alpha)`` (the RS ground-state energy: the ERM minimiser is the branch with the lowest value);
    ``inner_unconverged`` / ``nonconvex`` / ``jump_*`` are the map's diagnostics (:class:`MapValue`) at the
    returned point, ``jacobian`` the V_hat estimator used, ``at`` the replicon eigenvalue (:func:`at_eigenvalue`;
    RS stable iff < 1) at the returned point's input, ``chi`` the proximal points of the last evaluation and
    ``track`` its tracked minima (:func:`evaluate_map`), the warm start of a nearby solve."""

    order: Order
    train_loss: float
    residual: float
    n_iter: int
    converged: bool
    branch: str = ""
    status: str = ""
    objective: float = math.nan
    inner_unconverged: float = math.nan
    nonconvex: float = math.nan
    alpha: float = math.nan
    lam_k: float = math.nan
    lam_v: float = math.nan
    jump_k: float = math.nan
    jump_k_se: float = math.nan
    jump_v: float = math.nan
    jump_v_se: float = math.nan
    jacobian: str = ""
    at: float = math.nan
    chi: object = None
    track: object = None


def _check_args(alpha, lam_k, lam_v, damping):
    if not alpha > 0 or not math.isfinite(alpha):
        raise ValueError(f"sample ratio alpha must be finite and > 0, got {alpha}")
    if not (lam_k > 0 and lam_v > 0):
        raise ValueError(f"the replica solver needs lambda_k, lambda_v > 0, got {lam_k}, {lam_v}")
    if not 0 <= damping < 1:
        raise ValueError(f"damping must lie in [0, 1), got {damping}")


def _feasible(x) -> np.ndarray | None:
    """Project onto the physical set (q_a >= m_a^2); None if some V_a <= 0 or a value is not finite."""
    x = np.array(x, dtype=np.float64)
    if not np.all(np.isfinite(x)) or x[2] <= 0 or x[5] <= 0:
        return None
    x[1], x[4] = max(x[1], x[0] ** 2), max(x[4], x[3] ** 2)
    return x


def _make_result(x, v, res, n, status, jac, alpha, lam_k, lam_v, branch) -> ReplicaResult:
    """The :class:`ReplicaResult` of the point ``x`` with the map value ``v`` (its diagnostics)."""
    o = Order(*(float(t) for t in x))
    obj = v.train_loss + (lam_k * o.q_k + lam_v * o.q_v) / (2 * alpha)
    return ReplicaResult(o, v.train_loss, res, n, status == "converged", branch, status, obj,
                         v.inner_unconverged, v.nonconvex, float(alpha), float(lam_k), float(lam_v),
                         v.jump_k, v.jump_k_se, v.jump_v, v.jump_v_se, jac, v.at, v.chi, v.track)


def solve_replica(act: Activation, alpha: float, lam_k: float, lam_v: float, samples: FrozenSamples, init,
                  damping: float = 0.5, tol: float = 1e-8, max_iter: int = 500, n_newton: int = 30,
                  method: str = "anderson", memory: int = 6, branch: str = "", multistart: bool | str = "verify",
                  jacobian: str = "auto", warm_start: bool = True, chi0=None, history=None,
                  v0=None, track0=None, record=None) -> ReplicaResult:
    r"""Fixed point of the map F (:func:`evaluate_map`) from ``init`` (six numbers), to ``max|F(x) - x| < tol``.

    ``method="damped"``: ``x <- damping x + (1 - damping) F(x)``.

    ``method="anderson"`` (default): Anderson acceleration, type II with mixing ``beta = 1 - damping`` and the last
    ``memory`` differences (Walker & Ni, SIAM J. Numer. Anal. 49, 1715 (2011), eq. (2.1)/Alg. AA; Anderson, J. ACM
    12, 547 (1965))::

        g_j = F(x_j) - x_j,   gamma = argmin |g_j - dG gamma|_2,   x_{j+1} = x_j + beta g_j - (dX + beta dG) gamma

    with dX, dG the differences of the stored iterates and residuals. ``multistart``: the inner problem from one
    start (omega^k) or from 2L + 1 starts (:func:`_starts`, the global minimum of non-convex proximal problems);
    "verify" (default) iterates with one start to convergence, then evaluates the multistart map once there: if no
    sample had a lower minimum elsewhere that is the fixed point of the multistart map; otherwise the single-start
    iteration resumes, warm-started at the multistart proximal points (so it follows the lower minima), and is
    verified again (at most ``VERIFY_ROUNDS`` times, then the multistart map is iterated directly). The returned
    point is in every case a fixed point of the multistart map to ``tol``. Safeguards: the history is cleared and the
    plain damped step taken when the accelerated point leaves the physical set (V_a <= 0), or when its residual is
    more than 10 times the current one; q_a is projected onto q_a >= m_a^2. If F is invalid at a trial point
    (lambda + V_hat <= 0, see :func:`evaluate_map`), the step is halved towards the current point (up to 20 times).

    ``jacobian``: the V_hat estimator of :func:`evaluate_map`, or "auto" (default): the pointwise implicit one
    (exact per sample, lowest variance where the proximal problems are convex) for at most
    ``AUTO_IMPLICIT_BUDGET`` evaluations, then, if that did not converge, Stein's from ``init`` (bounded integrand:
    near a fold of the proximal map the implicit derivative is heavy-tailed and a single frozen sample can stall the
    iteration; where minimisers switch the Stein form is also the correct, distributional one). The estimator that
    produced the fixed point is reported in ``ReplicaResult.jacobian``; ``n_iter`` counts every evaluation.

    ``warm_start`` (default True): each single-start evaluation starts the inner Newton iterations at the proximal
    points of the previous valid evaluation (``chi0`` for the first one, e.g. ``ReplicaResult.chi`` of a nearby
    solve; omega^k if None) instead of at omega^k: near convergence one or two Newton steps per sample instead of
    about ten. Multistart evaluations always start from :func:`_starts`.

    ``track0``: tracked local minima (:func:`evaluate_map`, ``MapValue.track``; e.g. ``ReplicaResult.track`` of a
    nearby solve) used with ``chi0`` by the single-start evaluations; each evaluation passes its advanced track to
    the next, and a multistart verification that finds lower minima replaces it by its own.

    ``v0``: the single-start map's value at ``init`` with the warm start ``chi0`` (:func:`evaluate_map` with
    ``jacobian="implicit"``), when the caller has computed it (e.g. to check a continuation predictor); it is used
    by the first estimator's attempt and not evaluated again.

    ``history``: Anderson's memory ``(dX, dG)`` carried in from a nearby solve and updated in place (see
    :func:`fixed_point`; continuation in alpha passes one pair along a branch). It is used by the first estimator's
    attempt only; memory 6 (the number of order parameters) with the carried history took the benchmark curve from
    495 to 373 map evaluations.

    ``record``: a list to which every valid evaluation is appended as ``(x, MapValue, alpha, jacobian)`` (the last
    ``RECORD_KEEP`` kept): :func:`continue_in_alpha` re-uses them at the next alpha (:func:`rescaled_start`).
    """
    _check_args(alpha, lam_k, lam_v, damping)
    if method not in ("anderson", "damped"):
        raise ValueError(f"method must be 'anderson' or 'damped', got {method!r}")
    if memory < 1:
        raise ValueError(f"Anderson memory must be >= 1, got {memory}")
    if multistart not in (True, False, "verify"):
        raise ValueError(f"multistart must be True, False or 'verify', got {multistart!r}")

    if jacobian not in ("implicit", "unrolled", "stein", "auto"):
        raise ValueError(f"jacobian must be 'implicit', 'unrolled', 'stein' or 'auto', got {jacobian!r}")

    def evaluate(x, jac, ms, chi=None, track=None, known=None):
        v = evaluate_map(act, x, alpha, lam_k, lam_v, samples, n_newton, jac, ms, chi, track, known)
        if record is not None and v.valid:
            record.append((np.asarray(x, dtype=np.float64), v, float(alpha), jac))
            del record[:-RECORD_KEEP]
        return v

    def F_with(ms, jac, chi=None, track=None):
        if ms or not warm_start:
            return lambda x: evaluate(x, jac, ms)
        last = [chi, track if chi is not None else None]

        def F(x):
            v = evaluate(x, jac, False, last[0], last[1])
            if v.valid:
                last[0], last[1] = v.chi, v.track
            return v

        return F

    def result(x, v, res, n, status, jac):
        return _make_result(x, v, res, n, status, jac, alpha, lam_k, lam_v, branch)

    def attempt(x, jac, budget, hist, v_first=None):
        if multistart != "verify":
            return fixed_point(F_with(bool(multistart), jac, chi0, track0), x, _feasible, damping, tol, budget,
                               method, memory, hist, v_first if not multistart else None)
        chi, track, n = chi0, track0, 0
        for _ in range(VERIFY_ROUNDS):
            x, v, res, n1, status = fixed_point(F_with(False, jac, chi, track), x, _feasible, damping, tol,
                                                budget - n, method, memory, hist, v_first)
            n += n1
            if status != "converged":
                return x, v, res, n, status
            # the single-start fixed point is one of the multistart map when no sample has a lower minimum there;
            # the loops use the single-start proximal points (at the last iterate, within tol of x) as known minima
            v = evaluate(x, jac, True, known=v.chi)
            n += 1
            if not v.valid:
                return x, v, res, n, "invalid"
            res = float(np.max(np.abs(v.order - x)))
            if res < tol:
                return v.order, v, res, n, "converged"
            # some samples have a lower minimum: follow it. The multistart value at x is also the single-start
            # map's value there when warm-started at its proximal points, so the next round starts from it; the
            # stored secant pairs describe the map before the switch, so Anderson's memory starts afresh
            chi, track, v_first = v.chi, v.track, v
            if hist is not None:
                hist[0].clear(), hist[1].clear()
        x2, v2, res, n2, status = fixed_point(F_with(True, jac), x, _feasible, damping, tol, max(budget - n, 1),
                                              method, memory, hist)
        return x2, v2, res, n + n2, status

    x = _feasible(init)
    if x is None:
        raise ValueError(f"initial order parameters need V_k, V_v > 0 and finite values, got {tuple(init)}")
    if jacobian != "auto":
        return result(*attempt(x, jacobian, max_iter, history, v0 if jacobian == "implicit" else None), jacobian)
    first = min(max_iter, AUTO_IMPLICIT_BUDGET)
    out = attempt(x, "implicit", first, history, v0)
    if out[4] == "converged" or first >= max_iter:
        return result(*out, "implicit")
    if history is not None:  # the implicit map's secant information does not describe Stein's
        history[0].clear(), history[1].clear()
    x2, v2, res, n2, status = attempt(x, "stein", max_iter - out[3], history)
    return result(x2, v2, res, out[3] + n2, status, "stein")


def fixed_point(F, x, feasible, damping: float = 0.5, tol: float = 1e-8, max_iter: int = 500,
                method: str = "anderson", memory: int = 6, history=None, v0=None):
    """Safeguarded Anderson (or damped) iteration for ``x = F(x).order`` (see :func:`solve_replica`). ``v0``: the
    value F(x) at the start, when the caller has it already (it is then not evaluated again nor counted).

    ``F(x)`` returns an object with ``.order`` (the new point, NaN where undefined) and ``.valid``; ``feasible(x)``
    projects a trial point onto the admissible set or returns None. Returns ``(x, F(x), residual, evaluations,
    status)`` with status "converged" (then x is F of the last iterate), "max_iter", "invalid" or "bad_start".

    ``history``: a pair of lists ``(dX, dG)``, Anderson's stored differences, used as the initial memory and
    updated in place. Continuation passes one pair along a curve: the secant information of the previous point's
    last steps approximates the Jacobian at the next point, so the first step there is already quasi-Newton
    instead of a damped step (the safeguards below clear it if it misleads)."""
    v, n_eval = (F(x), 1) if v0 is None else (v0, 0)
    if not v.valid:
        return x, v, math.inf, n_eval, "bad_start"
    beta = 1.0 - damping
    dX, dG = history if history is not None else ([], [])
    x_prev = g_prev = None
    while True:
        g = v.order - x
        res = float(np.max(np.abs(g)))
        if res < tol:
            return v.order, v, res, n_eval, "converged"
        if n_eval >= max_iter:
            return x, v, res, n_eval, "max_iter"
        if method == "anderson" and x_prev is not None:
            dX.append(x - x_prev)
            dG.append(g - g_prev)
            del dX[:-memory], dG[:-memory]
        cand = None
        if method == "anderson" and dG:
            Gm, Xm = np.stack(dG, 1), np.stack(dX, 1)
            gamma = np.linalg.lstsq(Gm, g, rcond=1e-12)[0]
            cand = feasible(x + beta * g - (Xm + beta * Gm) @ gamma)
            if cand is None:
                dX.clear(), dG.clear()
        plain = cand is None
        if plain:
            cand = feasible(x + beta * g)
        for _ in range(20):
            vc = F(cand)
            n_eval += 1
            if vc.valid:
                break
            dX.clear(), dG.clear()
            cand = x + 0.5 * (cand - x)
        else:
            return x, v, res, n_eval, "invalid"
        if not plain and float(np.max(np.abs(vc.order - cand))) > 10 * res:
            dX.clear(), dG.clear()  # the accelerated step overshot: take the damped step instead
            cand = feasible(x + beta * g)
            vc = F(cand)
            n_eval += 1
            if not vc.valid:
                return x, v, res, n_eval, "invalid"
        x_prev, g_prev = x, g
        x, v = cand, vc


def lambda_path(lam: float, lam_start: float = 1.0, per_decade: int = 2) -> list[float]:
    """Geometric continuation path from ``lam_start`` to ``lam`` (``per_decade`` steps per factor 10), ending
    exactly at ``lam``; ``[lam]`` when ``lam >= lam_start``."""
    if not lam > 0:
        raise ValueError(f"lambda must be > 0, got {lam}")
    if lam >= lam_start:
        return [float(lam)]
    n = max(1, math.ceil(per_decade * math.log10(lam_start / lam)))
    return [float(lam_start * (lam / lam_start) ** (i / n)) for i in range(n + 1)]


def continue_in_lambda(act: Activation, alpha: float, lam_k: float, lam_v: float, samples: FrozenSamples, init,
                       lam_start: float = 1.0, per_decade: int = 2, **kw) -> list[ReplicaResult]:
    """Continuation in lambda at fixed alpha: solve at ``lam_start`` (or at the target if it is larger), then along
    a geometric path down to (lam_k, lam_v) (both scaled together), each solve started at the previous solve's
    last evaluation (its proximal points and tracked minima as the inner warm start), with that evaluation's
    value at the new lambdas and Anderson's memory rebuilt from the last evaluations, at no cost: the hats do
    not depend on lambda, which enters only the prior update (:func:`rescaled_start`). Stops at the first point
    that does not converge. Returns every point's result (the last is the target if all converged)."""
    path = lambda_path(min(lam_k, lam_v), lam_start, per_decade)
    scale = [p / min(lam_k, lam_v) for p in path]
    out, x, chi, track = [], init, None, None
    first_jac = _first_estimator(kw)
    record: list = []
    for s in scale:
        v0 = hist = None
        start = (rescaled_start(record, alpha, lam_k * s, lam_v * s, first_jac, kw.get("memory", 6))
                 if out and out[-1].jacobian == first_jac else None)
        if start is not None:
            x, v0, dX, dG = start
            x, hist = tuple(x), (dX, dG)
        r = solve_replica(act, alpha, lam_k * s, lam_v * s, samples, x, chi0=chi, track0=track, history=hist,
                          v0=v0, record=record, **kw)
        out.append(r)
        if not r.converged:
            break
        x, chi, track = tuple(r.order), r.chi, r.track  # proximal points, tracked minima: the next warm start
    return out


def standard_starts(model: str, nu, L=None, informed_scale: float | None = None, V0: float = 1.0) -> dict:
    """The two branch starts: ``informed`` (the oracle of Prop. 4.2: m_k = c_nu, q_k = c_nu^2, m_v = q_v = 1;
    ``informed_scale`` replaces c_nu, needed for max-SLR nu = inf) and ``uninformed`` (what a random start of norm
    sqrt(D) has: m ~ 0, q = 1; m = 0.01 to break the sign symmetry)."""
    c = c_nu(model, nu) if informed_scale is None else float(informed_scale)
    if not math.isfinite(c):
        raise ValueError("informed start at nu = inf needs a finite informed_scale")
    return {"informed": (c, c * c, V0, 1.0, 1.0, V0), "uninformed": (0.01, 1.0, V0, 0.01, 1.0, V0)}


def secant_predictor(points, params, target):
    """Continuation predictor: the next start from the last two converged fixed points ``points`` at ``params``
    (e.g. alphas), linear in log(param); the last point if fewer than two or if the prediction leaves the physical
    set (V_a <= 0)."""
    if len(points) < 2:
        return tuple(points[-1])
    (x0, x1), (p0, p1) = (np.asarray(points[-2]), np.asarray(points[-1])), params[-2:]
    t = (math.log(target) - math.log(p1)) / (math.log(p1) - math.log(p0))
    x = _feasible(x1 + t * (x1 - x0))
    return tuple(x) if x is not None else tuple(x1)


RECORD_KEEP = 16  # evaluations that solve_replica(record=...) keeps


def _first_estimator(kw) -> str:
    """The V_hat estimator a solve with options ``kw`` starts with ("auto" starts with the implicit one). A
    rescaled start's value ``v0`` is that estimator's; solve_replica ignores ``v0`` when it iterates the multistart
    map directly (``multistart=True``)."""
    jacobian = kw.get("jacobian", "auto")
    return "implicit" if jacobian == "auto" else jacobian


def rescaled_start(record, alpha: float, lam_k: float, lam_v: float, jacobian: str, memory: int = 6):
    """A start at a new alpha, with Anderson's memory, from the evaluations of a solve at another alpha (same
    samples and lambdas), at no cost. The map depends on alpha only through its hats, which are alpha times sample
    means at the input order (:func:`_reduce_hats`): F(x; alpha) = prior_update(alpha M(x)). So every recorded
    evaluation (x, hats = alpha_0 M(x)) gives the value at the new alpha, prior_update(hats alpha / alpha_0),
    exactly. From the last ``memory + 1`` recorded evaluations of the estimator ``jacobian`` (the one the next
    solve starts with) this returns ``(x, v, dX, dG)``: the last point, its value at ``alpha`` (a ``MapValue``
    whose ``at`` and jump terms are NaN), and the differences of consecutive points and of their residuals
    F(x; alpha) - x, Anderson's secant pairs of the new map itself. None if fewer than two are valid there.

    On the benchmark curve (bench/replica.py) this took the continuation from 291 to 239 map evaluations against
    the secant prediction (which costs one evaluation to check and carries the previous alpha's secant pairs).
    ``memory + 1`` points are used because more (8 to 13 pairs, measured) made the first steps worse at low alpha,
    where proximal minimisers switch between iterates."""
    pts = []
    for x, v, a, _ in [r for r in record if r[3] == jacobian][-(memory + 1):]:
        hats = np.asarray(v.hats, dtype=np.float64) * (alpha / a)
        new = prior_update(hats, lam_k, lam_v)
        if np.all(np.isfinite(new)):
            pts.append((x, new, v._replace(order=new, hats=hats, at=math.nan, jump_k=math.nan, jump_k_se=math.nan,
                                           jump_v=math.nan, jump_v_se=math.nan)))
    if len(pts) < 2:
        return None
    dX = [x2 - x1 for (x1, _, _), (x2, _, _) in zip(pts[:-1], pts[1:])]
    dG = [(n2 - x2) - (n1 - x1) for (x1, n1, _), (x2, n2, _) in zip(pts[:-1], pts[1:])]
    return pts[-1][0], pts[-1][2], dX, dG


def continue_in_alpha(act: Activation, alphas, lam_k: float, lam_v: float, samples: FrozenSamples, init,
                      chi0=None, track0=None, branch: str = "", history=None, prior=(),
                      **kw) -> list[ReplicaResult]:
    r"""Continuation in alpha from ``init`` (six numbers, the start of the first point), each point solved by
    :func:`solve_replica` (``kw`` are its options). Stops after the first point that did not converge (it is then
    the last result).

    Each later point starts where the previous solve's last evaluation was, with that evaluation's value at the
    new alpha and Anderson's memory rebuilt from its last evaluations, all at no cost (:func:`rescaled_start`),
    and with the previous point's proximal points (``chi0`` for the first) and tracked minima (``track0``, see
    :func:`evaluate_map`) as the inner warm start. Where that is not available (the first point after ``prior``,
    or after a solve that ended with another V_hat estimator), it starts at the secant prediction from the last
    two converged points (:func:`secant_predictor`; ``prior``: converged ``(order, alpha)`` pairs before the first
    point, to seed it) with Anderson's memory carried along (``history``). A secant prediction is checked before
    it is used: if its residual |F(x) - x| exceeds its own step from the last point, it is worse than no prediction
    (seen after a point where minimisers switched: a residual of 3 where 6e-3 is typical) and the last point is
    the start instead; the map value computed for the check is reused by the solver. ``n_iter`` counts every
    evaluation."""
    alphas = tuple(float(a) for a in alphas)
    hist = history if history is not None else ([], [])
    multistart = kw.get("multistart", "verify")
    n_newton = kw.get("n_newton", 30)
    check = kw.get("jacobian", "auto") in ("auto", "implicit") and multistart in (False, "verify")
    warm = kw.get("warm_start", True)
    done, at = [tuple(p[0]) for p in prior], [float(p[1]) for p in prior]
    chi, track = chi0, track0
    first_jac = _first_estimator(kw)
    record: list = []
    results: list[ReplicaResult] = []
    for alpha in alphas:
        start = (rescaled_start(record, alpha, lam_k, lam_v, first_jac, kw.get("memory", 6))
                 if results and results[-1].jacobian == first_jac else None)
        if start is not None:  # free: the value at x is not counted
            x, v, hist[0][:], hist[1][:] = start
            x, spent = tuple(x), 0
        else:
            x, v, spent = (tuple(init), None, 0) if not done else (secant_predictor(done, at, alpha), None, 0)
            if len(done) >= 2 and check:
                v = evaluate_map(act, x, alpha, lam_k, lam_v, samples, n_newton, "implicit", False,
                                 chi if warm else None, track if warm else None)
                step = float(np.max(np.abs(np.asarray(x) - np.asarray(done[-1]))))
                if not (v.valid and float(np.max(np.abs(v.order - np.asarray(x)))) <= step):
                    x, v, spent = done[-1], None, 1
            spent += v is not None
        r = solve_replica(act, alpha, lam_k, lam_v, samples, x, chi0=chi, track0=track, history=hist,
                          branch=branch, v0=v, record=record, **kw)
        r = r._replace(n_iter=r.n_iter + spent)
        results.append(r)
        if not r.converged:
            break
        done, at, chi, track = done + [tuple(r.order)], at + [alpha], r.chi, r.track
    return results


class BranchCurve(NamedTuple):
    """Per-branch results along alpha (``results[branch][i]`` at ``alphas[i]``, the last point of the lambda
    continuation) and, per alpha, the selected branch: the converged one with the lowest training objective."""

    alphas: tuple
    results: dict
    selected: tuple


def replica_curve(act: Activation, alphas, lam_k: float, lam_v: float, samples: FrozenSamples, starts: dict,
                  lam_start: float = 1.0, per_decade: int = 2, **kw) -> BranchCurve:
    """Branch tracking along alpha: for each start (name -> six numbers), continuation in lambda at the first alpha
    (from ``lam_start`` down to the target), then continuation in alpha at the target lambda, each point started at
    the secant prediction from the same branch's last two converged fixed points (:func:`secant_predictor`; at a
    failed point the branch restarts from its start with lambda continuation), with the previous point's proximal
    points as the inner warm start and Anderson's memory carried along the branch (:func:`solve_replica`). Every
    point carries its convergence report (:class:`ReplicaResult`)."""
    alphas = tuple(float(a) for a in alphas)
    if not alphas or any(not a > 0 for a in alphas):
        raise ValueError(f"every alpha must be > 0, got {alphas}")
    results = {}
    for name, init in starts.items():
        rs = []
        while len(rs) < len(alphas):
            alpha = alphas[len(rs)]
            r = continue_in_lambda(act, alpha, lam_k, lam_v, samples, init, lam_start, per_decade, branch=name,
                                   **kw)[-1]
            if r.converged and (r.lam_k != lam_k or r.lam_v != lam_v):
                r = r._replace(converged=False, status="continuation_stopped")
            rs.append(r)
            if not r.converged or len(rs) == len(alphas):
                continue
            seg = continue_in_alpha(act, alphas[len(rs):], lam_k, lam_v, samples, tuple(r.order), chi0=r.chi,
                                    track0=r.track, branch=name, prior=[(tuple(r.order), alpha)], **kw)
            # a point of the segment that did not converge is solved again from the branch start with lambda
            # continuation (the loop's next pass)
            rs.extend(seg if seg[-1].converged else seg[:-1])
        results[name] = rs
    selected = []
    for i in range(len(alphas)):
        ok = [(results[n][i].objective, n) for n in results if results[n][i].converged]
        selected.append(min(ok)[1] if ok else "")
    return BranchCurve(alphas, results, tuple(selected))


def ridge_fixed_point(alpha: float, lam: float, noise_std: float = 0.0):
    """Classical ridge replica equations (L = 1 reference): V = 1/(lam + alpha/(1+V)), m = alpha V/(1+V),
    q = (m_hat^2 + q_hat) V^2 with q_hat = alpha (1 + noise^2 - 2m + q)/(1+V)^2 (solved in closed form for q).
    Returns (m, q, V)."""
    # V solves lam V^2 + (lam + alpha - 1) V - 1 = 0 (positive root)
    b = lam + alpha - 1.0
    V = (-b + math.sqrt(b * b + 4 * lam)) / (2 * lam)
    g = alpha / (1 + V)
    m = g * V
    # q = m^2 + alpha V^2 (1 + noise^2 - 2m + q)/(1+V)^2  ->  q (1 - a) = m^2 + a (1 + noise^2 - 2m)
    a = alpha * V**2 / (1 + V) ** 2
    q = (m * m + a * (1 + noise_std**2 - 2 * m)) / (1 - a)
    return m, q, V


# --------------------------------------------------------------------------------------------------------------------
# Bayes-optimal fixed point for spiked-SLR (spec 4.3)
# --------------------------------------------------------------------------------------------------------------------


@jax.jit
def _bo_fields(q, noise_var, samples: FrozenSamples):
    """Teacher-centric fields ``omega_a = q_a h*_a + sqrt(q_a - q_a^2) xi_a`` (n, L) and the label variance given
    omega^v, ``Delta + 1 - q_v``, of the Bayes-optimal channels (Nishimori: m = q, V = 1 - q)."""
    q_k, q_v = q
    om_k = q_k * samples.chi + jnp.sqrt(jnp.maximum(q_k - q_k**2, 0.0)) * samples.xi_k
    om_v = q_v * samples.zeta + jnp.sqrt(jnp.maximum(q_v - q_v**2, 0.0)) * samples.xi_v
    return om_k, om_v, noise_var + 1.0 - q_v


def _bo_hats(q, alpha, sqrt_nu, noise_var, samples: FrozenSamples):
    r"""q_hat_a = alpha E[sum_l (g^a_l)^2] over the frozen samples (teacher-centric: omega = q h* + sqrt(q - q^2) xi)."""
    om_k, om_v, s2 = _bo_fields(q, noise_var, samples)
    logit = sqrt_nu * om_k - (samples.y[:, None] - om_v) ** 2 / (2 * s2)
    pi = jnp.where(samples.mask, jax.nn.softmax(jnp.where(samples.mask, logit, -jnp.inf), axis=-1), 0.0)
    g_k2 = sqrt_nu**2 * jnp.sum(pi**2, -1)
    g_v2 = jnp.sum(jnp.where(samples.mask, pi * (samples.y[:, None] - om_v) / s2, 0.0) ** 2, -1)
    return alpha * jnp.stack([jnp.mean(g_k2), jnp.mean(g_v2)])


BO_GH_NODES = 48  # Gauss-Hermite nodes of the argmax probabilities (the integrand is smooth on the unit scale)
_GH_T, _GH_W = np.polynomial.hermite_e.hermegauss(BO_GH_NODES)
_GH_LOGW = np.log(_GH_W / math.sqrt(2 * math.pi))


def log_argmax_probs(omega_k, mask, V_k):
    r"""``log P(argmax_l (omega_l + sqrt(V_k) t_l) = eps)`` for every token eps (t standard normal, masked tokens
    excluded): the one-dimensional integral ``int phi(t) prod_{l != eps} Phi(t + (omega_eps - omega_l)/sqrt(V_k)) dt``
    by Gauss-Hermite quadrature in log space (``log_ndtr``). ``omega_k``, ``mask`` (L,); -inf on masked tokens."""
    L = omega_k.shape[-1]
    sV = jnp.sqrt(jnp.maximum(V_k, 1e-300))
    d = (omega_k[:, None] - omega_k[None, :]) / sV  # (eps, l)
    lp = jax.scipy.special.log_ndtr(jnp.asarray(_GH_T)[:, None, None] + d[None])
    lp = jnp.where(mask[None, None, :] & ~jnp.eye(L, dtype=bool)[None], lp, 0.0)
    logp = jax.scipy.special.logsumexp(jnp.sum(lp, -1) + jnp.asarray(_GH_LOGW)[:, None], axis=0)
    return jnp.where(mask, logp, -jnp.inf)


_log_argmax_probs_batch = jax.jit(jax.vmap(log_argmax_probs, in_axes=(0, 0, None)))


def _bo_channel_max(q, noise_var, samples: FrozenSamples):
    """Per-sample g^k, g^v (n, L) of the max-SLR (nu = inf) Bayes channel at overlaps q (see
    :func:`solve_bayes_optimal`)."""
    om_k, om_v, s2 = _bo_fields(q, noise_var, samples)
    V_k = 1.0 - q[0]

    def one(ok, ov, y, mask):
        def log_z(o):  # log Z_out up to a constant, and the location logits (log pi~ + log N)
            logits = jnp.where(mask, log_argmax_probs(o, mask, V_k) - (y - ov) ** 2 / (2 * s2), -jnp.inf)
            return jax.scipy.special.logsumexp(logits), logits

        g_k, logits = jax.grad(log_z, has_aux=True)(ok)
        g_v = jnp.where(mask, jax.nn.softmax(logits) * (y - ov) / s2, 0.0)
        return jnp.where(mask, g_k, 0.0), g_v

    return jax.vmap(one)(om_k, om_v, samples.y, samples.mask)


@jax.jit
def _bo_hats_max(q, alpha, noise_var, samples: FrozenSamples):
    g_k, g_v = _bo_channel_max(q, noise_var, samples)
    return alpha * jnp.stack([jnp.mean(jnp.sum(g_k**2, -1)), jnp.mean(jnp.sum(g_v**2, -1))])


def _check_bo_model(model: str, nu) -> float:
    """The models with Bayes-optimal equations here: spiked-SLR (any nu) and max-SLR at nu = inf."""
    if model not in ("spiked", "max"):
        raise ValueError(f"model must be 'spiked' or 'max', got {model!r}")
    nu = check_model(model, nu)
    if model == "max" and not math.isinf(nu):
        raise ValueError("the Bayes-optimal max-SLR equations are implemented for nu = inf only (argmax location)")
    return nu


class BOValue(NamedTuple):
    order: np.ndarray
    hats: np.ndarray

    @property
    def valid(self) -> bool:
        return bool(np.all(np.isfinite(self.order)))


class BOResult(NamedTuple):
    """Bayes-optimal fixed point (q_k, q_v) (= m_k, m_v by Nishimori) and its convergence report."""

    q_k: float
    q_v: float
    residual: float
    n_iter: int
    converged: bool
    status: str
    branch: str = ""
    alpha: float = math.nan


def solve_bayes_optimal(alpha: float, nu: float, samples: FrozenSamples, noise_std: float = 0.0, init=(0.5, 0.5),
                        damping: float = 0.3, tol: float = 1e-10, max_iter: int = 500, method: str = "anderson",
                        branch: str = "", model: str = "spiked") -> BOResult:
    r"""Bayes-optimal state evolution for spiked-SLR, and max-SLR at nu = inf (spec 4.3 [I]; teacher prior
    N(0, I_D) on k* and v*).

    The likelihood of a sample relative to the Gaussian base measure of the tokens is
    ``P_out(y | h) = (1/L) sum_eps g_nu(eps, h^k) N(y; h^v_eps, Delta)`` with ``h = X [k*, v*]/sqrt(D)``, a
    two-index sequence model; with the Nishimori identities (M = Q, V = 1 - Q) and the Gaussian prior::

        q_a = q_hat_a / (1 + q_hat_a),   q_hat_a = alpha E[ sum_l (g^a_l)^2 ],   g = grad_omega log Z_out(y, omega, V)
        omega_l = q h*_l + sqrt(q - q^2) xi_l              (teacher fields h* = (chi*, zeta*) from the data law)
        Z_out = (1/L) sum_eps exp(sqrt(nu) omega^k_eps - nu q_k/2) N(y; omega^v_eps, Delta + 1 - q_v)   (closed form)
        g^k_l = sqrt(nu) pi_l,   g^v_l = pi_l (y - omega^v_l)/(Delta + 1 - q_v),
        pi_l ∝ exp(sqrt(nu) omega^k_l) N(y; omega^v_l, Delta + 1 - q_v)         (posterior of the location)

    The q_hat formula ``alpha E[g g^T]`` follows from the heat equation for Z_out and Stein's lemma, and does not
    need ``int P_out dy = 1`` (which fails here: the tilt makes k* weakly visible, sum_l g^k_l = sqrt(nu), so
    q_hat_k >= alpha nu/L > 0 and there is no q = 0 fixed point). Iterated on the frozen ``samples`` (their
    ``y`` must carry the label noise ``noise_std``) by :func:`fixed_point`. References for the general sequence
    multi-index equations: Cui, arXiv 2409.13904 (2025); Troiani et al., arXiv 2502.00901 (2025); for the GLM form
    Barbier, Krzakala, Macris, Miolane, Zdeborova, PNAS 116, 5451 (2019).

    ``model="max"`` (nu = inf: the location is the argmax of the key fields; ``samples`` from max-SLR): the same
    equations with ``P_out(y | h) = sum_eps 1[eps = argmax_l h^k_l] N(y; h^v_eps, Delta)``, a proper likelihood::

        Z_out = sum_eps pi~_eps(omega^k) N(y; omega^v_eps, Delta + 1 - q_v),
        pi~_eps = P(argmax_l (omega^k_l + sqrt(1 - q_k) t_l) = eps)     (1-D Gauss-Hermite, :func:`log_argmax_probs`)
        g^k = grad_{omega^k} log Z_out (autodiff),   g^v_l = w_l (y - omega^v_l)/(Delta + 1 - q_v),   w ∝ pi~ N

    Checked in the tests: the argmax probabilities against Monte Carlo, and the Nishimori identity
    ``E[sum_l (g^a_l)^2] = -E[sum_l dg^a_l/domega^a_l]`` (it holds here since int P_out dy = 1). Finite nu on
    max-SLR would need an L-dimensional integral per sample and is not implemented."""
    nu = _check_bo_model(model, nu)
    if not alpha > 0 or not math.isfinite(alpha):
        raise ValueError(f"sample ratio alpha must be finite and > 0, got {alpha}")
    noise_var = float(noise_std) ** 2

    def F(q):
        if model == "max":
            h = np.asarray(_bo_hats_max(jnp.asarray(q), alpha, noise_var, samples))
        else:
            h = np.asarray(_bo_hats(jnp.asarray(q), alpha, math.sqrt(nu), noise_var, samples))
        return BOValue(h / (1.0 + h), h)

    def feasible(q):
        q = np.asarray(q, dtype=np.float64)
        return np.clip(q, 0.0, 1.0 - 1e-15) if np.all(np.isfinite(q)) else None

    q0 = feasible(init)
    if q0 is None:
        raise ValueError(f"initial overlaps must be finite, got {init}")
    q, _, res, n, status = fixed_point(F, q0, feasible, damping, tol, max_iter, method, memory=5)
    return BOResult(float(q[0]), float(q[1]), res, n, status == "converged", status, branch, float(alpha))


def bayes_optimal_test_error(key, nu: float, L, q_k: float, q_v: float, n: int, noise_std: float = 0.0,
                             model: str = "spiked"):
    r"""Bayes-optimal test error at the fixed point (spec 4.3), by Monte Carlo on fresh samples: (mean, SE)::

        E_BO = 1 + Delta - q_v E[ |softmax(sqrt(nu) omega^k)|^2 ],   omega^k = q_k chi* + sqrt(q_k - q_k^2) xi

    (the BO predictor is sum_l softmax(sqrt(nu) omega^k)_l omega^v_l; its error is E y^2 - E yhat^2 by Nishimori, and
    omega^v is independent of omega^k with variance q_v). At q = 1 this is the population Bayes risk (spec 3.3).
    ``model="max"`` (nu = inf): softmax(sqrt(nu) omega^k) becomes the argmax probabilities pi~(omega^k) of
    :func:`solve_bayes_optimal`."""
    nu = _check_bo_model(model, nu)
    if not (0 <= q_k <= 1 and 0 <= q_v <= 1):
        raise ValueError(f"Bayes-optimal overlaps lie in [0, 1], got {q_k}, {q_v}")
    ks, kx = jax.random.split(key)
    s = sample_scores(ks, model, nu, L, n)
    om = q_k * s.chi + math.sqrt(max(q_k - q_k**2, 0.0)) * jax.random.normal(kx, s.chi.shape)
    if model == "max":
        p = jnp.where(s.mask, jnp.exp(_log_argmax_probs_batch(om, s.mask, 1.0 - q_k)), 0.0)
    else:
        p = jnp.where(s.mask, jax.nn.softmax(jnp.where(s.mask, math.sqrt(nu) * om, -jnp.inf), axis=-1), 0.0)
    vals = 1.0 + noise_std**2 - q_v * jnp.sum(p * p, -1)
    return float(jnp.mean(vals)), float(jnp.std(vals, ddof=1) / math.sqrt(n))
