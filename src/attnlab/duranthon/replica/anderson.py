"""Safeguarded Anderson acceleration (or damped iteration) for a fixed point ``x = F(x).order``."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["fixed_point"]


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
