r"""Theory against simulation along alpha (Duranthon et al., spec 4-5): the driver behind the
``duranthon-sample-complexity`` preset. Fixed lambda (no grid search yet) and informed starts only.

For each activation and each alpha:

* replica: :func:`attnlab.slr.replica.solve_replica` on ``n_sets`` independent frozen sample sets, continued in
  alpha (each set starts from its fixed point at the previous alpha, the first from the informed point); test error
  (spec 3.2 formula) per set, its mean, and an SE combining the spread over sets with the formula's Monte Carlo SE;
* simulation: L-BFGS ERM (informed start) at ``D = sqrt_ND / sqrt(alpha)``, ``N = alpha D`` (the spec 5 size rule),
  ``n_seeds`` teachers and data sets; overlaps, training loss, test error on a fresh set.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import xarray as xr

from attnlab.slr.activations import activation
from attnlab.slr.duranthon_data import sample_sequences, sample_teacher_sqrtD
from attnlab.slr.erm import fit_erm, fresh_test_error, informed_start, overlaps7
from attnlab.slr.population import bayes_risk_mc, overlap_risk
from attnlab.slr.replica import frozen_samples, solve_replica

__all__ = ["theory_vs_simulation"]

_ORDER = ("m_k", "q_k", "V_k", "m_v", "q_v", "V_v")
_SIM = ("m_k", "q_k", "m_v", "q_v", "m_kv", "m_vk", "q_kv")


def theory_vs_simulation(key, model: str, nu, L, alphas, lam_k: float, lam_v: float,
                         activations=("softmax", "linear"), n_replica: int = 2000, n_sets: int = 3,
                         sqrt_ND: float = 1000.0, n_seeds: int = 3, n_test: int = 4000, n_risk: int = 50_000,
                         informed_scale: float | None = None, tol: float = 1e-8, progress=None) -> xr.Dataset:
    alphas = [float(a) for a in alphas]
    if any(a <= 0 for a in alphas):
        raise ValueError(f"every alpha must be > 0, got {alphas}")
    n_a, n_al = len(activations), len(alphas)
    rep = np.full((n_a, n_al, n_sets, 6), np.nan)
    rep_train, rep_res = np.full((n_a, n_al, n_sets), np.nan), np.full((n_a, n_al, n_sets), np.nan)
    rep_iter, rep_conv = np.zeros((n_a, n_al, n_sets), int), np.zeros((n_a, n_al, n_sets), bool)
    rep_test, rep_test_se = np.full((n_a, n_al), np.nan), np.full((n_a, n_al), np.nan)
    rep_test_set = np.full((n_a, n_al, n_sets), np.nan)
    sim = np.full((n_a, n_al, n_seeds, 7), np.nan)
    sim_train, sim_test = np.full((n_a, n_al, n_seeds), np.nan), np.full((n_a, n_al, n_seeds), np.nan)
    sizes = np.zeros((n_al, 2), int)
    k_rep, k_sim, k_risk, k_bayes = jax.random.split(key, 4)
    sets = [frozen_samples(jax.random.fold_in(k_rep, s), model, nu, L, n_replica) for s in range(n_sets)]
    total, done = n_a * n_al, 0
    for a, name in enumerate(activations):
        act = activation(name)
        c0 = informed_scale if informed_scale is not None else (math.sqrt(nu) if model == "spiked" else nu)
        starts = [(c0, c0 * c0, 1.0, 1.0, 1.0, 1.0)] * n_sets
        for i, alpha in enumerate(alphas):
            for s in range(n_sets):
                r = solve_replica(act, alpha, lam_k, lam_v, sets[s], starts[s], tol=tol)
                rep[a, i, s], rep_train[a, i, s] = np.asarray(r.order), r.train_loss
                rep_res[a, i, s], rep_iter[a, i, s], rep_conv[a, i, s] = r.residual, r.n_iter, r.converged
                if r.converged:
                    starts[s] = tuple(r.order)
            per_set, mc_se = [], []
            for s in range(n_sets):
                o = rep[a, i, s]
                if rep_conv[a, i, s] and o[1] >= o[0] ** 2 and o[4] >= o[3] ** 2:
                    m, e = overlap_risk(jax.random.fold_in(k_risk, i), act, model, nu, L, o[0], o[1], o[3], o[4],
                                        n_risk)  # common random numbers across sets: the spread is the sets' error
                    rep_test_set[a, i, s] = m
                    per_set.append(m)
                    mc_se.append(e)
            if per_set:
                spread = np.std(per_set, ddof=1) / math.sqrt(len(per_set)) if len(per_set) > 1 else np.nan
                rep_test[a, i], rep_test_se[a, i] = np.mean(per_set), math.hypot(spread, np.mean(mc_se))
            D = max(4, int(round(sqrt_ND / math.sqrt(alpha))))
            N = max(2, int(round(alpha * D)))
            sizes[i] = (D, N)
            for seed in range(n_seeds):
                ks = jax.random.fold_in(k_sim, 1000 * i + seed)
                kt, kd, kf = jax.random.split(ks, 3)
                k_star, v_star = sample_teacher_sqrtD(kt, D)
                b = sample_sequences(kd, k_star, v_star, model, nu, L, N)
                e = fit_erm(act, b.X, b.mask, b.y, lam_k, lam_v,
                            *informed_start(k_star, v_star, model, nu, scale=c0))
                sim[a, i, seed] = np.asarray(overlaps7(e.k, e.v, k_star, v_star))
                sim_train[a, i, seed] = e.train_loss
                # test chunks of the training shape (N, D): no extra compilation of the sampler
                sim_test[a, i, seed] = fresh_test_error(kf, act, e.k, e.v, k_star, v_star, model, nu, L, n_test,
                                                        chunk=N)[0]
            done += 1
            if progress is not None:
                progress(done, total)
    bayes, bayes_se = bayes_risk_mc(k_bayes, model, nu, L, n_risk)
    u = {"units": "1"}
    data = {
        "replica_order": (("activation", "alpha", "set", "order"), rep, u),
        "replica_train_loss": (("activation", "alpha", "set"), rep_train, u),
        "replica_residual": (("activation", "alpha", "set"), rep_res, u),
        "replica_iterations": (("activation", "alpha", "set"), rep_iter, u),
        "replica_converged": (("activation", "alpha", "set"), rep_conv, u),
        "replica_test_error_set": (("activation", "alpha", "set"), rep_test_set, u),
        "replica_test_error": (("activation", "alpha"), rep_test, {**u, "long_name": "spec 3.2, mean over sets"}),
        "replica_test_error_se": (("activation", "alpha"), rep_test_se, u),
        "sim_overlaps": (("activation", "alpha", "seed", "overlap"), sim, u),
        "sim_train_loss": (("activation", "alpha", "seed"), sim_train, u),
        "sim_test_error": (("activation", "alpha", "seed"), sim_test, {**u, "long_name": "fresh-set test error"}),
        "D": (("alpha",), sizes[:, 0], u), "N": (("alpha",), sizes[:, 1], u),
        "bayes_population": ((), bayes, u), "bayes_population_se": ((), bayes_se, u),
    }
    coords = {"activation": list(activations), "alpha": alphas, "set": np.arange(n_sets), "order": list(_ORDER),
              "seed": np.arange(n_seeds), "overlap": list(_SIM)}
    attrs = {"model": model, "nu": float(nu), "L": str(L), "lambda_k": lam_k, "lambda_v": lam_v,
             "sqrt_ND": sqrt_ND, "n_replica": n_replica}
    return xr.Dataset(data, coords=coords, attrs=attrs)
