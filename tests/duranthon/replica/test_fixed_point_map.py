"""The fixed-point map: the V_hat estimators (implicit, unrolled, Stein) agree where they should."""


import jax
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.replica import frozen_samples


@pytest.mark.slow
def test_implicit_and_unrolled_jacobians_agree():
    """The V_hat integrand by the implicit function theorem equals forward-mode through converged Newton steps."""
    from attnlab.duranthon.replica import replica_map

    s = frozen_samples(jax.random.key(1), "spiked", 5.0, 2, 300)
    order = (1.0, 1.5, 0.5, 0.8, 0.8, 0.5)
    a, ta = replica_map(activation("softmax"), order, 4.0, 1.0, 1.0, s, 30, "implicit")
    b, tb = replica_map(activation("softmax"), order, 4.0, 1.0, 1.0, s, 30, "unrolled")
    assert np.max(np.abs(a - b)) < 1e-8 and abs(ta - tb) < 1e-12


def test_stein_and_pointwise_v_hat_agree_where_the_proximal_problems_are_convex():
    """At lambda = 1 every proximal problem has one minimum, f is smooth, and the Stein (distributional) V_hat equals
    the pointwise (implicit) one: the jump terms are within 5 SE of 0."""
    from attnlab.duranthon.replica import evaluate_map

    s = frozen_samples(jax.random.key(4), "spiked", 1.0, 3, 2000)
    v = evaluate_map(activation("softmax"), (0.15, 0.115, 0.95, 0.44, 0.36, 0.72), 2.0, 1.0, 1.0, s)
    assert v.nonconvex == 0.0 and v.inner_unconverged == 0.0
    assert abs(v.jump_k) <= 5 * v.jump_k_se and abs(v.jump_v) <= 5 * v.jump_v_se
