"""Replica-symmetry stability of the RS fixed point: the replicon (de Almeida-Thouless) eigenvalue."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["at_eigenvalue"]


def at_eigenvalue(P, V_k: float, V_v: float) -> float:
    r"""Replicon (de Almeida-Thouless) eigenvalue of the RS fixed point on M: the RS saddle point is locally stable
    against replica-symmetry breaking iff the returned value is < 1 (derived here, not from the paper).

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

    Check (``tests/duranthon/replica/test_stability.py``): at L = 1 the k-sector is inert
    (J^{kk} = J^{kv} = J^{vk} = 0) and ``J^{vv} = -1/(1 + V_v)``, so
    ``rho(T) = alpha V_v^2 / (1 + V_v)^2 = (1 - lambda V_v) V_v / (1 + V_v) < 1`` at the ridge fixed point: ridge is
    always RS-stable.

    ``P``: the (2, 2, 2, 2) array ``P[a, c, b, d]`` above, alpha included; ``V_k``, ``V_v``: the order parameters
    V_a of the fixed point. Returns rho(T), or NaN if ``P`` is not finite."""
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
