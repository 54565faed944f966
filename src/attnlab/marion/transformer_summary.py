"""The summaries of the transformer presets T2 and T3 of Marion et al. (ICLR 2025), App. E.3: the metrics of the last
log per model, the checks with their negative controls, and the one-line finding. The configs, the runs and the
notebook's reference values are in :mod:`attnlab.marion.transformer_preset` (module doc: the experiments, the models
compared and the checks' bases)."""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from attnlab.marion import multihead as mh
from attnlab.marion.transformer_preset import (
    FAITHFUL_DRIFT,
    FAITHFUL_ROWS_TOLERANCE,
    NOTEBOOK_T2,
    NOTEBOOK_T3,
    TransformerConfig,
    faithful_bound,
)
from attnlab.registry import Check, mean_se

__all__ = ["headline", "matched_curves", "rank_one_tolerance", "tail_reference", "tail_curves", "summarize", "finding"]


def rank_one_tolerance(cfg: TransformerConfig) -> float:
    """The bound on ``s_2 / s_1`` of ``M_a`` (and on the gap between the two kappas) that round-off allows a model
    trained from ``W_K = 0``: ``20 T u`` for ``T`` updates in a precision of unit round-off ``u`` (2^-24 in float32,
    2^-53 in float64). In exact arithmetic ``W_K(t) = u c_t^T``; each update rounds its outer product and its
    subtraction (2 roundings of relative size ``u``), added in the worst case in phase over the ``T`` updates (``2 T
    u`` of ``|W_K|``), times 10 for the conditioning of ``W_Q`` on the rank-one direction."""
    u = float(np.finfo(np.dtype(cfg.precision)).eps) / 2.0
    return 20.0 * cfg.n_steps * u


def headline(ds: xr.Dataset, cfg: TransformerConfig):
    """The alignments the config shows: ``(kappa, nu)`` as DataArrays (``alignment`` switch)."""
    return ds[f"kappa_{cfg.alignment}"], ds[f"nu_{cfg.alignment}"]


def matched_curves(ds, kappa, nu, cfg, rule=None):
    """Matched curves (model, step, run, 2) of ``kappa`` and ``nu`` by the rule (default: the config's) applied to
    each model's last log of ``|kappa|``."""
    rule = rule or cfg.matching
    k, n = np.asarray(kappa.values), np.asarray(nu.values)
    swap = mh.match_swap(np.abs(k[:, -1]), rule)  # (model, run)
    return mh.matched(k, swap[:, None]), mh.matched(n, swap[:, None]), swap


def summarize(ds: xr.Dataset, cfg: TransformerConfig):
    """Metrics of the last log per model and the checks, each with its negative control."""
    labels = list(ds.model.values)
    last = ds.isel(step=-1)
    kappa, nu = headline(ds, cfg)
    metrics: dict[str, float] = {"n_repeats": float(ds.sizes["run"])}
    for label in labels:
        sel = last.sel(model=label)
        metrics[f"{label}_final_excess_risk_median"] = float(np.median(sel.test_excess_risk))
        metrics[f"{label}_final_mc_excess_risk_median"] = float(np.median(ds.mc_excess_risk.sel(model=label)))
        metrics[f"{label}_layernorm_floor_median"] = float(np.median(ds.layernorm_floor.sel(model=label)))
        metrics[f"{label}_rank1_ratio_median"] = float(np.median(sel.rank1_ratio))
        metrics[f"{label}_max_s2_over_s1"] = float(np.nanmax(ds.s2_over_s1.sel(model=label).values))
        metrics[f"{label}_attention_signal_median"] = float(np.median(np.max(sel.attention_signal.values, axis=-2)))
        k, n = np.abs(kappa.sel(model=label).isel(step=-1).values), nu.sel(model=label).isel(step=-1).values
        if cfg.N_HEADS == 1:
            metrics[f"{label}_final_kappa_median"] = float(np.median(k))
            metrics[f"{label}_final_nu_median"] = float(np.median(n))
            metrics[f"{label}_final_kappa_notebook_median"] = float(np.median(sel.kappa_notebook))
        else:
            metrics[f"{label}_max_kappa_mean"] = float(np.mean(np.max(k, axis=(-1, -2))))
            code, _ = mh.classify(k)
            for i, cname in enumerate(mh.CLASSES):
                metrics[f"{label}_{cname}"] = float(np.sum(code == i))
    if cfg.N_HEADS > 1:
        mk, mn, _ = matched_curves(ds, kappa, nu, cfg)
        for i, label in enumerate(labels):
            for h in range(2):
                metrics[f"{label}_matched_kappa_h{h + 1}_mean"] = float(np.mean(np.abs(mk[i, -1, :, h])))
                metrics[f"{label}_matched_nu_h{h + 1}_mean"] = float(np.mean(mn[i, -1, :, h]))
        nb = mh.matched(NOTEBOOK_T3["kappa"], mh.match_swap(NOTEBOOK_T3["kappa"], "head1"))
        metrics["notebook_table_matched_kappa_h1_mean"] = float(np.mean(nb[:, 0]))
        metrics["notebook_table_matched_kappa_h2_mean"] = float(np.mean(nb[:, 1]))

    checks = [
        Check.where_finite(
            "forward pass: register row vs the notebook's full (L+1)-row computation, max |difference|",
            theory=0.0, simulation=float(ds.forward_gap.max()), tolerance=1e-10,
            basis="float64 round-off bound (|y_hat| of order 1)",
            control="the full computation read out at row 1 (the first signal token)",
            control_simulation=float(ds.forward_gap_row1.min())),
        Check.where_finite(
            "forward pass invariant under permutations of the L tokens (reversed), max |difference|",
            theory=0.0, simulation=float(ds.permutation_gap.max()), tolerance=1e-10,
            basis="float64 round-off bound", control="the register exchanged with token 1",
            control_simulation=float(ds.register_swap_gap.min())),
    ]
    checks += _pair_checks(ds, cfg)
    checks.append(_risk_check(ds))
    if cfg.at_notebook_sizes() and "notebook" in labels:
        checks += _reference_checks_t2(ds, cfg) if cfg.N_HEADS == 1 else _reference_checks_t3(ds, cfg)
    if int(ds.attrs.get("faithful_runs", 0)):
        checks += _faithful_checks_t2(ds) if cfg.N_HEADS == 1 else _faithful_checks_t3(ds, cfg.precision)
    return metrics, checks


def _pair_checks(ds, cfg) -> list[Check]:
    """The notebook model's constructions (rank-one M, kappa's equivalence, W_O's coupling) against the other model."""
    labels = list(ds.model.values)
    zero = [m for m, z in zip(labels, ds.zero_key_init.values, strict=True) if z]
    gauss = [m for m, z in zip(labels, ds.zero_key_init.values, strict=True) if not z]
    names = ("W_K = 0: M_a = W_Q^aT W_K^a has rank one at every log, max s_2 / s_1",
             "W_K = 0: the notebook's kappa |e_1 . k*_j| equals |cos(q_a, k*_j)| at every log, max |difference|")
    out = []
    if not (zero and gauss):
        out += [Check.not_evaluated(n, "needs a model with W_K = 0 and one with a Gaussian W_K (paired)", theory=0.0)
                for n in names]
    else:
        def ratio(m):
            return float(np.nanmax(ds.s2_over_s1.sel(model=m).values))

        def kappa_gap(m):
            sel = ds.sel(model=m)
            return float(np.nanmax(np.abs(sel.kappa_notebook.values - np.abs(sel.kappa_exact.values))))

        tol = rank_one_tolerance(cfg)
        basis = f"{cfg.precision} round-off of {cfg.n_steps} updates, 20 T u (rank_one_tolerance)"
        out.append(Check.where_finite(
            names[0], theory=0.0, simulation=ratio(zero[0]), tolerance=tol, basis=basis,
            control="the model with a Gaussian W_K (same draws)", control_simulation=ratio(gauss[0])))
        out.append(Check.where_finite(
            names[1], theory=0.0, simulation=kappa_gap(zero[0]), tolerance=tol, basis=basis,
            control="the model with a Gaussian W_K (same draws)", control_simulation=kappa_gap(gauss[0])))
    if "output_coupling" in ds:
        name = "W_O drawn with W_V's key: W_O = sqrt((1/d)/(2/(p+d))) flat(W_V), max |difference|"
        coupled = [m for m, c in zip(labels, ds.coupled_output_init.values, strict=True) if c]
        own = [m for m, c in zip(labels, ds.coupled_output_init.values, strict=True) if not c]
        if coupled and own:
            out.append(Check.where_finite(
                name, theory=0.0, simulation=float(ds.output_coupling.sel(model=coupled[0]).max()), tolerance=1e-13,
                basis="float64 round-off bound (entries of order 0.1)",
                control="the model whose W_O has a key of its own",
                control_simulation=float(ds.output_coupling.sel(model=own[0]).min())))
        else:
            out.append(Check.not_evaluated(name, "needs a model with the coupled W_O and one without (paired)",
                                           theory=0.0))
    return out


def _risk_check(ds) -> Check:
    """The held-out risk against the Monte Carlo risk, mean over runs and models. Each run's standard error comes
    from its own samples (the held-out set's and the Monte Carlo draws' sample variances); the models of a run share
    its held-out set and Monte Carlo draws, so their errors are combined as fully correlated (an upper bound)."""
    last = ds.isel(step=-1)
    se_run = np.hypot(last.test_excess_risk_se.mean("model").values, ds.mc_excess_risk_se.mean("model").values)
    se = float(np.sqrt(np.sum(se_run**2)) / se_run.size)
    return Check.where_finite(
        "held-out excess risk vs Monte Carlo at the final state (mean over runs and models)",
        theory=float(ds.mc_excess_risk.mean()), simulation=float(last.test_excess_risk.mean()), tolerance=5.0 * se,
        basis=f"5 SE from each run's samples ({int(ds.test_excess_risk.attrs['n_samples'])} held-out and "
              f"{int(ds.mc_excess_risk.attrs['n_samples'])} Monte Carlo sequences), {se_run.size} runs",
        control=f"the held-out risk of the first log (step {int(ds.step[0])})",
        control_simulation=float(ds.test_excess_risk.isel(step=0).mean()))


def _reference_checks_t2(ds, cfg) -> list[Check]:
    """The notebook model's final values against the notebook's runs 1-5 after 8000 updates (any seed)."""
    sel = ds.sel(model="notebook")
    ref = NOTEBOOK_T2["final_runs"]
    ours = {"excess_risk": sel.test_excess_risk, "kappa": sel.kappa_notebook, "nu": sel.nu_notebook}
    words = {"excess_risk": "excess risk", "kappa": "|e_1 . k*|", "nu": "cos(w, v*)"}
    out = []
    for q, da in ours.items():
        vals = np.asarray(da.values).reshape(da.sizes["step"], -1)
        (m, se), (m_ref, se_ref) = mean_se(vals[-1]), mean_se(ref[q])
        out.append(Check.where_finite(
            f"notebook model, final {words[q]}: mean over runs vs the notebook's runs 1-5",
            theory=m_ref, simulation=m, tolerance=5.0 * math.hypot(se, se_ref),
            basis=f"5 SE of the difference, {len(ref[q])} notebook runs and {vals.shape[1]} here",
            control="the untrained model (step 0)", control_simulation=float(np.nanmean(vals[0]))))
    return out


def _reference_checks_t3(ds, cfg) -> list[Check]:
    """The notebook model's matched kappa curves and final risk against the notebook's printed table and reruns."""
    sel = ds.sel(model="notebook")
    k = np.asarray(sel.kappa_notebook.values)[-1]  # (run, head, direction), last log
    swap = mh.match_swap(k, "head1")
    ours, crossed = mh.matched(k, swap), mh.matched(k, ~swap)
    table = NOTEBOOK_T3["kappa"]
    ref = mh.matched(table, mh.match_swap(table, "head1"))
    out = []
    for h in range(2):
        (m, se), (m_ref, se_ref) = mean_se(ours[:, h]), mean_se(ref[:, h])
        out.append(Check.where_finite(
            f"notebook model, matched |e_1 . k*| curve h = {h + 1} at the last log (head-1 rule) vs the printed table",
            theory=m_ref, simulation=m, tolerance=5.0 * math.hypot(se, se_ref),
            basis=f"5 SE of the difference, {ref.shape[0]} notebook runs and {k.shape[0]} here",
            control="the other assignment of heads to directions", control_simulation=float(np.mean(crossed[:, h]))))
    risk = np.asarray(sel.test_excess_risk.values)
    (m, se), (m_ref, se_ref) = mean_se(risk[-1]), mean_se(NOTEBOOK_T3["final_excess_risk"])
    out.append(Check.where_finite(
        "notebook model, final excess risk: mean over runs vs the notebook's runs 1, 2 and 10",
        theory=m_ref, simulation=m, tolerance=5.0 * math.hypot(se, se_ref),
        basis=f"5 SE of the difference, 3 notebook runs and {risk.shape[1]} here",
        control=f"the first log (step {int(ds.step[0])})", control_simulation=float(np.mean(risk[0]))))
    return out


def _faithful_checks_t2(ds) -> list[Check]:
    """The notebook model's runs against the single-head notebook's printed first rows of run 1 (steps 0-400) and
    the final values of its runs 1-5."""
    sel = ds.sel(model="notebook")
    steps = list(ds.step.values)
    ours = {"excess_risk": sel.test_excess_risk.values, "kappa": sel.kappa_notebook.values[..., 0, 0],
            "nu": sel.nu_notebook.values[..., 0, 0]}  # (step, run)
    words = {"excess_risk": "excess risk", "kappa": "|e_1 . k*|", "nu": "cos(w, v*)"}
    out = []
    ref = NOTEBOOK_T2["first_rows"]
    if all(s in steps for s in ref["step"]):
        idx = [steps.index(s) for s in ref["step"]]
        for q in ours:
            o, r = np.asarray(ours[q])[idx, 0], np.asarray(ref[q])
            extra = " (step 0: |k*[0]|, the SVD artefact)" if q == "kappa" else ""
            out.append(Check.where_finite(
                f"faithful run 1: {words[q]}{extra} at steps 0-400 vs the notebook's printed rows, max |difference|",
                theory=0.0, simulation=float(np.max(np.abs(o - r))), tolerance=FAITHFUL_ROWS_TOLERANCE,
                basis="float32 round-off of the notebook over 400 updates (see FAITHFUL_ROWS_TOLERANCE)",
                control="the printed rows one log later (a logging offset of 100 updates)",
                control_simulation=float(np.max(np.abs(o[:-1] - r[1:])))))
    final = NOTEBOOK_T2["final_runs"]
    if steps[-1] == 8000:
        ref = np.concatenate([final[q] for q in ours])
        mine = np.concatenate([np.asarray(ours[q])[-1, :5] for q in ours])
        wrong = np.concatenate([np.asarray(ours[q])[-1, 5:10] for q in ours])
        out.append(Check.where_finite(
            "faithful runs 1-5: final excess risk, |e_1 . k*| and cos(w, v*) vs the notebook's reruns, "
            "max |difference|",
            theory=0.0, simulation=float(np.max(np.abs(mine - ref))), tolerance=FAITHFUL_DRIFT + 5e-4,
            basis="the drift between platforms of a faithful rerun (FAITHFUL_DRIFT) plus half a unit of the third "
                  "printed decimal",
            control="runs 6-10", control_simulation=float(np.max(np.abs(wrong - ref)))))
    return out


def tail_reference() -> np.ndarray:
    """The multi-head notebook's printed run-10 tail as one vector: excess risk at its last five logs, then the
    matched ``kappa`` curves h = 1, 2, then the matched ``nu`` curves."""
    tail = NOTEBOOK_T3["run10_tail"]
    return np.concatenate([tail["excess_risk"], np.reshape(tail["kappa"], -1), np.reshape(tail["nu"], -1)])


def tail_curves(kappa, nu, risk, steps, run: int) -> np.ndarray:
    """Run ``run``'s values at the logs of the notebook's printed tail, ordered as :func:`tail_reference`: heads
    matched to directions by the notebook's head-1 rule at the last log. ``kappa`` and ``nu`` have axes (log, run,
    head, direction), ``risk`` (log, run), ``steps`` the logged steps."""
    idx = [list(steps).index(s) for s in NOTEBOOK_T3["run10_tail"]["step"]]
    kk, nn = kappa[:, run], nu[:, run]
    swap = mh.match_swap(kk[-1], "head1")
    return np.concatenate([risk[idx, run], mh.matched(kk[idx], swap).T.reshape(-1),
                           mh.matched(nn[idx], swap).T.reshape(-1)])


def _faithful_checks_t3(ds, precision: str) -> list[Check]:
    """The notebook model's runs against the multi-head notebook's printed final table and run-10 tail, within the
    bounds :func:`~attnlab.marion.transformer_preset.faithful_bound` gives the training ``precision``."""
    sel = ds.sel(model="notebook")
    k = np.asarray(sel.kappa_notebook.values)
    steps = list(ds.step.values)
    tail = NOTEBOOK_T3["run10_tail"]
    out = []
    if steps[-1] == tail["step"][-1]:
        table = NOTEBOOK_T3["kappa"]
        tol, basis = faithful_bound(precision, "table")
        out.append(Check.where_finite(
            "faithful runs: final |e_1^a . k*_j| vs the notebook's printed table, max |difference|",
            theory=0.0, simulation=float(np.max(np.abs(k[-1] - table))), tolerance=tol,
            basis=basis, control="the table with the two heads exchanged",
            control_simulation=float(np.max(np.abs(k[-1] - table[:, ::-1])))))
    if all(s in steps for s in tail["step"]):
        nu, risk = np.asarray(sel.nu_notebook.values), np.asarray(sel.test_excess_risk.values)

        def curves(run):
            return tail_curves(k, nu, risk, steps, run)

        ref = tail_reference()
        tol, basis = faithful_bound(precision, "tail")
        out.append(Check.where_finite(
            "faithful run 10: last five logs (excess risk, matched kappa and nu) vs the notebook, max |difference|",
            theory=0.0, simulation=float(np.max(np.abs(curves(9) - ref))), tolerance=tol, basis=basis,
            control="run 9's last five logs", control_simulation=float(np.max(np.abs(curves(8) - ref)))))
    return out


# --- finding ----------------------------------------------------------------------------------------------------------

def finding(metrics, cfg: TransformerConfig) -> str:
    """Each quantity of the last log as ``config's model vs the other model`` (same draws), e.g. "excess risk median
    0.0058 vs 0.0058"."""
    labels = [label for label, _ in cfg.models()]
    words = {"corrected": "corrected (Gaussian W_K" + (", independent z, own W_O" if cfg.N_HEADS > 1 else "") + ")",
             "notebook": "notebook (W_K = 0" + (", shared z, W_O from W_V's key" if cfg.N_HEADS > 1 else "") + ")",
             "custom": "custom switches"}
    kname = "|cos(q, k*)|" if cfg.alignment == "exact" else "|e_1 . k*|"

    def row(name, fmt, *keys):
        vals = ["/".join(format(metrics[f"{label}_{k}"], fmt) for k in keys) for label in labels]
        return f"{name} {' vs '.join(vals)}"

    items = [row("excess risk median", ".3g", "final_mc_excess_risk_median"),
             row("LayerNorm floor", ".2g", "layernorm_floor_median")]
    if cfg.N_HEADS == 1:
        items += [row("attention on X_1", ".3f", "attention_signal_median"), row(kname, ".3f", "final_kappa_median")]
        if cfg.alignment == "exact":
            items.append(row("the notebook's |e_1 . k*|", ".3f", "final_kappa_notebook_median"))
        items.append(row("cos(w, v*)", ".3f", "final_nu_median"))
    else:
        items += [row(f"matched {kname} h = 1/2", ".2f", "matched_kappa_h1_mean", "matched_kappa_h2_mean"),
                  row("matched cos(w, v*) h = 1/2", ".2f", "matched_nu_h1_mean", "matched_nu_h2_mean"),
                  row("runs specialised/collapsed/mixed/failed", ".0f", *mh.CLASSES)]
    items.append(row("rank-1 ratio of W_Q^T W_K", ".3f", "rank1_ratio_median"))
    tight = [label for label in labels if metrics[f"{label}_rank1_ratio_median"] > 1 - 1e-9]
    if tight:
        items[-1] += f" ({tight[0]}: s2/s1 <= {metrics[f'{tight[0]}_max_s2_over_s1']:.0e}, rank one by construction)"
    head = f"{int(metrics['n_repeats'])} runs, {' vs '.join(words[label] for label in labels)}"
    return head + (" on the same draws" if len(labels) > 1 else "") + ": " + ", ".join(items)


# --- memory -----------------------------------------------------------------------------------------------------------
