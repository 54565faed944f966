"""The ``implementation`` field of ``dohmatob-rgd``: one recorded code path per run (C kernel or JAX)."""

import jax
import pytest

from attnlab.dohmatob import rgd, rgd_native
from attnlab.errors import AttnlabError
from attnlab.registry import get_preset, resolve_config

PRESET = "dohmatob-rgd"
SMALL = {"n_repeats": 2, "n_steps": 4, "log_every": 2, "n_train": 16, "n_test": 100, "n_test_rd": 100,
         "n_mc_check": 100, "d_check": 20, "d": 12, "L": 4}


def _recorded(**overrides):
    cfg = resolve_config(PRESET, quick=True, overrides=overrides)
    return cfg, get_preset(PRESET).implementations(cfg)


@pytest.fixture
def kernel(monkeypatch):
    """Pretend the C kernel is available (``True``) or not (``False``) without touching the compiler."""

    def set_available(flag: bool):
        monkeypatch.setattr(rgd_native, "available", lambda: flag)
        monkeypatch.setattr(rgd_native, "unavailable_reason", lambda: None if flag else "no C compiler found (test)")
        monkeypatch.delenv("ATTNLAB_NATIVE", raising=False)

    return set_available


def test_default_is_auto_and_old_field_names_are_gone():
    cfg = resolve_config(PRESET, quick=True)
    assert cfg.implementation == "auto"
    for old in ("method", "backend"):
        with pytest.raises(AttnlabError):
            resolve_config(PRESET, quick=True, overrides={old: "jax"})
    with pytest.raises(AttnlabError, match="implementation"):
        resolve_config(PRESET, quick=True, overrides={"implementation": "xla"})


def test_forced_jax_is_jax_whatever_the_kernel(kernel):
    kernel(True)
    assert _recorded(implementation="jax")[1] == {"rgd": "jax"}


def test_forced_native_with_the_kernel_and_without(kernel):
    kernel(True)
    if jax.default_backend() == "cpu":
        assert _recorded(implementation="native")[1] == {"rgd": "native", "rgd_lanes": str(rgd_native.lanes())}
    kernel(False)
    reason = "no C compiler found" if jax.default_backend() == "cpu" else "it runs on the CPU backend only"
    with pytest.raises(AttnlabError, match=f"implementation='native' cannot run: {reason}") as err:
        _recorded(implementation="native")
    assert "\n" not in str(err.value)
    with pytest.raises(AttnlabError, match="float32 tokens"):  # not applicable: float64 tokens
        kernel(True)
        _recorded(implementation="native", token_dtype="float64")


def test_auto_resolves_by_availability_and_ATTNLAB_NATIVE(kernel, monkeypatch):
    kernel(True)
    on_cpu = jax.default_backend() == "cpu"
    assert _recorded()[1]["rgd"] == ("native" if on_cpu else "jax")
    assert _recorded(token_dtype="float64")[1] == {"rgd": "jax"}
    monkeypatch.undo()  # the real kernel: ATTNLAB_NATIVE=0 turns it off at the next call
    monkeypatch.setenv("ATTNLAB_NATIVE", "0")
    assert not rgd_native.available() and _recorded()[1] == {"rgd": "jax"}
    monkeypatch.delenv("ATTNLAB_NATIVE")
    kernel(False)
    assert _recorded()[1] == {"rgd": "jax"}


def test_the_run_uses_exactly_the_recorded_choice(kernel, monkeypatch):
    """The preset passes its resolved implementation to run_rgd; with the kernel 'unavailable' auto runs JAX and never
    calls the kernel."""
    kernel(False)
    seen = []
    real = rgd.run_rgd

    def spy(*args, **kwargs):
        seen.append(kwargs["implementation"])
        return real(*args, **kwargs)

    import attnlab.dohmatob.rgd_preset as rp

    monkeypatch.setattr(rp, "run_rgd", spy)
    monkeypatch.setattr(rgd_native, "run", lambda *a, **k: pytest.fail("the C kernel ran"))
    cfg, impl = _recorded(**SMALL)
    get_preset(PRESET).run(cfg, jax.random.key(0))
    assert seen == [impl["rgd"]] == ["jax"]
