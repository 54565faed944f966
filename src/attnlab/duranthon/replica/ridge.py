"""The classical ridge replica equations: the L = 1 reference of the replica fixed point."""

from __future__ import annotations

import math

__all__ = ["ridge_fixed_point"]


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
