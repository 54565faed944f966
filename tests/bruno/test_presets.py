"""The bruno presets: config validation (bad input gives one-line errors) and a tiny end-to-end run with a GIF."""

import jax
import numpy as np
import pytest

from attnlab.bruno import animate
from attnlab.errors import AttnlabError
from attnlab.registry import all_presets, resolve_config

NAMES = ["bruno-alignment", "bruno-backward-heat", "bruno-forward-heat", "bruno-three-phases"]


def _cfg(name, **overrides):
    p = all_presets()[name]
    return p, resolve_config(p, quick=True, overrides=overrides)


@pytest.mark.parametrize("name", NAMES)
def test_registered_and_quick_config_valid(name):
    p, cfg = _cfg(name)
    assert p.paper == "bruno" and cfg.n_tokens <= 5000


@pytest.mark.parametrize("bad", [{"n_tokens": 0}, {"d": 1}, {"beta": 0.0}, {"beta": -1.0}, {"dt": 0.0},
                                 {"V": [[1.0, 0.0], [0.0, 1.0]]}, {"Q": [[1.0, 0.0, 0.0]]}])
def test_bad_config_rejected(bad):
    with pytest.raises(AttnlabError):
        _cfg("bruno-alignment", **bad)


def test_tiny_runs_end_to_end(key, tmp_path):
    for name, over in [("bruno-backward-heat", {"n_tokens": 500, "t_end": 2.5, "n_snapshots": 4})]:
        p, cfg = _cfg(name, **over)
        ds = p.run(cfg, jax.random.key(1))
        metrics, checks = p.summarize(ds, cfg)
        assert np.isfinite(metrics["final_cluster_count"])
        assert all(c.passed for c in checks), [c.as_dict() for c in checks if not c.passed]
        assert set(p.plot(ds, cfg))
    path = animate(ds, tmp_path / "cloud.gif")
    assert (tmp_path / "cloud.gif").stat().st_size > 1000 and path.endswith(".gif")
    from PIL import Image

    with Image.open(path) as gif:  # one frame per snapshot, at the screen's 100 pixels per inch
        assert gif.n_frames == ds.sizes["time"] and gif.size == (480, 420)


def test_adaptive_integrator_option():
    """integrator=bs32 runs the SA ODE with adaptive steps: same snapshots, far fewer steps than the Euler schedule
    on the log-spaced horizon of Fig. 4, and the energy stays monotone (Q^T K = V = S, a Lyapunov functional)."""
    p, cfg = _cfg("bruno-three-phases", n_tokens=200, t_end=20.0, n_snapshots=8)
    _, cfg_ad = _cfg("bruno-three-phases", n_tokens=200, t_end=20.0, n_snapshots=8, integrator="bs32", dt_max=5.0)
    ds_eu, ds_ad = p.run(cfg, jax.random.key(2)), p.run(cfg_ad, jax.random.key(2))
    np.testing.assert_allclose(ds_ad.time.values, ds_eu.time.values)
    assert ds_ad.steps.values[-1] * 3 < ds_eu.steps.values[-1]  # 3 field evaluations per adaptive step
    metrics, checks = p.summarize(ds_ad, cfg_ad)
    assert metrics["energy_monotone_fraction"] == 1.0
    with pytest.raises(AttnlabError):
        _cfg("bruno-three-phases", integrator="rk45")


def test_alignment_check_rejects_frozen_tokens_and_half_the_time(quick_run):
    """The quick alignment check's tolerance is below the error of tokens that never move and of the closed form
    at half the time, so either mistake fails the check (a tolerance of 0.257 rad used to accept both)."""
    r = quick_run("bruno-alignment")  # the session's shared quick run
    for c, row in zip(r.checks, ("a", "b")):
        assert c.passed
        assert c.tolerance < r.metrics[f"alignment_error_half_time_row_{row}"]
        assert c.tolerance < r.metrics[f"alignment_error_frozen_row_{row}"]


@pytest.mark.parametrize("name, over", [("bruno-alignment", {"n_tokens": 300}),
                                        ("bruno-three-phases", {"n_tokens": 200, "t_end": 20.0, "n_snapshots": 8})])
def test_data_and_figure_conventions(name, over):
    """Every dimension has a coordinate with units and long_name, the attributes are JSON values (the value matrices
    as nested lists, the merges as records), and the figures label every panel, the 3-D ones with a colour bar."""

    from conventions import preset_problems

    p, cfg = _cfg(name, **over)
    ds = p.run(cfg, jax.random.key(3))
    assert isinstance(ds.attrs["V_rows"], list) and isinstance(ds.attrs["merges"], list)
    assert all(set(m) == {"time", "clusters_before", "clusters_after"} for m in ds.attrs["merges"])
    problems = preset_problems(p, ds, cfg)
    assert not problems, problems


@pytest.mark.parametrize("overrides, match", [
    ({"V": [[1e308, 0, 0], [0, 1, 0], [0, 0, 1]]}, "^invalid value for 'V': t_end \\|V\\| must be <= 709"),
    ({"V_b": [[1e300, 0, 0], [0, 1, 0], [0, 0, 1]]}, "^invalid value for 'V_b': t_end \\|V_b\\| must be <= 709"),
    ({"beta": 1e308}, "^invalid value for 'beta': beta \\|Q\\^T K\\| must be <= 354"),
    ({"Q": [[1e200, 0, 0], [0, 1, 0], [0, 0, 1]], "K": [[1e200, 0, 0], [0, 1, 0], [0, 0, 1]]}, "beta \\|Q\\^T K\\|"),
])
def test_magnitudes_that_overflow_are_refused_in_one_line_without_warnings(overrides, match):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning on the way to the refusal
        with pytest.raises(AttnlabError, match=match):
            resolve_config("bruno-alignment", quick=True, overrides=overrides)


@pytest.mark.parametrize("d", [2, 3])
def test_each_gif_frame_draws_its_own_snapshot(d, tmp_path):
    """The frames are drawn on one background (blitting): each shows its own snapshot's points and time, so frames
    of different snapshots differ, and two snapshots with the same points and time give the same frame."""
    import xarray as xr
    from PIL import Image

    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 200, d))
    x[2] = x[0]
    x /= np.linalg.norm(x, axis=-1, keepdims=True)
    x[1] = np.roll(x[1], 1, axis=-1)
    ds = xr.Dataset({"x": (("time", "token", "dim"), x)}, coords={"time": [0.0, 1.0, 0.0]})
    with Image.open(animate(ds, tmp_path / "cloud.gif")) as gif:
        frames = []
        for k in range(gif.n_frames):
            gif.seek(k)
            frames.append(np.asarray(gif.convert("RGB")).astype(int))
    assert len(frames) == 3
    assert np.abs(frames[0] - frames[1]).sum(axis=-1).astype(bool).sum() > 100
    assert np.array_equal(frames[0], frames[2])
