r"""The proximal problem of one sample and its solution chi_hat by monotone modified Newton.

For order parameters (m_k, q_k, V_k, m_v, q_v, V_v) and a sample's fields omega^k, omega^v, label y::

    chi_hat = argmin_chi  |chi - omega^k|^2/(2 V_k) + (y - sigma(chi)^T omega^v)^2 / (2 (1 + V_v |sigma(chi)|^2))

(the value field z eliminated in closed form). Newton: positive Hessian eigenvalues floored at ``HESS_FLOOR/V_k``,
negative ones replaced by ``max(|.|, NEG_CURV_FLOOR/V_k)``, best of the trial step lengths ``_STEPS``, stop at
max|grad J| <= ``NEWTON_STOP``, then one full Newton step; eigendecomposition by fixed-sweep Jacobi for L <= 4
(:func:`_sym_eig`). One start (omega^k) or 2L + 1 starts (:func:`_starts`) keeping the lowest value. Also the
per-sample channel integrands at the proximal point (:func:`_implicit_fields`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_STEPS = (1.0, 0.5, 0.25, 0.1, 0.03, 0.01)  # trial lengths of the monotone Newton line search


NEWTON_STOP = 1e-12  # the inner Newton iteration stops when max |grad J| falls below this
ROUNDOFF_DECREASE = 1e-15  # ... or after a step whose predicted decrease -g.d was below this times (1 + |J|)
HESS_FLOOR = 0.01  # positive Hessian eigenvalues of the inner problem are floored at HESS_FLOOR / V_k
NEG_CURV_FLOOR = 0.5  # negative ones are replaced by max(|.|, NEG_CURV_FLOOR / V_k): short steps out of concave regions
SNAP_RADIUS = 0.05  # multistart verification: a Newton loop within SNAP_RADIUS sqrt(V_k) of the known minimum jumps there
INNER_GTOL = 1e-7  # |grad J| above this at the returned point: the sample's proximal problem did not converge


def _objective(act, chi, omega_k, omega_v, y, mask, V_k, V_v, c):
    """The proximal objective ``J(chi) = |chi - omega^k|^2/(2 V_k) + (y - sigma(chi)^T omega^v)^2 / (2 (1 + V_v
    |sigma(chi)|^2))`` (the value field z eliminated)."""
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
    so the iteration converges quadratically). Under ``vmap`` over thousands of 3 x 3 matrices this is elementwise
    arithmetic that XLA vectorises across the batch, where ``jnp.linalg.eigh`` makes one LAPACK call per matrix.
    Accuracy (``tests/duranthon/replica/test_proximal.py``): reconstruction and eigenvalues to ~1e-14 relative,
    including repeated eigenvalues. Derivatives: the same JVP rule as ``jnp.linalg.eigh`` (below), so forward mode
    never runs through the sweeps (differentiating the sweeps inside the Newton loop would make the "unrolled" V_hat
    program much larger to compile)."""
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

    # one compiled sweep in a loop: unrolled sweeps would make the Newton programs larger and slower to compile
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
