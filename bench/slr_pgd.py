"""Benchmark: the five full Marion presets against a reference PGD written the plain way.

The reference runs one repeat at a time, a Python loop over steps calling a jitted full-vector PGD step whose
zeta is an adaptive quadrature (scipy.integrate.quad through ``jax.pure_callback``, with the closed-form
t-derivative as its JVP, as in the official code once its swapped primal is fixed), and logs the risk through the
same quadrature. It runs a slice of the schedule config; the throughput ratio compares repeat-steps per second.

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
from attnlab.config import resolve_config
from attnlab.presets import all_presets
from attnlab.slr import risk as closed
from attnlab.slr.data import sample_teacher
from attnlab.slr.dynamics import init_sphere, lambda_at, overlaps


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


def reference_pgd(k, v, ks, vs, lam0, schedule, alpha, gamma, d, L, n_steps, log_every):
    @jax.jit
    def step(k, v, lam):
        R = lambda k, v: reference_risk_R(overlaps(k, v, ks, vs), lam, gamma, d, L)
        gk, gv = jax.grad(R, argnums=(0, 1))(k, v)
        k = k - alpha * (gk - (k @ gk) * k)
        v = v - alpha * (gv - (v @ gv) * v)
        return k / jnp.linalg.norm(k), v / jnp.linalg.norm(v)

    log = []
    for t in range(n_steps):
        lam = float(lambda_at(t, lam0, schedule))
        if t % log_every == 0:
            o = overlaps(k, v, ks, vs)
            log.append(float(reference_risk_R(o, lam, gamma, d, L)) + (L - 1) * _zeta_quad_np(0.0, lam))
        k, v = step(k, v, lam)
    jax.block_until_ready(k)
    return k, v, log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference-steps", type=int, default=1500)
    ap.add_argument("--reference-repeats", type=int, default=2)
    args = ap.parse_args()

    presets = all_presets()
    per_preset, repeat_steps = {}, 0
    for name, p in presets.items():
        if p.paper != "marion":
            continue
        cfg = resolve_config(p.config_cls, p.defaults, {})
        t0 = time.perf_counter()
        ds = p.run(cfg, jax.random.key(0))
        metrics, checks = p.summarize(ds, cfg)
        per_preset[name] = time.perf_counter() - t0
        repeat_steps += cfg.n_repeats * cfg.n_steps
        print(f"{name:30s} {per_preset[name]:7.1f} s  checks passed: {all(c.passed for c in checks)}  "
              f"final |kappa| median {metrics['final_abs_kappa_median']:.4f}", flush=True)
    total = sum(per_preset.values())
    ours = repeat_steps / total

    cfg = resolve_config(presets["marion-sphere-schedule"].config_cls, presets["marion-sphere-schedule"].defaults, {})
    t0 = time.perf_counter()
    for r in range(args.reference_repeats):
        kt, ki = jax.random.split(jax.random.fold_in(jax.random.key(0), r))
        ks, vs = sample_teacher(kt, cfg.d)
        k, v = init_sphere(ki, cfg.d)
        reference_pgd(k, v, ks, vs, cfg.lambda0, cfg.lambda_schedule, cfg.step_size, cfg.gamma, cfg.d, cfg.L,
                      args.reference_steps, cfg.log_every)
    ref_time = time.perf_counter() - t0
    ref = args.reference_repeats * args.reference_steps / ref_time
    print(f"reference: {args.reference_repeats} x {args.reference_steps} steps in {ref_time:.1f} s "
          f"({ref:.0f} repeat-steps/s); attnlab full presets: {ours:.0f} repeat-steps/s")
    print(json.dumps({"ratio_vs_reference": ours / ref, "total_full_presets_s": total,
                      "per_preset_s": per_preset, "attnlab_repeat_steps_per_s": ours,
                      "reference_repeat_steps_per_s": ref}))


if __name__ == "__main__":
    main()
