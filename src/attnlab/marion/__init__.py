"""Erf attention on single-location regression: Marion, Berthier, Biau, Boyer (ICLR 2025).

* :mod:`attnlab.marion.risk` -- the closed-form population risk in the five overlaps (Theorem 1), oracle and linear baseline;
* :mod:`attnlab.marion.predictors` -- erf attention ``T_lambda``, the oracle, the best linear predictor, the Bayes predictor;
* :mod:`attnlab.marion.dynamics` -- projected GD on the sphere (vector and exact 5-overlap recursion), online SGD;
* :mod:`attnlab.marion.montecarlo` -- Monte Carlo risks in R^d (excess, Bayes, linear baseline) and in the frame;
* :mod:`attnlab.marion.presets` -- the five official configurations as presets, and the registration of the App. E.3
  and Sec. 2 presets;
* :mod:`attnlab.marion.figures` -- the presets' figure;
* :mod:`attnlab.marion.multihead` -- two erf heads on two signal tokens (App. E.3): closed-form risk from the Gram
  matrix, the exact reduced SGD chain, classes of runs; :mod:`attnlab.marion.multihead_preset` and
  :mod:`attnlab.marion.multihead_figures` -- its preset and figure.
* :mod:`attnlab.marion.transformer` -- the one-layer transformer with a frozen register token of App. E.3 (T2: one
  softmax head, T3: two heads): model, SGD, diagnostics, LayerNorm floor; :mod:`attnlab.marion.transformer_preset`
  (configs, runs), :mod:`attnlab.marion.transformer_summary` (checks, finding) and
  :mod:`attnlab.marion.transformer_figures` -- its two presets and their figures.
* :mod:`attnlab.marion.probing` -- the template sentences of the BERT probing experiment (Sec. 2);
  :mod:`attnlab.marion.probing_bert` -- a BERT encoder forward pass in JAX read from a Hugging Face model directory;
  :mod:`attnlab.marion.probing_preset` and :mod:`attnlab.marion.probing_figures` -- its preset and figure.

The functions re-exported here compute in float64 (:func:`attnlab.runtime.float64`) and check their arguments first
(:mod:`attnlab.marion.domain`: a one-line ValueError names an argument outside the domain).
"""

from attnlab._validate import public as _public
from attnlab.marion import domain as _domain
from attnlab.marion import dynamics as _dynamics
from attnlab.marion import predictors as _predictors
from attnlab.marion import risk as _risk
from attnlab.marion.dynamics import SLRParams
from attnlab.slr.overlaps import Overlaps

population_excess_risk = _public(_risk.population_excess_risk, _domain.population_excess_risk)
population_risk = _public(_risk.population_risk, _domain.population_risk)
risk_R = _public(_risk.risk_R, _domain.risk_R)
risk_on_manifold = _public(_risk.risk_on_manifold, _domain.risk_on_manifold)
oracle_excess_risk = _public(_risk.oracle_excess_risk, _domain.oracle_excess_risk)
linear_baseline_risk = _public(_risk.linear_baseline_risk, _domain.linear_baseline_risk)
erf_attention = _public(_predictors.erf_attention, _domain.erf_attention)
bayes_predictor = _public(_predictors.bayes_predictor, _domain.bayes_predictor)
distance_to_manifold = _public(_dynamics.distance_to_manifold, _domain.distance_to_manifold)
pgd_step_reduced = _public(_dynamics.pgd_step_reduced, _domain.pgd_step_reduced)
run_pgd_reduced = _public(_dynamics.run_pgd_reduced, _domain.run_pgd_reduced)
run_pgd_full = _public(_dynamics.run_pgd_full, _domain.run_pgd_full)
run_sgd_reduced = _public(_dynamics.run_sgd_reduced, _domain.run_sgd_reduced)
run_sgd_full = _public(_dynamics.run_sgd_full, _domain.run_sgd_full)

__all__ = ["Overlaps", "SLRParams", "population_excess_risk", "population_risk", "risk_R", "risk_on_manifold",
           "oracle_excess_risk", "linear_baseline_risk", "erf_attention", "bayes_predictor", "distance_to_manifold",
           "pgd_step_reduced", "run_pgd_reduced", "run_pgd_full", "run_sgd_reduced", "run_sgd_full"]
