r"""Replica-symmetric (RS) fixed point of ERM on the manifold M, and the Bayes-optimal state evolution, for
Duranthon, Marion, Boyer, Loureiro, Zdeborova (2025, arXiv 2509.21936).

The RS equations here are reconstructed from the standard multi-index ERM replica formulas (Aubin et al. 2020;
Loureiro et al. 2021; Cui 2025) specialised to single-location attention, not copied from the paper, whose own
fixed-point equations are its eqs. (18)-(25).

Modules:

* ``samples`` -- frozen samples (common random numbers, Monte Carlo or scrambled Sobol) and the student fields;
* ``proximal`` -- the proximal problem of one sample, monotone modified Newton, Jacobi eigendecomposition;
* ``blocks`` -- the proximal problems of every sample in rounds and fixed-size blocks (compiled once);
* ``fixed_point_map`` -- the channel integrals (hats), the prior update and the map F with its diagnostics;
* ``stability`` -- the replicon (de Almeida-Thouless) eigenvalue of the RS point;
* ``sensitivity`` -- the map's Jacobian, dx*/dlambda by implicit differentiation of the fixed point, dE/dlambda;
* ``anderson`` -- safeguarded Anderson acceleration (or damping) for x = F(x);
* ``solve`` -- :func:`solve_replica` and its convergence report :class:`ReplicaResult`;
* ``continuation`` -- continuation in lambda and alpha, standard starts, branch tracking;
* ``ridge`` -- the classical ridge replica equations (the L = 1 reference);
* ``bayes_optimal`` -- the Bayes-optimal state evolution (spiked-SLR; max-SLR at nu = inf) and its test error.

Six order parameters ``(m_a, q_a, V_a)``, a in {k, v}, and their hats. Per sample (frozen Monte Carlo draws, so the
iteration map is deterministic)::

    omega^k = m_k chi* + s_k xi^k,   omega^v = m_v zeta* + s_v xi^v,   s_a = sqrt(q_a - m_a^2)
    chi_hat = argmin_chi  |chi - omega^k|^2/(2 V_k) + (y - sigma(chi)^T omega^v)^2 / (2 (1 + V_v |sigma(chi)|^2))
    r = (y - sigma_hat^T omega^v)/(1 + V_v |sigma_hat|^2),   f^v = sigma_hat r,   f^k = (chi_hat - omega^k)/V_k
    q_hat_a = alpha E|f^a|^2,  V_hat_a = -alpha E[sum_l df^a_l/domega^a_l],  m_hat_a = alpha E[f^a . h*^a] + m_a V_hat_a
    V_a = 1/(lambda_a + V_hat_a),   m_a = m_hat_a V_a,   q_a = (m_hat_a^2 + q_hat_a) V_a^2

Proximal problem. Monotone modified Newton (positive Hessian eigenvalues floored at ``0.01/V_k``, negative ones
replaced by ``max(|.|, 0.5/V_k)``, best of a few trial step lengths, early stop at |grad| <= 1e-12, then a final full
Newton step; the eigendecomposition by fixed-sweep Jacobi for L <= 4, ``proximal._sym_eig``) from omega^k, or
from 2L + 1 starts (omega^k and omega^k +- sqrt(V_k)(1+|y|) e_l) keeping the lowest value: at small lambda V_k is large and
the problem is non-convex for a few per cent of the samples, where one start from omega^k misses the global minimum
(tested against a brute-force grid). Inside a fixed-point solve the single-start evaluations are warm-started at the
previous evaluation's proximal points, and the batch of Newton loops is run in rounds of a few steps, gathering the
unfinished (sample, start) pairs after each round (``blocks._presolve``), so that the slowest sample no longer sets the
cost of the whole batch. Every compiled program of the inner solver runs on blocks of a few fixed sizes
(``blocks._blocks``), so a new number of samples or starts costs no compilation; the integrals over the samples are
reduced on the host (``fixed_point_map._reduce_hats``).

V_hat integrand. "implicit": the implicit function theorem at the proximal point; "unrolled": forward mode through
the Newton steps (equal to implicit once converged); "stein": Stein's lemma ``E[sum_l df_l/domega_l] =
E[sum_l f_l xi_l]/s_a``. The first two are pointwise derivatives; where the global minimiser switches between local
minima f jumps, and the derivative that the replica computation needs (the heat equation for the Moreau envelope,
``d_C E[phi] = E[phi'']/2``) is the distributional one, which the Stein form includes and the pointwise forms miss.
Every evaluation reports the difference (the "jump term") with its SE: within SE of 0 where every proximal problem
is convex (tested at lambda = 1), many SE away at small lambda.

Solver. :func:`solve_replica`: safeguarded Anderson acceleration (memory 6, carried along a continuation path; or
plain damping) with a convergence report per point (residual, map evaluations, status, branch, training objective,
diagnostics); :func:`continue_in_lambda` and :func:`replica_curve`: continuation in lambda and alpha and branch
tracking from informed and uninformed starts (:func:`standard_starts`), the ERM branch being the converged one with
the lowest training objective per sample. The test error at the fixed point is the risk-on-M formula (four overlaps)
evaluated by :func:`attnlab.duranthon.population.overlap_risk` on fresh samples. Every evaluation also returns the
replicon (de Almeida-Thouless) eigenvalue of the RS point (:func:`at_eigenvalue`): RS is locally stable iff it is
below 1. :func:`solve_bayes_optimal`: the Bayes-optimal state evolution (spiked-SLR, and max-SLR at nu = inf).

Status of the reconstruction. Tested: L = 1 reproduces the classical ridge equations (5 SE over frozen-sample seeds,
``tests/duranthon/replica``). Against L-BFGS ERM: at high signal and strong regularisation (softmax, spiked-SLR
nu = 5, L = 2, alpha = 4, lambda_k = lambda_v = 1, where every proximal problem is convex and the RS point is
stable) the replica overlaps and training loss agree with ERM within about two combined standard errors, and the
``duranthon-sample-complexity`` preset checks the test error at every alpha (``bench/erm_scale.py`` follows the gap
as the size grows). At low nu and low lambda (the ``duranthon-low-snr`` preset: spiked nu = 1, L = 3, alpha = 2,
lambda down to 0.01) a few per cent of the proximal problems are non-convex, the jump term of V_hat is many SE from
0, and the pointwise and Stein estimators give different fixed points; the pointwise map can stall (near-degenerate
minima make the implicit derivative heavy-tailed) where the Stein map converges, from informed and uninformed starts
alike. There ERM from informed and random starts ends at different minima of the training loss, the Stein (the
distributionally correct RS) fixed point has a lower training objective than the ERM runs, and the replicon
eigenvalue (:func:`at_eigenvalue`) crosses 1 near lambda = 0.3 and stays above it for lambda <= 0.1 (it is well
below 1 at lambda = 1): the RS ansatz is locally unstable in the regime where replica and ERM part, so a converged
RS point would not describe ERM there either. The preset reports these diagnostics per point;
``docs/papers/duranthon.md`` ("Replica against ERM") gives the overlaps of both settings.
"""

from attnlab.duranthon.replica.anderson import fixed_point
from attnlab.duranthon.replica.bayes_optimal import (
    BOResult,
    bayes_optimal_excess,
    bayes_optimal_test_error,
    log_argmax_probs,
    solve_bayes_optimal,
)
from attnlab.duranthon.replica.blocks import compile_blocks
from attnlab.duranthon.replica.continuation import (
    BranchCurve,
    continue_in_alpha,
    continue_in_lambda,
    lambda_path,
    replica_curve,
    rescaled_start,
    secant_predictor,
    standard_starts,
)
from attnlab.duranthon.replica.fixed_point_map import MapValue, Order, evaluate_map, prior_update, replica_map
from attnlab.duranthon.replica.ridge import ridge_fixed_point
from attnlab.duranthon.replica.samples import FrozenSamples, frozen_samples
from attnlab.duranthon.replica.sensitivity import (
    MapJacobian,
    fixed_point_lambda_derivative,
    map_jacobian,
    risk_lambda_derivative,
)
from attnlab.duranthon.replica.solve import ReplicaResult, solve_replica
from attnlab.duranthon.replica.stability import at_eigenvalue

__all__ = ["Order", "FrozenSamples", "frozen_samples", "replica_map", "evaluate_map", "MapValue", "prior_update",
           "ReplicaResult", "solve_replica", "lambda_path", "continue_in_lambda", "continue_in_alpha", "standard_starts",
           "BranchCurve", "replica_curve", "ridge_fixed_point", "fixed_point", "secant_predictor", "rescaled_start",
           "at_eigenvalue", "compile_blocks", "solve_bayes_optimal", "BOResult", "bayes_optimal_test_error",
           "bayes_optimal_excess", "log_argmax_probs", "MapJacobian", "map_jacobian", "fixed_point_lambda_derivative",
           "risk_lambda_derivative"]
