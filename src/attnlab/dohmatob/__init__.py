"""Softmax attention on single-location regression: Dohmatob (NeurIPS 2025), exact mean-field analysis.

* :mod:`attnlab.dohmatob.model` -- softmax attention with a link (eq. 2), the links, input validation;
* :mod:`attnlab.dohmatob.data` -- Dohmatob's parameterisation of the SLR sampler (eq. 4) and its in-frame twin;
* :mod:`attnlab.dohmatob.meanfield` -- REM constants, p(mu), the mean-field risk (Prop. 1, Cor. 1), exact-model MC;
* :mod:`attnlab.dohmatob.flows` -- the 5-D, 4-D (Cor. 2) and 2-D (on M) overlap flows, stationary points on M;
* :mod:`attnlab.dohmatob.rgd` -- Riemannian GD on the empirical risk (eq. 29), JAX or the C kernel;
* :mod:`attnlab.dohmatob.rgd_native` -- the C kernel of the RGD steps (float32 tokens, AVX2 + FMA);
* :mod:`attnlab.dohmatob.presets` -- registration of the presets (``dohmatob-rgd``, ``-flow``, ``-phase-diagram``);
* :mod:`attnlab.dohmatob.rgd_preset` -- the Figure 2 preset: config, run, summary;
* :mod:`attnlab.dohmatob.flow_preset` -- the flow and phase-diagram presets: configs, runs, summaries;
* :mod:`attnlab.dohmatob.figures` -- the presets' figures.

The overlaps are :class:`attnlab.slr.overlaps.DohmatobOverlaps` ``(mu, nu, eta, zeta, rho)``. The functions
re-exported here compute in float64 (:func:`attnlab.runtime.float64`) and check their arguments first
(:mod:`attnlab.dohmatob.domain`: a one-line ValueError names an argument outside the domain).
"""

from attnlab._validate import public as _public
from attnlab.dohmatob import data as _data
from attnlab.dohmatob import domain as _domain
from attnlab.dohmatob import flows as _flows
from attnlab.dohmatob import meanfield as _meanfield
from attnlab.dohmatob import model as _model
from attnlab.dohmatob import rgd as _rgd
from attnlab.dohmatob.flows import FlowSolution, StationaryPoint
from attnlab.dohmatob.meanfield import DohmatobModel, REMConstants
from attnlab.dohmatob.rgd import RGDLog
from attnlab.slr.overlaps import DohmatobOverlaps

softmax_attention = _public(_model.softmax_attention, _domain.softmax_attention)
sample_dohmatob = _public(_data.sample_dohmatob, _domain.sample_dohmatob)
sample_dohmatob_in_frame = _public(_data.sample_dohmatob_in_frame, _domain.sample_dohmatob_in_frame)
rem_constants = _public(_meanfield.rem_constants, _domain.rem_constants)
localisation_probability = _public(_meanfield.localisation_probability, _domain.localisation_probability)
dual_kernel = _public(_meanfield.dual_kernel, _domain.dual_kernel)
mean_field_risk = _public(_meanfield.mean_field_risk, _domain.mean_field_risk)
corollary1_risk = _public(_meanfield.corollary1_risk, _domain.corollary1_risk)
mc_risk = _public(_meanfield.mc_risk, _domain.mc_risk)
mc_risk_batch = _public(_meanfield.mc_risk_batch, _domain.mc_risk_batch)
integrate = _public(_flows.integrate, _domain.integrate)
stationary_points_on_M = _public(_flows.stationary_points_on_M, _domain.stationary_points_on_M)
run_rgd = _public(_rgd.run_rgd, _domain.run_rgd)

__all__ = ["DohmatobOverlaps", "DohmatobModel", "REMConstants", "FlowSolution", "StationaryPoint", "RGDLog",
           "softmax_attention", "sample_dohmatob", "sample_dohmatob_in_frame", "rem_constants",
           "localisation_probability", "dual_kernel", "mean_field_risk", "corollary1_risk", "mc_risk", "mc_risk_batch",
           "integrate", "stationary_points_on_M", "run_rgd"]
