"""The public functions of attnlab.bruno guard their domain (attnlab.bruno.domain), and make_model and normalize
compute in float64 whatever the caller's JAX setting."""

import math

import jax
import numpy as np
import pytest

from attnlab import bruno
from attnlab.bruno import integrate


def test_make_model_and_normalize_give_float64_and_a_float64_step_outside_x64():
    x0 = np.random.default_rng(0).normal(size=(64, 3))
    with jax.enable_x64(False):
        model = bruno.make_model(3, V=np.diag([1.0, 0.5, -0.3]), beta=2.0)
        x = bruno.normalize(x0)
        assert model.Q.dtype == model.V.dtype == x.dtype == np.float64
        y = np.asarray(bruno.step(x, model, 0.1))
    with jax.enable_x64(True):
        ref = np.asarray(integrate.step(integrate.normalize(x0), integrate.make_model(3, V=np.diag([1.0, 0.5, -0.3]),
                                                                                      beta=2.0), 0.1))
    assert np.max(np.abs(y - ref)) < 1e-14  # float32 matrices gave errors of order 1e-10


def test_tokens_of_the_wrong_dimension_raise_a_value_error(key):
    model = bruno.make_model(3, beta=1.0)
    x4 = bruno.uniform_sphere(key, 10, 4)
    with pytest.raises(ValueError, match="^the tokens have dimension 4 but the model's matrices are 3 x 3$"):
        bruno.step(x4, model, 0.1)
    with pytest.raises(ValueError, match="^Q must be a 4 x 4 matrix to act on tokens of dimension 4; got shape"):
        bruno.attention(x4, model.Q, model.K, model.V, 1.0)
    with pytest.raises(ValueError, match="^x0 must live in dimension d >= 2"):
        bruno.simulate(np.ones((5, 1)), model, [1.0], 0.1)
    with pytest.raises(ValueError, match=r"^x must have shape \(N, d\); got shape \(10,\)$"):
        bruno.order_parameter(np.ones(10), 1.0)


def test_models_and_integrations_refuse_bad_values(key):
    with pytest.raises(ValueError, match="^every entry of V must be a finite number"):
        bruno.make_model(3, V=np.diag([np.inf, 1.0, 1.0]))
    with pytest.raises(ValueError, match="^beta must be a finite number > 0; got inf$"):
        bruno.make_model(3, beta=math.inf)
    with pytest.raises(ValueError, match="^d must be an integer >= 2; got 2.5$"):
        bruno.make_model(2.5)
    with pytest.raises(ValueError, match="^unknown model option 'normalisation'"):
        bruno.make_model(3, normalisation="usa")
    model = bruno.make_model(3)
    x = bruno.uniform_sphere(key, 8, 3)
    with pytest.raises(ValueError, match="^every entry of times must be a finite number"):
        bruno.simulate(x, model, [1.0, math.inf], 0.1)
    with pytest.raises(ValueError, match="^dt must be > 0"):
        bruno.step(x, model, -0.1)
    with pytest.raises(ValueError, match="^scheme must be one of"):
        bruno.step(x, model, 0.1, scheme="rk45")
    with pytest.raises(ValueError, match="^max_steps must be an integer >= 1"):
        bruno.simulate_adaptive(x, model, [1.0], max_steps=0)
    with pytest.raises(ValueError, match="^every row of x must be nonzero"):
        bruno.normalize(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="^n must be an integer >= 1; got 10.0$"):
        bruno.uniform_sphere(key, 10.0, 3)
