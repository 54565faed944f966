"""Presets for Dohmatob, "Understanding Softmax Attention Layers: Exact Mean-Field Analysis on a Toy Problem"
(NeurIPS 2025): their registration. The configs, runs and summaries are in :mod:`attnlab.dohmatob.rgd_preset` and
:mod:`attnlab.dohmatob.flow_preset`, the figures in :mod:`attnlab.dohmatob.figures`.

* ``dohmatob-rgd`` (Figure 2): Riemannian GD on the empirical risk of n = 1000 samples, d = 100, L = 20, beta = 1,
  gamma = 1/sqrt(2) (the model then coincides with Marion et al.'s), eps = 0.1, step 0.01, one panel per link
  (linear, quadratic, ReLU), from a random start and from mu0 = 0.5 (above the transition psi / c = 0.343). The
  initialisation, the number of steps and the repeats are not stated in the paper and are chosen here. Theory on
  the same axes: the mean-field risk R_bar at the iterate's overlaps (Prop. 1, Cor. 1) and the 5-D mean-field
  overlap flow integrated from the same start (time = step x s).

  Checks: (1) mean field against a Monte Carlo of the exact model (5 SE) at the final iterates where the secret
  token is located beyond the scale of the logit fluctuation the mean field drops (``c mu - psi >= 5 gamma /
  sqrt(d)``) and at the oracle; (1b) the final iterates with p(mu) > 0.99 in the model at ``d_check`` = 1600 (same
  L, beta, gamma), where the logit margin (c mu - psi) beta d outgrows its fluctuation gamma beta sqrt(d): at
  d = 100 the exact risk exceeds R_bar there by an O(1/sqrt(d)) term, reported as the metrics
  ``mean_field_vs_mc_max_gap_p_above_0_99`` and ``..._at_d_1600``, not checked; (2) the final nu of the flow
  against RGD from the mu0 start (linear link), within the n-sample fit error ``d (eps^2 + risk) / (2 n gamma^2)``
  + 5 SE; (3) the in-frame held-out estimator against a fixed R^d test set.

  Precision: the two token products of each RGD step (scores X [u, v], gradient X^T C) and the per-token
  arithmetic between them run in float32 by default (``token_dtype``); the projection, the iterates and the logged
  losses are float64. The iterates then move by less than 1e-4 on the overlaps over 300 steps
  (tests/dohmatob/test_rgd.py), two orders below the sampling spread 1/sqrt(n). On a CPU with AVX2 and FMA,
  ``implementation=auto`` runs the steps in the C kernel of :mod:`attnlab.dohmatob.rgd_native` (block gradients
  summed in float64; recorded per run as ``implementations = {"rgd": ...}``); ``--set token_dtype=float64`` gives
  the all-float64 run. For the quadratic link the step s = 0.01 is beyond the stability limit 2 / (largest
  eigenvalue of the v-Hessian of the empirical loss at the start), so RGD from mu0 loses the secret token while the
  mean-field flow learns. A failed solve of the flow is reported (metric ``flow_failures``), its trajectory NaN.
* ``dohmatob-flow``: the 2-D flow on M, phase portrait and classified stationary points per link; failed ODE solves
  and unconverged root findings are reported (metrics ``flow_failures``, ``stationary_points_unconverged``).
* ``dohmatob-phase-diagram``: learnability in (gamma, alpha): learnable iff sqrt(1 - gamma^2) > psi(alpha, beta)
  (Prop. 2), the mean-field oracle risk, and Monte Carlo oracle risks at finite d.
"""

from __future__ import annotations

from attnlab.dohmatob.flow_preset import (
    CITATION,
    FlowConfig,
    PhaseConfig,
    run_flow,
    run_phase,
    summarize_flow,
    summarize_phase,
)
from attnlab.dohmatob.rgd_preset import RGDConfig, rgd_implementations, run_rgd_preset, summarize_rgd
from attnlab.registry import Preset, deferred, register


def _rgd_finding(m, cfg) -> str:
    parts = []
    for link in cfg.links:
        if f"final_nu_median_{link}_mu0" in m:
            parts.append(f"{link}: from mu0 = {cfg.mu0:g} final nu {m[f'final_nu_median_{link}_mu0']:.3f} "
                         f"(flow {m[f'flow_final_nu_median_{link}_mu0']:.3f}), test excess risk "
                         f"{m[f'final_test_excess_risk_median_{link}_mu0']:.3g}; from random starts "
                         f"{m[f'final_test_excess_risk_median_{link}_random']:.3g}")
    return "; ".join(parts) + f" (medians over {cfg.n_repeats} repeats)"


def _flow_finding(m, cfg) -> str:
    agree = ", ".join(f"{link} {int(m[f'prop10_agreement_{link}'])}/{int(m[f'prop10_listed_{link}'])}"
                      for link in cfg.links)
    return (f"stationary points classified as in Prop. 10: {agree}; the field vanishes at the "
            f"{int(m['n_nontrivial_stationary_points'])} stationary points off the corners; transition mu = "
            f"{m['transition_mu']:.3f}")


def _phase_finding(m, cfg) -> str:
    return (f"{100 * m['learnable_fraction_of_grid']:.0f}% of the (gamma, alpha) grid is learnable (c > psi); "
            f"{int(m['n_mc_points_deep_learnable'])} Monte Carlo points deep in the learnable phase have the "
            f"mean-field oracle risk; {int(m['n_mc_points_deep_learnable'] + m['n_mc_points_deep_unlearnable'])} far "
            "from the boundary agree with c > psi")


register(Preset(
    name="dohmatob-rgd", paper="dohmatob", citation=CITATION, figure="Fig. 2",
    description="Riemannian GD on the empirical risk (n = 1000), linear/quadratic/ReLU links, random and mu0 = 0.5 "
                "starts, with the mean-field risk and flow on the same axes.",
    config_cls=RGDConfig, run=run_rgd_preset, summarize=summarize_rgd, plot=deferred("attnlab.dohmatob.figures:plot_rgd"),
    defaults={}, implementations=rgd_implementations, finding=_rgd_finding,
    # the full n = 1000 (at n = 200 the empirical minimiser is far from the population flow's) on one link, 300 steps
    quick={"n_repeats": 3, "n_steps": 300, "log_every": 50, "n_train": 1000, "n_test": 2000, "n_test_rd": 500,
           "links": ("linear",), "mu0": 0.9}))


register(Preset(
    name="dohmatob-flow", paper="dohmatob", citation=CITATION, figure="Props. 6-10 (no figure)",
    description="The 2-D mean-field flow on M: phase portrait, stationary points classified by their Jacobians.",
    config_cls=FlowConfig, run=run_flow, summarize=summarize_flow, plot=deferred("attnlab.dohmatob.figures:plot_flow"),
    defaults={}, finding=_flow_finding,
    # every link: the quadratic link has the stationary points off the corners that the field check needs
    quick={"n_grid": 4, "n_times": 21}))


register(Preset(
    name="dohmatob-phase-diagram", paper="dohmatob", citation=CITATION, figure="Prop. 2 / Condition 2 (no figure)",
    description="Learnability in (gamma, alpha): sqrt(1 - gamma^2) > psi, mean-field oracle risk, Monte Carlo points.",
    config_cls=PhaseConfig, run=run_phase, summarize=summarize_phase, plot=deferred("attnlab.dohmatob.figures:plot_phase"),
    defaults={}, finding=_phase_finding,
    # the full set of Monte Carlo points (20, 6 deep in the learnable phase)
    quick={"n_gamma": 30, "n_alpha": 30}))
