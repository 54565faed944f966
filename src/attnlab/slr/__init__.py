"""Single-location regression (SLR): Marion et al. (ICLR 2025), Dohmatob (NeurIPS 2025), Duranthon et al. (2025).

Public surface:

* :mod:`attnlab.slr.data` -- the SLR sampler (random signal location J0) and the teacher pair (k*, v*);
* :mod:`attnlab.marion.predictors` -- erf-attention ``T_lambda``, the oracle, the best linear baseline, the Bayes predictor;
* :mod:`attnlab.marion.risk` -- Owen's T, zeta, the closed-form population risk in the five overlaps;
* :mod:`attnlab.marion.dynamics` -- overlaps, the manifold M, projected gradient descent and online SGD;
* :mod:`attnlab.dohmatob.model` -- softmax attention with a link (Dohmatob), the links, input validation;
* :mod:`attnlab.dohmatob.meanfield` -- REM constants, p(mu), Dohmatob's mean-field risks and dual kernels, exact-model MC;
* :mod:`attnlab.dohmatob.flows` -- the 5-D, 4-D and 2-D mean-field overlap flows (diffrax), stationary points on M;
* :mod:`attnlab.dohmatob.rgd` -- Riemannian GD on the empirical risk of n samples (vmapped, scanned).
"""
