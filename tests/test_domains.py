"""The public functions of every paper package guard their domain and compute in float64; the presets' configs do.

* Every function exported by a paper's ``__init__`` (its ``__all__``) runs inside :func:`attnlab.runtime.float64`,
  except the few that compute no array (listed with the reason).
* Fuzzing: arguments drawn with bad values among good ones (negative, zero, non-integer, boolean, NaN, infinite,
  wrong shapes); every draw gives a finite result or a one-line ValueError, never another exception.
* Configs: every field of every preset's config class is described; a field a preset does not read is refused.
"""

import importlib
import math

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attnlab import bruno, dohmatob, duranthon, marion, runtime, sakai, slr
from attnlab.errors import AttnlabError
from attnlab.registry import PAPERS, all_presets, resolve_config

NO_ARRAYS = {
    "duranthon.custom_activation": "wraps a user callable, computes nothing",
    "duranthon.length_law": "pure Python: lengths and probabilities",
    "bruno.animate": "draws a GIF from a stored dataset (NumPy and matplotlib)",
    "slr.resolving_se": "pure Python: a standard error from two floats",
}
_FLOAT64 = runtime.float64(lambda: None).__code__


@pytest.mark.parametrize("paper", ("slr", *PAPERS))
def test_every_exported_function_computes_in_float64(paper):
    package = importlib.import_module(f"attnlab.{paper}")
    for name in package.__all__:
        obj = getattr(package, name)
        if isinstance(obj, type) or not callable(obj) or f"{paper}.{name}" in NO_ARRAYS:
            continue
        assert getattr(obj, "__code__", None) is _FLOAT64, f"attnlab.{paper}.{name} is not wrapped in float64"


FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

JUNK = [math.nan, math.inf, -math.inf, True, None, "x", [1.0, 2.0]]
BAD_COUNT = st.sampled_from([0, -1, 2.5, 4.0, np.float64(3), *JUNK])
BAD_REAL = st.sampled_from(JUNK)
BAD_POSITIVE = st.sampled_from([0.0, -1.0, *JUNK])


@st.composite
def arguments(draw, good: dict, wrong: dict):
    """Arguments drawn from ``good``, then (half of the time) one of them replaced by a draw from ``wrong``."""
    args = {name: draw(strategy) for name, strategy in good.items()}
    target = draw(st.sampled_from([None] * len(wrong) + list(wrong)))
    if target is not None:
        args[target] = draw(wrong[target])
    return args


@st.composite
def unit_pair_overlaps(draw):
    """Marion's five overlaps of two unit vectors k, v of R^4 with the orthonormal teacher (e_0, e_1)."""
    vector = st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(lambda x: np.linalg.norm(x) > 0.1)
    k, v = (np.asarray(draw(vector)) for _ in range(2))
    k, v = k / np.linalg.norm(k), v / np.linalg.norm(v)
    return float(k[0]), float(v[1]), float(v[0]), float(k[1]), float(k @ v)


def outcome(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or None when it raises a one-line ValueError; any other exception fails the test."""
    try:
        result = fn(*args, **kwargs)
    except ValueError as err:
        message = str(err)
        assert message and "\n" not in message, f"not a one-line message: {message!r}"
        return None
    leaves = [np.asarray(x) for x in jax.tree.leaves(result) if np.asarray(x).dtype.kind in "fc"]
    assert all(np.isfinite(x).all() for x in leaves), f"non-finite result {result!r}"
    return result


BAD_OVERLAPS = st.one_of(st.tuples(*[st.floats(-3.0, 3.0)] * 5), st.tuples(*[BAD_REAL] * 5))


@FUZZ
@given(a=arguments({"o": unit_pair_overlaps(), "lam": st.floats(0.01, 5.0), "gamma": st.floats(0.0, 2.0),
                    "d": st.integers(1, 1000), "L": st.integers(1, 50), "eps": st.floats(0.0, 1.0)},
                   {"o": BAD_OVERLAPS, "lam": BAD_POSITIVE, "gamma": BAD_REAL, "d": BAD_COUNT, "L": BAD_COUNT,
                    "eps": BAD_REAL}))
def test_fuzz_marion_risk(a):
    outcome(marion.population_risk, marion.Overlaps(*a["o"]), a["lam"], a["gamma"], a["d"], a["L"], a["eps"])
    outcome(marion.linear_baseline_risk, a["gamma"], a["L"], a["eps"])


@FUZZ
@given(a=arguments({"o": unit_pair_overlaps(), "d": st.integers(1, 400), "L": st.integers(2, 100),
                    "beta": st.floats(0.01, 5.0), "gamma": st.floats(0.01, 0.99)},
                   {"o": BAD_OVERLAPS, "d": BAD_COUNT, "L": st.sampled_from([1, 2.5]) | BAD_COUNT,
                    "beta": BAD_POSITIVE, "gamma": st.sampled_from([0.0, 1.0, 1.5]) | BAD_REAL}))
def test_fuzz_dohmatob_mean_field(a):
    outcome(dohmatob.rem_constants, a["d"], a["L"], a["beta"])
    model = outcome(dohmatob.DohmatobModel, d=a["d"], L=a["L"], beta=a["beta"], gamma=a["gamma"])
    if model is not None:
        o = marion.Overlaps(*a["o"]).to_dohmatob()
        outcome(dohmatob.corollary1_risk, o, model)
        outcome(dohmatob.mean_field_risk, o, model)


LENGTHS = st.one_of(st.integers(1, 5), st.lists(st.integers(1, 5), min_size=1, max_size=3))
BAD_LENGTHS = st.one_of(BAD_COUNT, st.lists(st.sampled_from([0, 2.5, True]), min_size=1, max_size=2), st.just([]))


@FUZZ
@given(a=arguments({"model": st.sampled_from(["spiked", "max"]), "nu": st.floats(0.0, 20.0), "L": LENGTHS,
                    "noise": st.floats(0.0, 2.0)},
                   {"model": st.sampled_from(["other", "", None]), "nu": st.sampled_from([-1.0, *JUNK]),
                    "L": BAD_LENGTHS, "noise": BAD_REAL}))
def test_fuzz_duranthon_population(a):
    outcome(duranthon.length_law, a["L"])
    short = isinstance(a["L"], int) and a["L"] <= 2
    if short:  # quadrature for L <= 2 only
        outcome(duranthon.bayes_risk_quad, a["model"], a["nu"], a["L"], a["noise"])
    if a["model"] != "max" or short:  # max-SLR at L >= 3 needs a Monte Carlo (and a key)
        outcome(duranthon.linear_risk, a["model"], a["nu"], a["L"], a["noise"])


@FUZZ
@given(a=arguments({"h": st.floats(-5.0, 5.0), "a": st.floats(0.0, 1.0), "t": st.floats(-5.0, 5.0),
                    "sigma": st.floats(0.0, 5.0), "o": unit_pair_overlaps()},
                   {"h": st.sampled_from([math.nan, None, "x"]), "a": st.sampled_from([-0.5, 1.5, *JUNK]),
                    "t": st.sampled_from([math.nan, None]), "sigma": BAD_POSITIVE, "o": BAD_OVERLAPS}))
def test_fuzz_slr(a):
    outcome(slr.owens_t, a["h"], a["a"])
    outcome(slr.zeta, a["t"], a["sigma"])
    outcome(slr.frame_coordinates, slr.Overlaps(*a["o"]))


@FUZZ
@given(a=arguments({"K": st.sampled_from([np.eye(4), np.ones((4, 4)), 0.5 * np.eye(4) + 0.5]),
                    "n_tokens": st.sampled_from([1, 2, 4]), "n_heads": st.sampled_from([1, 3]),
                    "n_samples": st.sampled_from([2, 9]), "width": st.sampled_from([1, 3, 20, math.inf])},
                   {"K": st.sampled_from([-np.eye(4), np.eye(3), np.triu(np.ones((4, 4))), np.full((4, 4), np.nan),
                                          np.eye(4)[None], "K"]),
                    "n_tokens": BAD_COUNT | st.just(3), "n_heads": BAD_COUNT, "n_samples": BAD_COUNT,
                    "width": BAD_COUNT}))
def test_fuzz_sakai(a):
    key = jax.random.key(0)
    outcome(sakai.attention_kernel, a["K"], key=key, n_tokens=a["n_tokens"], n_points=4, n_replicates=2)
    outcome(sakai.limit_moments, min(a["n_tokens"], 4) if isinstance(a["n_tokens"], int) else a["n_tokens"], "clip",
            a["n_heads"], n_nodes=4)
    outcome(sakai.sample_first_token, key, n=a["width"], n_heads=a["n_heads"], n_tokens=2, n_samples=a["n_samples"])


@FUZZ
@given(a=arguments({"d": st.sampled_from([2, 3]), "N": st.sampled_from([1, 5]), "beta": st.floats(0.1, 10.0),
                    "dt": st.floats(0.001, 1.0), "v": st.floats(-2.0, 2.0)},
                   {"d": BAD_COUNT | st.just(1), "N": st.just(0), "beta": BAD_POSITIVE, "dt": BAD_POSITIVE,
                    "v": BAD_REAL, "shape": st.sampled_from([(3,), (2, 6, 3), (6, 5)])}))
def test_fuzz_bruno(a):
    d = a["d"]
    V = np.diag(np.full(d, a["v"])) if isinstance(d, int) and d >= 1 and isinstance(a["v"], float) else a["v"]
    model = outcome(bruno.make_model, d, V=V, beta=a["beta"])
    x = np.ones(a.get("shape", (a["N"], d if isinstance(d, int) and d >= 1 else 3)))
    x = x / math.sqrt(x.shape[-1])
    if model is not None:
        outcome(bruno.step, x, model, a["dt"])
    outcome(bruno.order_parameter, x, a["beta"])


SHAPES = st.sampled_from([(3,), (4,), (5, 4), (2, 5, 4), (0, 4), (4, 0), (), (5, 3)])


def array(shape, fill=1.0):
    return np.full(shape, fill) / math.sqrt(max(shape[-1], 1)) if shape else np.float64(fill)


@FUZZ
@given(X=SHAPES, k=SHAPES, v=SHAPES, scale=st.one_of(st.floats(0.01, 5.0), BAD_POSITIVE), fill=st.sampled_from(
    [1.0, 0.0, math.nan, math.inf]))
def test_fuzz_token_shapes(X, k, v, scale, fill):
    x = array(X, fill)
    outcome(marion.erf_attention, x, array(k), array(v), scale)
    outcome(dohmatob.softmax_attention, x, array(k), array(v), scale)
    outcome(slr.overlaps, array(k), array(v), array(X), array(X))
    outcome(bruno.normalize, x)
    outcome(bruno.attention, x, np.eye(4), np.eye(4), np.eye(4), scale)
    outcome(sakai.ks_w1, x, array(k))


@FUZZ
@given(a=arguments({"model": st.sampled_from(["spiked", "max"]), "nu": st.floats(0.0, 9.0),
                    "L": st.sampled_from([3, [1, 3]]), "n": st.just(4), "noise": st.floats(0.0, 1.0)},
                   {"nu": st.sampled_from([-1.0, *JUNK]), "L": BAD_LENGTHS, "n": BAD_COUNT, "noise": BAD_REAL}))
def test_fuzz_duranthon_samplers(a):
    key = jax.random.key(0)  # few shapes: each (n, L_max) is a compilation
    outcome(duranthon.sample_scores, key, a["model"], a["nu"], a["L"], a["n"], a["noise"])
    outcome(duranthon.frozen_samples, key, a["model"], a["nu"], a["L"], a["n"], a["noise"])


PRESETS = {name: p for name, p in all_presets().items() if p.paper in PAPERS}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_config_field_is_described(name):
    fields = PRESETS[name].config_cls.model_fields
    assert not [f for f, info in fields.items() if not (info.description or "").strip()], name


@pytest.mark.parametrize("name", sorted(n for n, p in PRESETS.items() if p.unused))
def test_fields_a_preset_does_not_read_are_refused(name):
    config = resolve_config(name, quick=True)
    for field in sorted(PRESETS[name].unused):
        with pytest.raises(AttnlabError, match=f"^{name} does not use the config field '{field}'"):
            resolve_config(name, quick=True, overrides={field: getattr(config, field)})
