"""The public functions of attnlab.slr guard their domain, through the shared checks of attnlab._validate."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import _validate as check
from attnlab import slr
from attnlab.slr import DohmatobOverlaps, Overlaps


@pytest.mark.parametrize("value", [0, -5, 2.5, 3.0, math.inf, math.nan, True, np.bool_(True), "3", None, [3]])
def test_a_count_is_a_positive_integer_not_a_bool(value):
    with pytest.raises(ValueError, match="^n must be an integer >= 1"):
        check.count("n", value)


@pytest.mark.parametrize("value", [3, np.int64(3), np.uint8(3), np.asarray(3), jnp.asarray(3)])
def test_a_count_accepts_python_and_numpy_integers(value):
    assert check.count("n", value) == 3 and type(check.count("n", value)) is int


def test_real_checks_every_entry_and_leaves_tracers_alone():
    check.real("x", np.linspace(0, 1, 5), lo=0.0, hi=1.0)
    with pytest.raises(ValueError, match=r"^every entry of x must be in \[0, 1\]; got 1.5$"):
        check.real("x", np.array([0.5, 1.5]), lo=0.0, hi=1.0)
    with pytest.raises(ValueError, match="^x must be a number or an array; got a list$"):
        check.real("x", [0.5, 0.5])  # arithmetic on a list fails: only functions that convert take sequences
    check.real("x", [0.5, 0.5], sequence=True)
    with pytest.raises(ValueError, match=r"^x must be a number; got an array of shape \(2,\)$"):
        check.real("x", np.ones(2), scalar=True)
    with pytest.raises(ValueError, match="^beta must be a finite number > 0; got inf$"):
        check.positive("beta", math.inf)
    with pytest.raises(ValueError, match="NaN"):
        check.positive("beta", math.nan)
    # under jit the argument is a tracer: nothing is read, nothing raises
    assert float(jax.jit(lambda x: check.positive("x", x) * 1.0)(-1.0)) == -1.0


def test_psd_refuses_a_negative_direction_and_accepts_a_singular_covariance():
    check.psd("K", np.ones((3, 3)))  # rank one
    with pytest.raises(ValueError, match="^K must be positive semidefinite; its smallest eigenvalue is -1$"):
        check.psd("K", -np.eye(3))
    with pytest.raises(ValueError, match="symmetric"):
        check.psd("K", np.triu(np.ones((3, 3))))


@pytest.mark.parametrize("o, need", [
    (Overlaps(2.0, 3.0, 0.0, 0.0, 0.0), "kappa^2 + eta^2 <= 1"),
    (Overlaps(0.8, 0.0, 0.0, 0.8, 0.0), "kappa^2 + eta^2 <= 1"),
    (Overlaps(0.0, 0.9, 0.9, 0.0, 0.0), "theta^2 + nu^2 <= 1"),
    (Overlaps(0.9, 0.9, 0.0, 0.0, 0.5), "(rho - kappa theta - eta nu)^2"),  # |k.v| too large for the free parts
])
def test_impossible_overlaps_are_refused(o, need):
    with pytest.raises(ValueError, match=f"^o must be overlaps .* which needs {re.escape(need)}"):
        slr.frame_coordinates(o)


def test_realisable_overlaps_pass_up_to_round_off_and_in_batches(key):
    ks, vs = slr.sample_teacher(key, 7)
    k, v = slr.init_sphere(jax.random.fold_in(key, 1), 7)
    slr.frame_coordinates(slr.overlaps(k, v, ks, vs))
    slr.frame_coordinates(Overlaps(1.0 + 1e-15, 0.0, 0.0, 0.0, 0.0))  # the oracle, after round-off
    zero = np.zeros(5)
    slr.frame_coordinates(Overlaps(np.linspace(-1, 1, 5), zero + 0.5, zero, zero, zero))
    with pytest.raises(ValueError, match="got \\(-1.5, 0.5, 0, 0, 0\\)"):
        slr.frame_coordinates(Overlaps(np.linspace(-1.5, 1, 5), zero + 0.5, zero, zero, zero))


def test_the_overlaps_of_the_other_notation_are_refused():
    with pytest.raises(ValueError, match=r"^o must be an attnlab\.slr\.Overlaps .* got DohmatobOverlaps "
                                         r"\(convert with \.to_marion\(\)\)$"):
        slr.frame_coordinates(DohmatobOverlaps(0.1, 0.2, 0.0, 0.0, 0.0))


def test_samplers_refuse_bad_sizes_and_a_teacher_that_is_not_orthonormal(key):
    ks, vs = slr.sample_teacher(key, 5)
    assert slr.sample_slr(key, ks, vs, 4, 3, 0.7).X.shape == (4, 3, 5)
    for kw, match in (({"n": 2.5}, "^n must be an integer"), ({"L": 0}, "^L must be an integer >= 1"),
                      ({"gamma": -1.0}, "^gamma must be >= 0"), ({"eps": math.nan}, "^eps must be")):
        args = {"n": 4, "L": 3, "gamma": 0.7, "eps": 0.0, **kw}
        with pytest.raises(ValueError, match=match):
            slr.sample_slr(key, ks, vs, **args)
    with pytest.raises(ValueError, match="^k_star and v_star must both have length 1"):
        slr.sample_slr(key, 2 * ks, vs, 4, 3, 0.7)
    with pytest.raises(ValueError, match="^k_star and v_star must be orthogonal"):
        slr.sample_slr(key, ks, ks, 4, 3, 0.7)
    with pytest.raises(ValueError, match=r"^v_star must have shape \(5,\)"):
        slr.sample_slr(key, ks, vs[:4], 4, 3, 0.7)
    with pytest.raises(ValueError, match="^d must be an integer >= 4"):
        slr.sample_slr_in_frame(key, 4, 3, 0.7, 0.0, 3)
    with pytest.raises(ValueError, match="^r must be at most d"):
        slr.orthonormal_frame(key, 3, 4)


def test_owens_t_and_zeta_domains():
    assert float(slr.owens_t(math.inf, 0.5)) == 0.0
    with pytest.raises(ValueError, match=r"^a must be in \[0, 1\]; got 2$"):
        slr.owens_t(1.0, 2.0)
    with pytest.raises(ValueError, match="^sigma must be >= 0"):
        slr.zeta(0.0, -1.0)
    with pytest.raises(ValueError, match="^n must be an integer >= 2"):
        slr.mc_mean(jax.random.key(0), lambda k, m: jnp.zeros(m), 1, chunk=1)
