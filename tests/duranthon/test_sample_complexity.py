"""lambda*(alpha), the zero of d(replica test error)/d lambda, against grid searches of the same replica test error.

Spiked-SLR nu = 5, L = 2, softmax, alpha = 8: the test error's minimum over lambda lies where every proximal problem
is convex (lambda ~ 0.2). The frozen sets and the risk samples come from the same key in every call, so each grid
search minimises the same deterministic function of lambda that lambda* is the minimiser of.
"""

import math

import jax
import numpy as np
import pytest

from attnlab.duranthon.sample_complexity import theory_vs_simulation

COARSE = (0.03, 0.1, 0.3, 1.0, 3.0)
SIZES = dict(n_replica=256, n_sets=2, sqrt_ND=40.0, n_seeds=2, n_test=200, n_risk=5000, n_bo=256)


def _run(grid, optimal):
    return theory_vs_simulation(jax.random.key(0), "spiked", 5.0, 2, (8.0,), math.nan, math.nan, ("softmax",),
                                lam_grid=grid, lam_optimal=optimal, **SIZES).sel(activation="softmax", alpha=8.0)


def _between_neighbours(lam, grid, argmin):
    """lam lies between the grid neighbours of argmin (the resolution of a grid search)."""
    g = np.sort(np.asarray(grid, dtype=float))
    i = int(np.argmin(np.abs(g - argmin)))
    return g[max(i - 1, 0)] <= lam <= g[min(i + 1, g.size - 1)]


@pytest.mark.slow
def test_lambda_star_agrees_with_coarse_and_fine_grid_searches():
    """The root lambda* lies between the coarse grid argmin's neighbours and has a lower replica test error than any
    coarse grid point, while the worst coarse lambda is not within that resolution (the control). On a fine grid
    (ratio 10^(1/12), lambda* halfway between two points) the argmin is again within one step of lambda*, and
    lambda*'s test error is below every fine grid point's."""
    p = _run(COARSE, True)
    lam = float(p.lambda_star)
    assert str(p.lambda_star_status.values) == "root" and abs(float(p.lambda_star_derivative)) < 1e-6
    assert float(p.lambda_opt.sel(lam_kv="lambda_k")) == lam
    e_star, e_grid = float(p.replica_test_error), p.replica_test_error_grid.values
    argmin = float(p.lambda_grid_argmin)
    assert argmin == float(p.lam_grid.values[np.argmin(e_grid)])
    assert _between_neighbours(lam, COARSE, argmin) and e_star < np.min(e_grid)
    worst = float(p.lam_grid.values[np.argmax(e_grid)])
    assert not _between_neighbours(lam, COARSE, worst)  # the control: the check rejects the worst grid lambda
    # the derivative at the grid points has the sign of the grid's differences around the argmin
    d = p.replica_test_error_grid_derivative.sel(lam_grid=argmin)
    assert (float(d) < 0) == (lam > argmin)

    fine = tuple(float(x) for x in 10 ** (np.log10(lam) + (np.arange(-4, 4) + 0.5) / 12))  # lambda* not on it
    q = _run(fine, False)
    e_fine = q.replica_test_error_grid.values
    fine_argmin = float(q.lam_grid.values[np.argmin(e_fine)])
    assert _between_neighbours(lam, fine, fine_argmin) and e_star <= np.min(e_fine)


@pytest.mark.parametrize("bad", [dict(lam_grid=None), dict(lam_grid=(0.3,))])
def test_lambda_star_needs_a_grid(bad):
    with pytest.raises(ValueError, match="lam_optimal"):
        theory_vs_simulation(jax.random.key(0), "spiked", 5.0, 2, (8.0,), 1.0, 1.0, ("softmax",), lam_optimal=True,
                             **SIZES, **bad)
