"""Benchmark: the five full Marion presets against the official code's computation at least at its speed.

The reference does the official code's computation at least at its speed (written independently: the
d-dimensional PGD on the closed-form risk as one compiled ``lax.scan`` over steps in float32, zeta by a fixed
64-point Gauss-Legendre quadrature, the risk logged every ``log_every`` steps; the official code runs a Python loop
over a jitted step with zeta by adaptive quadrature, which is slower). Two comparisons:

* throughput (``ratio_vs_reference``): repeat-steps per second of PGD on the ``marion-sphere-schedule``
  configuration, ours the preset's own PGD call (compilation or cache load included), timed apart from its risk
  evaluations and checks, the reference compiled and warmed up (the median of 3 timings of 5 repeats);
* the whole ``marion-manifold`` configuration through the reference, compilation included, against the whole preset
  (``manifold_preset_over_official_speed_reference``, the gain a user sees) and against the preset's own PGD of all
  repeats (``manifold_pgd_over_official_speed_reference``). ``manifold_profile_s`` says where the preset's time goes
  (:func:`manifold_profile`): the PGD, the cross-check, the Monte Carlo checks, the rest, the tracing and
  compilation of a first run in the process, the figures.

``total_full_presets_s`` is the wall time of the five full presets, everything included. Last line: one JSON object
with these figures.

    .venv/bin/python bench/slr_pgd.py
"""

from __future__ import annotations

import argparse
import json
import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

import attnlab  # noqa: F401
from attnlab import runtime
from attnlab.marion import risk as closed
from attnlab.marion.dynamics import SCHEDULE_RATE
from attnlab.registry import all_presets, resolve_config
from attnlab.slr.data import init_sphere, sample_teacher
from attnlab.slr.overlaps import overlaps

runtime.configure()  # this script is its own process: attnlab's XLA flags and compile cache,
jax.config.update("jax_enable_x64", True)  # and float64 throughout, as the presets run (attnlab.api does it per run)


# Gauss-Legendre nodes and weights on [-1, 1] for the fixed quadrature of the official-speed reference
_GL_X, _GL_W = np.polynomial.legendre.leggauss(64)


def zeta_fixed(t, s):
    """zeta(t, s) = 1 + int_{-c}^t zeta'(u, s) du by 64-point Gauss-Legendre on [-c, t], c = 8 sqrt(1 + 2 s^2) (the
    integrand is below e^-64 beyond), in the dtype of ``t``: a fixed quadrature, differentiable in t by JAX."""
    dtype = jnp.result_type(t)
    x, w = jnp.asarray(_GL_X, dtype), jnp.asarray(_GL_W, dtype)
    a2 = 1 + 2 * s * s
    c = 8 * jnp.sqrt(a2)
    u = (t + c) / 2 * x + (t - c) / 2
    der = (2 / jnp.sqrt(a2) * jax.scipy.special.erf(u / jnp.sqrt((1 + 4 * s * s) * a2))
           * 2 / jnp.sqrt(jnp.pi) * jnp.exp(-u * u / a2))
    return 1 + (t + c) / 2 * jnp.sum(w * der)


def official_speed_pgd(k, v, ks, vs, lam0, schedule, step_size, gamma, d, L, n_steps, log_every):
    """One repeat of the official code's computation at its speed, written independently: the d-dimensional PGD
    on the closed-form risk as one compiled ``lax.scan`` over steps in float32, zeta by the fixed quadrature
    :func:`zeta_fixed`, the risk logged every ``log_every`` steps."""
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    return _official_scan(f32(k), f32(v), f32(ks), f32(vs), f32(lam0), bool(schedule), f32(step_size), gamma, d, L,
                          n_steps // log_every, log_every)


def _risk_fixed(o, lam, gamma, d, L):
    saved = closed.zeta
    closed.zeta = zeta_fixed
    try:
        return closed.risk_R(o, lam, gamma, d, L)
    finally:
        closed.zeta = saved


@partial(jax.jit, static_argnames=("schedule", "gamma", "d", "L", "n_logs", "log_every"))
def _official_scan(k, v, ks, vs, lam0, schedule, step_size, gamma, d, L, n_logs, log_every):
    def step(kv, t):
        k, v = kv
        lam = lam0 / (1 + SCHEDULE_RATE * t) if schedule else lam0
        gk, gv = jax.grad(lambda k, v: _risk_fixed(overlaps(k, v, ks, vs), lam, gamma, d, L), argnums=(0, 1))(k, v)
        k = k - step_size * (gk - (k @ gk) * k)
        v = v - step_size * (gv - (v @ gv) * v)
        return (k / jnp.linalg.norm(k), v / jnp.linalg.norm(v)), None

    def segment(kv, t0):
        lam = lam0 / (1 + SCHEDULE_RATE * t0) if schedule else lam0
        risk = _risk_fixed(overlaps(*kv, ks, vs), lam, gamma, d, L)
        kv, _ = jax.lax.scan(step, kv, t0 + jnp.arange(log_every, dtype=jnp.float32))
        return kv, risk

    (k, v), risks = jax.lax.scan(segment, (k, v), jnp.arange(n_logs, dtype=jnp.float32) * log_every)
    return k, v, risks


FIVE = ("marion-manifold", "marion-sphere-small-lambda", "marion-sphere-large-lambda", "marion-sphere-schedule",
        "marion-sgd")
"""The five official configurations (the paper's other presets, App. E.3 and Sec. 2, are not PGD on the SLR risk)."""


PROFILED = {"pgd": ("run_pgd_reduced",), "cross_check_full_vector_pgd": ("run_pgd_full",),
            "monte_carlo_checks": ("mc_excess_risk_to_se", "mc_excess_risk_given_scores_to_se", "mc_bayes_risk_in_frame")}
"""The parts of a Marion PGD preset's run timed apart (module-level functions of attnlab.marion.presets)."""


def manifold_profile(preset, module, first_run_s: float) -> dict:
    """Where a marion-manifold run goes, run once more in this process, all compiled: the paper's computation (the
    PGD of all repeats), the cross-check (full-vector PGD of one repeat), the Monte Carlo checks, the rest (risk
    evaluations, dataset); the tracing and compilation (or cache loads) of the process's first run (``first_run_s``)
    on top of it; then the figures (drawn and saved as PNG + PDF)."""
    import tempfile
    from pathlib import Path

    from attnlab.plot import save_figure

    cfg = resolve_config(preset, overrides={})
    spent: dict[str, float] = {}
    originals = {name: getattr(module, name) for names in PROFILED.values() for name in names}

    def timer(part, fn):
        def call(*a, **k):
            t = time.perf_counter()
            out = jax.block_until_ready(fn(*a, **k))
            spent[part] = spent.get(part, 0.0) + time.perf_counter() - t
            return out
        return call

    for part, names in PROFILED.items():
        for name in names:
            setattr(module, name, timer(part, originals[name]))
    try:
        t0 = time.perf_counter()
        ds = preset.run(cfg, jax.random.key(0))
        preset.summarize(ds, cfg)
        wall = time.perf_counter() - t0
    finally:
        for name, fn in originals.items():
            setattr(module, name, fn)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name, fig in preset.plot(ds, cfg).items():
            save_figure(fig, Path(tmp), name)
    figures = time.perf_counter() - t0
    out = {f"{part}_s": spent.get(part, 0.0) for part in PROFILED}
    out["other_s"] = wall - sum(out.values())
    out["compiled_run_s"] = wall
    out["tracing_and_compilation_s"] = first_run_s - wall
    out["figures_s"] = figures
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.parse_args()

    presets = all_presets()
    import attnlab.marion.presets as marion

    pgd_s, orig = [], marion.run_pgd_reduced

    def timed(*a, **k):  # the schedule preset's own PGD, timed apart from its risk evaluations and checks
        t = time.perf_counter()
        out = jax.block_until_ready(orig(*a, **k))
        pgd_s.append(time.perf_counter() - t)
        return out

    per_preset = {}
    for name in FIVE:
        p = presets[name]
        cfg = resolve_config(p, overrides={})
        marion.run_pgd_reduced = timed if name == "marion-sphere-schedule" else orig
        t0 = time.perf_counter()
        ds = p.run(cfg, jax.random.key(0))
        metrics, checks = p.summarize(ds, cfg)
        per_preset[name] = time.perf_counter() - t0
        print(f"{name:30s} {per_preset[name]:7.1f} s  checks passed: {all(c.passed for c in checks)}  "
              f"final |kappa| median {metrics['final_abs_kappa_median']:.4f}", flush=True)
    marion.run_pgd_reduced = orig
    total = sum(per_preset.values())

    profile = manifold_profile(presets["marion-manifold"], marion, per_preset["marion-manifold"])
    print("marion-manifold, where the time goes: " + ", ".join(f"{k} {v:.2f} s" for k, v in profile.items()), flush=True)

    cfg = resolve_config("marion-sphere-schedule")
    ours = cfg.n_repeats * cfg.n_steps / pgd_s[0]  # compile (or cache load) included

    ref_repeats = min(5, cfg.n_repeats)  # repeat-steps per second: a few repeats tell, one after the other

    def reference_run():
        for r in range(ref_repeats):
            kt, ki = jax.random.split(jax.random.fold_in(jax.random.key(0), r))
            ks, vs = sample_teacher(kt, cfg.d)
            k, v = init_sphere(ki, cfg.d)
            jax.block_until_ready(official_speed_pgd(k, v, ks, vs, cfg.lambda0, cfg.lambda_schedule, cfg.step_size,
                                                     cfg.gamma, cfg.d, cfg.L, cfg.n_steps, cfg.log_every))

    # the reference's zeta against attnlab's (Owen's T), where the PGD evaluates it
    ts, ss = np.linspace(-6.0, 6.0, 25), (0.05, 0.5, 2.0, 10.0)
    zeta_gap = max(abs(float(zeta_fixed(jnp.float64(t), s)) - float(closed.zeta(t, s))) for t in ts for s in ss)
    print(f"reference zeta (64-point Gauss-Legendre) against attnlab's: largest gap {zeta_gap:.1e}")
    reference_run()  # warm-up: compile the scan
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        reference_run()
        times.append(time.perf_counter() - t0)
    ref_time = float(np.median(times))
    ref = ref_repeats * cfg.n_steps / ref_time
    print(f"official-speed reference: {ref_repeats} x {cfg.n_steps} steps in {ref_time:.2f} s (median of 3; "
          f"{ref:.0f} repeat-steps/s); attnlab marion-sphere-schedule PGD: {cfg.n_repeats} x {cfg.n_steps} steps "
          f"in {pgd_s[0]:.2f} s ({ours:.0f} repeat-steps/s)")
    # the whole marion-manifold configuration at the official code's speed or better (one compiled scan per repeat,
    # float32, fixed quadrature; compilation included, as the preset's time includes its own)
    mcfg = resolve_config("marion-manifold")
    t0 = time.perf_counter()
    for r in range(mcfg.n_repeats):
        kt, ki = jax.random.split(jax.random.fold_in(jax.random.key(0), r))
        ks, vs = sample_teacher(kt, mcfg.d)
        k, v = init_sphere(ki, mcfg.d)
        jax.block_until_ready(official_speed_pgd(k, v, ks, vs, mcfg.lambda0, mcfg.lambda_schedule, mcfg.step_size,
                                                 mcfg.gamma, mcfg.d, mcfg.L, mcfg.n_steps, mcfg.log_every))
    official_s = time.perf_counter() - t0
    print(f"official-speed reference, whole marion-manifold configuration ({mcfg.n_repeats} x {mcfg.n_steps} steps): "
          f"{official_s:.1f} s; the preset, everything included: {per_preset['marion-manifold']:.1f} s")
    print(json.dumps({"ratio_vs_reference": ours / ref, "total_full_presets_s": total,
                      "official_speed_reference_manifold_s": official_s,
                      "manifold_preset_over_official_speed_reference":
                          official_s / per_preset["marion-manifold"],
                      "manifold_pgd_over_official_speed_reference": official_s / profile["pgd_s"],
                      "manifold_profile_s": profile,
                      "per_preset_s": per_preset, "attnlab_repeat_steps_per_s": ours,
                      "reference_repeat_steps_per_s": ref, "reference_times_s": times,
                      "reference_zeta_largest_gap": zeta_gap}))


if __name__ == "__main__":
    main()
