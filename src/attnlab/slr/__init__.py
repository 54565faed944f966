"""Single-location regression (SLR): Marion et al. (ICLR 2025), Dohmatob (NeurIPS 2025), Duranthon et al. (2025).

Public surface:

* :mod:`attnlab.slr.data` -- the SLR sampler (random signal location J0) and the teacher pair (k*, v*);
* :mod:`attnlab.slr.predictors` -- erf-attention ``T_lambda``, the oracle, the best linear baseline, the Bayes predictor;
* :mod:`attnlab.slr.risk` -- Owen's T, zeta, the closed-form population risk in the five overlaps;
* :mod:`attnlab.slr.dynamics` -- overlaps, the manifold M, projected gradient descent and online SGD.
"""
