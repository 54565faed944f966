"""Softmax against linear attention in single-location regression: Duranthon, Marion, Boyer, Loureiro, Zdeborova,
"Statistical advantage of softmax attention: insights from single-location regression" (2025, arXiv 2509.21936).

Modules:

* :mod:`attnlab.duranthon.activations` -- the attention-weight family sigma (softmax, linear, centred linear, erf,
  softplus-normalised, user-defined);
* :mod:`attnlab.duranthon.data` -- spiked-SLR and max-SLR samplers (fixed or random length), the teacher pair;
* :mod:`attnlab.duranthon.population` -- population risks (alpha = infinity): risk on M, Bayes risk, linear closed forms;
* :mod:`attnlab.duranthon.erm` -- L-BFGS empirical risk minimisation, its overlaps and test error;
* :mod:`attnlab.duranthon.landscape` -- full-batch GD and minibatch SGD on the empirical risk, the minima they reach,
  M's invariance (App. A.2); :mod:`attnlab.duranthon.landscape_preset` -- its preset;
* :mod:`attnlab.duranthon.replica` -- the replica-symmetric fixed point of ERM and the Bayes-optimal state evolution;
* :mod:`attnlab.duranthon.sample_complexity` -- theory against simulation along alpha and along lambda;
* :mod:`attnlab.duranthon.presets` -- the presets' configs, runs and registration;
* :mod:`attnlab.duranthon.summaries` -- the presets' metrics and checks;
* :mod:`attnlab.duranthon.figures` -- the presets' figures.

The functions re-exported here compute in float64 whatever the caller's JAX setting (:func:`attnlab.runtime.float64`)
and check their arguments first (:mod:`attnlab.duranthon.domain`: a one-line ValueError names an argument outside the
domain); importing this package changes nothing in the process.
"""

from attnlab._validate import public as _public
from attnlab.duranthon import activations as _activations
from attnlab.duranthon import data as _data
from attnlab.duranthon import domain as _domain
from attnlab.duranthon import erm as _erm
from attnlab.duranthon import population as _population
from attnlab.duranthon import replica as _replica
from attnlab.duranthon.activations import ACTIVATIONS, Activation, custom_activation
from attnlab.duranthon.data import DuranthonBatch, LengthLaw, Scores, length_law
from attnlab.duranthon.erm import ERMOverlaps, ERMResult
from attnlab.duranthon.population import OptimalScale
from attnlab.duranthon.replica import BOResult, FrozenSamples, Order, ReplicaResult

activation = _public(_activations.activation, _domain.activation)

sample_teacher_sqrtD = _public(_data.sample_teacher_sqrtD, _domain.sample_teacher_sqrtD)
sample_scores = _public(_data.sample_scores, _domain.sample_scores)
sample_sequences = _public(_data.sample_sequences, _domain.sample_sequences)

bayes_risk_quad = _public(_population.bayes_risk_quad, _domain.bayes_risk_quad)
bayes_risk_mc = _public(_population.bayes_risk_mc, _domain.bayes_risk_mc)
bayes_risk_is = _public(_population.bayes_risk_is, _domain.bayes_risk_is)
linear_risk = _public(_population.linear_risk, _domain.linear_risk)
overlap_risk = _public(_population.overlap_risk, _domain.overlap_risk)
overlap_risk_gradient = _public(_population.overlap_risk_gradient, _domain.overlap_risk_gradient)
optimal_key_scale = _public(_population.optimal_key_scale, _domain.optimal_key_scale)

fit_erm = _public(_erm.fit_erm, _domain.fit_erm)
erm_overlaps = _public(_erm.erm_overlaps, _domain.erm_overlaps)
erm_overlap_risk = _public(_erm.erm_overlap_risk, _domain.erm_overlap_risk)
fresh_test_error = _public(_erm.fresh_test_error, _domain.fresh_test_error)

frozen_samples = _public(_replica.frozen_samples, _domain.frozen_samples)
solve_replica = _public(_replica.solve_replica, _domain.solve_replica)
continue_in_alpha = _public(_replica.continue_in_alpha, _domain.continue_in_alpha)
continue_in_lambda = _public(_replica.continue_in_lambda, _domain.continue_in_lambda)
replica_curve = _public(_replica.replica_curve, _domain.replica_curve)
at_eigenvalue = _public(_replica.at_eigenvalue, _domain.at_eigenvalue)
solve_bayes_optimal = _public(_replica.solve_bayes_optimal, _domain.solve_bayes_optimal)
bayes_optimal_test_error = _public(_replica.bayes_optimal_test_error, _domain.bayes_optimal_test_error)
fixed_point_lambda_derivative = _public(_replica.fixed_point_lambda_derivative, _domain.fixed_point_lambda_derivative)
risk_lambda_derivative = _public(_replica.risk_lambda_derivative, _domain.risk_lambda_derivative)

__all__ = ["ACTIVATIONS", "Activation", "activation", "custom_activation",
           "LengthLaw", "length_law", "Scores", "DuranthonBatch", "sample_teacher_sqrtD", "sample_scores",
           "sample_sequences",
           "bayes_risk_quad", "bayes_risk_mc", "bayes_risk_is", "linear_risk", "overlap_risk", "overlap_risk_gradient",
           "OptimalScale",
           "optimal_key_scale",
           "ERMOverlaps", "ERMResult", "fit_erm", "erm_overlaps", "erm_overlap_risk", "fresh_test_error",
           "FrozenSamples", "frozen_samples", "Order", "ReplicaResult", "solve_replica", "continue_in_alpha",
           "continue_in_lambda", "replica_curve", "at_eigenvalue", "BOResult", "solve_bayes_optimal",
           "bayes_optimal_test_error", "fixed_point_lambda_derivative", "risk_lambda_derivative"]
