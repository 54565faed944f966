"""Benchmark: the five full Marion presets against a reference PGD written the plain way.

The reference runs one repeat at a time, a Python loop over steps calling a jitted full-vector PGD step whose
zeta is an adaptive quadrature (scipy.integrate.quad through ``jax.pure_callback``, with the closed-form
t-derivative as its JVP, as in the official code once its swapped primal is fixed), and logs the risk through the
same quadrature. It runs a slice of the schedule config (compiled once, warmed up, the median of 3 timings); the
throughput ratio compares repeat-steps per second of PGD on that config: ours is the ``marion-sphere-schedule``
preset's own PGD call (compilation or cache load included), timed apart from its risk evaluations and checks.
``total_full_presets_s`` is the wall time of the five full presets, everything included.

Last line: one JSON object with ``ratio_vs_reference`` and ``total_full_presets_s``.

    .venv/bin/python bench/slr_pgd.py [--reference-steps 1500]
"""

from __future__ import annotations

import argparse
import json
import math
import time

import jax
import jax.numpy as jnp
import numpy as np
import scipy.integrate as si
import scipy.special as sp

import attnlab  # noqa: F401
from attnlab.marion import risk as closed
from attnlab.marion.dynamics import SCHEDULE_RATE
from attnlab.registry import all_presets, resolve_config
from attnlab.slr.data import init_sphere, sample_teacher
from attnlab.slr.overlaps import overlaps


def _zeta_quad_np(t, s):
    """zeta(t, s) = 1 + int_{-inf}^t zeta'(u, s) du by adaptive quadrature (the official code's definition)."""
    t, s = float(t), float(s)
    der = lambda u: (2 / math.sqrt(1 + 2 * s * s) * sp.erf(u / math.sqrt((1 + 4 * s * s) * (1 + 2 * s * s)))
                     * 2 / math.sqrt(math.pi) * math.exp(-u * u / (1 + 2 * s * s)))
    return np.float64(1.0 + si.quad(der, -np.inf, t, epsabs=1e-12, epsrel=1e-12, limit=200)[0])


@jax.custom_jvp
def zeta_quad(t, s):
    return jax.pure_callback(_zeta_quad_np, jax.ShapeDtypeStruct((), jnp.float64), t, s)


@zeta_quad.defjvp
def _zeta_quad_jvp(primals, tangents):
    t, s = primals
    dt, _ = tangents  # s = lambda * gamma carries no tangent in PGD
    der = 2 / jnp.sqrt(1 + 2 * s**2) * jax.scipy.special.erf(t / jnp.sqrt((1 + 4 * s**2) * (1 + 2 * s**2))) * (
        2 / jnp.sqrt(jnp.pi) * jnp.exp(-(t**2) / (1 + 2 * s**2)))
    return zeta_quad(t, s), der * dt


def reference_risk_R(o, lam, gamma, d, L):
    """The same closed form with zeta by quadrature."""
    saved = closed.zeta
    closed.zeta = zeta_quad
    try:
        return closed.risk_R(o, lam, gamma, d, L)
    finally:
        closed.zeta = saved


def _ref_step(k, v, ks, vs, lam, step_size, gamma, d, L):
    R = lambda k, v: reference_risk_R(overlaps(k, v, ks, vs), lam, gamma, d, L)  # noqa: E731
    gk, gv = jax.grad(R, argnums=(0, 1))(k, v)
    k = k - step_size * (gk - (k @ gk) * k)
    v = v - step_size * (gv - (v @ gv) * v)
    return k / jnp.linalg.norm(k), v / jnp.linalg.norm(v)


# compiled once per (gamma, d, L); the teacher, lambda and the step size are arguments. (The program holds a
# pure_callback, which JAX's persistent cache never stores: a jit built per call recompiles every time.)
ref_step = jax.jit(_ref_step, static_argnames=("gamma", "d", "L"))
_ref_risk = jax.jit(lambda o, lam, gamma, d, L: reference_risk_R(o, lam, gamma, d, L),
                    static_argnames=("gamma", "d", "L"))


def reference_pgd(k, v, ks, vs, lam0, schedule, step_size, gamma, d, L, n_steps, log_every):
    """One repeat: a Python loop over the jitted step, the risk logged every ``log_every`` steps."""
    log = []
    for t in range(n_steps):
        lam = lam0 / (1.0 + SCHEDULE_RATE * t) if schedule else lam0  # lambda_at, in plain Python
        if t % log_every == 0:
            log.append(float(_ref_risk(overlaps(k, v, ks, vs), lam, gamma, d, L)) + (L - 1) * _zeta_quad_np(0.0, lam))
        k, v = ref_step(k, v, ks, vs, lam, step_size, gamma, d, L)
    jax.block_until_ready(k)
    return k, v, log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference-steps", type=int, default=1500)
    ap.add_argument("--reference-repeats", type=int, default=2)
    args = ap.parse_args()

    presets = all_presets()
    import attnlab.marion.presets as marion

    pgd_s, orig = [], marion.run_pgd_reduced

    def timed(*a, **k):  # the schedule preset's own PGD, timed apart from its risk evaluations and checks
        t = time.perf_counter()
        out = jax.block_until_ready(orig(*a, **k))
        pgd_s.append(time.perf_counter() - t)
        return out

    per_preset = {}
    for name, p in presets.items():
        if p.paper != "marion":
            continue
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

    cfg = resolve_config("marion-sphere-schedule")
    ours = cfg.n_repeats * cfg.n_steps / pgd_s[0]  # compile (or cache load) included

    def reference_run():
        for r in range(args.reference_repeats):
            kt, ki = jax.random.split(jax.random.fold_in(jax.random.key(0), r))
            ks, vs = sample_teacher(kt, cfg.d)
            k, v = init_sphere(ki, cfg.d)
            reference_pgd(k, v, ks, vs, cfg.lambda0, cfg.lambda_schedule, cfg.step_size, cfg.gamma, cfg.d, cfg.L,
                          args.reference_steps, cfg.log_every)

    ks, vs = sample_teacher(jax.random.key(1), cfg.d)  # warm-up: compile the step and the logged risk
    reference_pgd(*init_sphere(jax.random.key(2), cfg.d), ks, vs, cfg.lambda0, cfg.lambda_schedule, cfg.step_size,
                  cfg.gamma, cfg.d, cfg.L, 2, 1)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        reference_run()
        times.append(time.perf_counter() - t0)
    ref_time = float(np.median(times))
    ref = args.reference_repeats * args.reference_steps / ref_time
    print(f"reference: {args.reference_repeats} x {args.reference_steps} steps in {ref_time:.1f} s (median of 3; "
          f"{ref:.0f} repeat-steps/s); attnlab marion-sphere-schedule PGD: {cfg.n_repeats} x {cfg.n_steps} steps in "
          f"{pgd_s[0]:.2f} s ({ours:.0f} repeat-steps/s)")
    print(json.dumps({"ratio_vs_reference": ours / ref, "total_full_presets_s": total,
                      "per_preset_s": per_preset, "attnlab_repeat_steps_per_s": ours,
                      "reference_repeat_steps_per_s": ref, "reference_times_s": times}))


if __name__ == "__main__":
    main()
