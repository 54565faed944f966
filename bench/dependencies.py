"""Benchmark: each hand-written piece that a dependency also provides, against that dependency, on a preset's wall time.

The project's rule: where hand-written code does what a dependency already does, use the dependency unless this
benchmark shows it at least 2x slower on a preset's wall time. For each piece, in this one process (float64, attnlab's
runtime configured), after one warm-up run of the preset (compilation excluded):

* ``preset_as_is_s``: the preset's wall time as it runs today (``attnlab.run(...).elapsed_s``);
* ``piece_s``: the time the hand-written piece takes inside that run (its calls wrapped with a timer, their inputs
  recorded), or, for the random draws, an estimate (draw counts times the per-draw cost, stated per row);
* ``dependency_s``: the dependency on exactly those inputs (or drawing exactly that many numbers);
* ``preset_with_dependency_s``: measured by swapping the dependency into the preset where that is easy (the adaptive
  integrator, the JAX draws), else ``preset_as_is_s - piece_s + dependency_s``; ``ratio`` is
  ``preset_with_dependency_s / preset_as_is_s`` and the verdict ``keep`` when it is 2 or more, else ``switch``;
* ``agreement``: the dependency's numbers against the piece's, with the tolerance stated (KS identical up to one
  rounding of k/n - m/n, W1 and the KDE to 1e-10 relative, bootstrap intervals statistically equivalent, diffrax
  snapshots within the sum of the accepted local error bounds).

Pieces (rows): ``kde``, ``ks_w1``, ``bootstrap`` (:mod:`attnlab.sakai.distances` and their C versions in
:mod:`attnlab.sakai.native`, which the Sakai presets run on CPU) on ``sakai-vary-width`` at paper size; ``bs32``
(:func:`attnlab.bruno.integrate.simulate_adaptive`) on ``bruno-three-phases`` with ``integrator="bs32"`` at its quick
size (N = 800: the paper size, N = 1e4 to t = 100, takes many minutes here); ``draws_native`` (the ziggurat normals and
Marsaglia-Tsang chi-squares of ``_sampler_native.c``) on ``sakai-vary-heads`` at paper size, against
``numpy.random.Generator`` in two threads (NumPy's documented multithreaded generation; the kernel uses two OpenMP
threads); ``draws_jax`` (:mod:`attnlab._random`) on ``sakai-vary-heads`` at its quick size with
``implementation="jax"`` (the path that uses them: the JAX sampler, as on an accelerator), against ``jax.random``.
Each output line is one JSON object; the last one holds every row.

    .venv/bin/python bench/dependencies.py [--pieces kde,ks_w1,bootstrap,bs32,draws_native,draws_jax]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax

jax.config.update("jax_enable_x64", True)

from attnlab import runtime  # noqa: E402

runtime.configure()  # this script is its own process: attnlab's XLA flags and compile cache

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.stats as st  # noqa: E402

import attnlab  # noqa: E402

PIECES = ("kde", "ks_w1", "bootstrap", "bs32", "draws_native", "draws_jax")


def log(**kw):
    print(json.dumps({"name": "progress", **kw}, default=float), flush=True)


def verdict(ratio: float, preset: str) -> str:
    return (f"keep: dependency {ratio:.1f}x slower on {preset}" if ratio >= 2
            else f"switch: dependency only {ratio:.1f}x slower")


def row(piece, dependency, preset, size, as_is, piece_s, dep_s, with_dep, how, agreement, **extra):
    ratio = with_dep / as_is
    r = {"piece": piece, "dependency": dependency, "preset": preset, "size": size, "preset_as_is_s": as_is,
         "piece_s": piece_s, "dependency_s": dep_s, "dependency_over_piece": dep_s / piece_s if piece_s else None,
         "preset_with_dependency_s": with_dep, "preset_with_dependency_how": how, "ratio": ratio,
         "verdict": verdict(ratio, preset), "agreement": agreement, **extra}
    print(json.dumps({"name": "row", **r}, default=float), flush=True)
    return r


class Recorder:
    """Wraps ``module.name`` with a timer that records each call's inputs and output."""

    def __init__(self, module, name):
        self.module, self.name, self.fn = module, name, getattr(module, name)
        self.calls, self.seconds = [], 0.0

    def __enter__(self):
        def wrapped(*a, **k):
            t0 = time.perf_counter()
            out = self.fn(*a, **k)
            out = jax.block_until_ready(out)
            self.seconds += time.perf_counter() - t0
            self.calls.append((a, k, out))
            return out

        setattr(self.module, self.name, wrapped)
        return self

    def __exit__(self, *exc):
        setattr(self.module, self.name, self.fn)


def timed_run(name, **kw):
    attnlab.run(name, **kw)  # warm-up: compilation excluded from the timed run
    return attnlab.run(name, **kw)


# ---------------------------------------------------------------------------------------------------------- distances
def scipy_kde_rows(rows, grid):
    return np.stack([st.gaussian_kde(r)(grid) for r in np.asarray(rows)])


def scipy_ks_w1_rows(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    out = np.array([(st.ks_2samp(x, y).statistic, st.wasserstein_distance(x, y)) for x, y in zip(a, b)])
    return out.reshape(-1, 2)


def _ks_w1_stat(x, y):
    return np.array([st.ks_2samp(x, y).statistic, st.wasserstein_distance(x, y)])


def scipy_bootstrap(seed, x, y, n_boot):
    """scipy.stats.bootstrap of (KS, W1), percentile method: its replicates (2, n_boot) (multinomial resampling of
    each sample, where the piece gives every point a Poisson(1) weight)."""
    res = st.bootstrap((np.asarray(x), np.asarray(y)), _ks_w1_stat, n_resamples=n_boot, method="percentile",
                       vectorized=False, paired=False, rng=np.random.default_rng(seed))
    return res.bootstrap_distribution


def bench_distances(pieces, size):
    from attnlab.sakai import presets as sp

    name = "sakai-vary-width"
    quick = size == "quick"
    attnlab.run(name, quick=quick)  # warm-up
    with Recorder(sp, "_kde_rows") as kde, Recorder(sp, "_ks_w1_rows") as ks, Recorder(sp, "_bootstrap") as boot:
        res = attnlab.run(name, quick=quick)
    as_is = res.elapsed_s
    log(preset=name, size=size, wall_s=as_is, kde_s=kde.seconds, ks_w1_s=ks.seconds, bootstrap_s=boot.seconds,
        implementations=res.implementations)
    rows = []
    if "kde" in pieces:
        t0 = time.perf_counter()
        deps = [scipy_kde_rows(a[0], a[1]) for a, _, _ in kde.calls]
        dep_s = time.perf_counter() - t0
        rel = 0.0
        for (_a, _, out), d in zip(kde.calls, deps):
            mask = d > 1e-12  # the official floor: below it the density is replaced by 1e-12 + f
            rel = max(rel, float(np.max(np.abs(out[mask] - d[mask]) / d[mask])))
        n_rows = sum(np.asarray(a[0]).shape[0] for a, _, _ in kde.calls)
        rows.append(row("kde", "scipy.stats.gaussian_kde", name, size, as_is, kde.seconds, dep_s,
                        as_is - kde.seconds + dep_s, "estimated: as_is - piece + dependency",
                        {"max_rel_diff_where_density_gt_1e-12": rel, "tolerance": 1e-10, "ok": rel <= 1e-10},
                        calls=len(kde.calls), kde_rows=n_rows, implementation=res.implementations["distances"]))
    if "ks_w1" in pieces:
        t0 = time.perf_counter()
        deps = [scipy_ks_w1_rows(a[0], a[1]) for a, _, _ in ks.calls]
        dep_s = time.perf_counter() - t0
        ks_diff = max(float(np.max(np.abs(out[:, 0] - d[:, 0]))) for (_, _, out), d in zip(ks.calls, deps))
        ks_exact = sum(int(np.sum(out[:, 0] != d[:, 0])) for (_, _, out), d in zip(ks.calls, deps))
        w1_rel = max(float(np.max(np.abs(out[:, 1] - d[:, 1]) / d[:, 1])) for (_, _, out), d in zip(ks.calls, deps))
        n_pairs = sum(len(d) for d in deps)
        rows.append(row("ks_w1", "scipy.stats.ks_2samp + scipy.stats.wasserstein_distance", name, size, as_is,
                        ks.seconds, dep_s, as_is - ks.seconds + dep_s, "estimated: as_is - piece + dependency",
                        {"ks_max_abs_diff": ks_diff, "ks_pairs_not_bit_identical": ks_exact,
                         "ks_tolerance": 1e-15, "w1_max_rel_diff": w1_rel, "w1_tolerance": 1e-10,
                         "ok": ks_diff <= 1e-15 and w1_rel <= 1e-10},
                        pairs=n_pairs, implementation=res.implementations["distances"]))
    if "bootstrap" in pieces:
        t0 = time.perf_counter()
        deps = [scipy_bootstrap(i, a[1], a[2], a[3]) for i, (a, _, _) in enumerate(boot.calls)]
        dep_s = time.perf_counter() - t0
        worst_p, worst_sd = 1.0, 0.0
        for (_, _, out), d in zip(boot.calls, deps):
            for j in range(2):  # KS, W1: the replicate laws (two-sample KS test) and the 95% percentile intervals
                worst_p = min(worst_p, float(st.ks_2samp(out[j], d[j]).pvalue))
                sd = np.std(out[j], ddof=1)
                gap = np.abs(np.percentile(out[j], [2.5, 97.5]) - np.percentile(d[j], [2.5, 97.5])) / sd
                worst_sd = max(worst_sd, float(gap.max()))
        rows.append(row("bootstrap", "scipy.stats.bootstrap (percentile, multinomial resampling)", name, size,
                        as_is, boot.seconds, dep_s, as_is - boot.seconds + dep_s,
                        "estimated: as_is - piece + dependency",
                        {"replicate_laws_min_ks_pvalue": worst_p, "pvalue_threshold": 1e-3,
                         "ci_endpoint_max_gap_in_replicate_sd": worst_sd, "gap_tolerance_sd": 1.5,
                         "ok": worst_p > 1e-3 and worst_sd <= 1.5},
                        calls=len(boot.calls), n_boot=boot.calls[0][0][3],
                        implementation=res.implementations["distances"]))
    return rows


# ---------------------------------------------------------------------------------------------------------- bs32
# The hand-written adaptive Bogacki-Shampine 3(2) stepper that attnlab.bruno.integrate.simulate_adaptive used until
# this benchmark measured diffrax.Bosh3 at 1.0x its preset wall time (it now calls diffrax): kept here, verbatim, as
# the baseline of the bs32 row. k4 at the renormalised point (first same as last), renormalisation every step.
from attnlab.bruno.integrate import adaptive_inputs, drift, normalize  # noqa: E402


def _hw_bs32_segment(x, k1, t, t_end, h, model, tol, dt_max, max_steps):
    """Adaptive Bogacki-Shampine steps from t to t_end (module docstring); returns (x, k1, h, accepted, rejected)."""

    def cond(c):
        t, _, _, _, acc, rej = c
        return (t < t_end) & (acc + rej < max_steps)

    def body(c):
        t, x, k1, h, acc, rej = c
        last = t + h >= t_end * (1 - 1e-12)
        hs = jnp.where(last, t_end - t, h)
        k2 = drift(x + 0.5 * hs * k1, model)
        k3 = drift(x + 0.75 * hs * k2, model)
        y = normalize(x + hs * (2 * k1 + 3 * k2 + 4 * k3) / 9)
        k4 = drift(y, model)
        e = hs * (-5 * k1 / 72 + k2 / 12 + k3 / 9 - k4 / 8)
        err = jnp.max(jnp.linalg.norm(e, axis=-1))
        ok = err <= tol
        fac = jnp.clip(0.9 * (tol / jnp.maximum(err, 1e-300)) ** (1 / 3), 0.2, 5.0)
        h_new = jnp.minimum(hs * fac, dt_max)
        h_new = jnp.where(ok & last, jnp.maximum(h, jnp.minimum(h_new, dt_max)), h_new)  # keep h after a short last step
        return (jnp.where(ok, jnp.where(last, t_end, t + hs), t), jnp.where(ok, y, x), jnp.where(ok, k4, k1), h_new,
                acc + ok, rej + (~ok))

    init = (t, x, k1, h, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    t, x, k1, h, acc, rej = jax.lax.while_loop(cond, body, init)
    return t, x, k1, h, acc, rej


@partial(jax.jit, static_argnames=("static",))
def _hw_adaptive_segment(x, k1, t, t_end, h, Q, K, V, static, tol, dt_max, max_steps):
    m = static._replace(Q=Q, K=K, V=V)
    if x.ndim == 3:
        return jax.vmap(lambda x, k1, t, h: _hw_bs32_segment(x, k1, t, t_end, h, m, tol, dt_max, max_steps))(x, k1, t, h)
    return _hw_bs32_segment(x, k1, t, t_end, h, m, tol, dt_max, max_steps)


@partial(jax.jit, static_argnames=("static",))
def _hw_drift_jit(x, Q, K, V, static):
    return drift(x, static._replace(Q=Q, K=K, V=V))


def handwritten_simulate_adaptive(x0, model, times: Sequence[float], *, tol: float = 1e-6, dt0: float | None = None,
                      dt_max: float = np.inf, max_steps: int = 1_000_000, observe: Callable | None = None,
                      progress: Callable | None = None):
    """Integrate with the adaptive Bogacki-Shampine 3(2) pair (module docstring) to each of ``times``.

    Returns (snapshots, observations, steps) like :func:`simulate`, where ``steps`` (len(times) + 1, or
    (len(times) + 1, R) for a batch) counts accepted steps, plus ``rejected`` (same shape). ``tol`` is the absolute
    local error allowed per step (max over tokens of the Euclidean norm); ``dt0`` the first trial step (default
    0.1 / (beta |V| |K^T Q|), a third of the paper's explicit-Euler budget dt beta = 0.3); ``dt_max`` caps the step.
    Raises RuntimeError if a segment needs more than ``max_steps`` steps.
    """
    times, x, static, mats, dt0 = adaptive_inputs(x0, model, times, tol, dt0, dt_max)
    batch = x.shape[:-2]
    t = jnp.zeros(batch, x.dtype)
    h = jnp.full(batch, min(dt0, dt_max), x.dtype)
    k1 = (jax.vmap(lambda y: _hw_drift_jit(y, *mats, static)) if batch else partial(_hw_drift_jit, Q=mats[0], K=mats[1],
                                                                                   V=mats[2], static=static))(x)
    zero = np.zeros(batch, dtype=int)
    snaps, obs, steps, rejected = [x], [observe(x) if observe else None], [zero], [zero]
    for k, t_end in enumerate(times):
        t, x, k1, h, acc, rej = _hw_adaptive_segment(x, k1, t, jnp.asarray(t_end, x.dtype), h, *mats, static,
                                                  jnp.asarray(tol, x.dtype), jnp.asarray(dt_max, x.dtype),
                                                  jnp.asarray(max_steps, jnp.int32))
        if np.any(np.asarray(t) < t_end):
            raise RuntimeError(f"adaptive integration stalled before t = {t_end} after {max_steps} steps (tol {tol})")
        snaps.append(x)
        obs.append(observe(x) if observe else None)
        steps.append(steps[-1] + np.asarray(acc))
        rejected.append(rejected[-1] + np.asarray(rej))
        if progress is not None:
            progress(k + 1, len(times))
    observations = jax.tree.map(lambda *a: np.stack([np.asarray(v) for v in a]), *obs) if observe else None
    return np.stack([np.asarray(s) for s in snaps]), observations, np.stack(steps), np.stack(rejected)


def bench_bs32(size):
    from attnlab.bruno import integrate
    from attnlab.bruno import presets as bp

    name, kw = "bruno-three-phases", {"quick": size == "quick", "integrator": "bs32"}
    diffrax_simulate_adaptive = integrate.simulate_adaptive  # the dependency, as attnlab runs it now
    bp.simulate_adaptive = handwritten_simulate_adaptive  # the preset as it ran with the hand-written stepper
    try:
        attnlab.run(name, **kw)
        with Recorder(bp, "simulate_adaptive") as rec:
            res = attnlab.run(name, **kw)
    finally:
        bp.simulate_adaptive = diffrax_simulate_adaptive
    as_is = res.elapsed_s
    log(preset=name, size=size, wall_s=as_is, bs32_s=rec.seconds, calls=len(rec.calls))
    # the dependency on the same inputs (one untimed call compiles it), and its agreement with the piece
    dep_s, worst, bound_ratio, dep_steps, own_steps = 0.0, 0.0, 0.0, 0, 0
    for a, k, out in rec.calls:
        k = {**k, "observe": None, "progress": None}
        diffrax_simulate_adaptive(*a, **k)
        t0 = time.perf_counter()
        xs, _, steps, _ = jax.block_until_ready(diffrax_simulate_adaptive(*a, **k))
        dep_s += time.perf_counter() - t0
        gap = float(np.max(np.linalg.norm(xs - out[0], axis=-1)))
        bound = (int(steps[-1]) + int(out[2][-1])) * k["tol"]  # both within n_accepted * tol of the exact flow
        worst, bound_ratio = max(worst, gap), max(bound_ratio, gap / bound)
        dep_steps, own_steps = dep_steps + int(steps[-1]), own_steps + int(out[2][-1])
    # measured: the preset with the dependency (as it runs now), after its own warm-up run
    swapped = timed_run(name, **kw)
    return [row("bs32", "diffrax.Bosh3 + diffrax.PIDController", name, size, as_is, rec.seconds, dep_s,
                swapped.elapsed_s, "measured: the preset with diffrax (as attnlab now runs it) against the preset "
                                   "with the hand-written stepper (this script's copy), same process",
                {"max_token_distance": worst, "tolerance": "(n_accepted_bs32 + n_accepted_diffrax) * tol",
                 "distance_over_tolerance": bound_ratio, "ok": bound_ratio <= 1.0,
                 "swapped_checks_passed": all(c.passed for c in swapped.checks)},
                baseline="preset_as_is_s and piece_s: the hand-written stepper (this script's copy), which the "
                         "preset ran until this measurement; attnlab now runs diffrax",
                accepted_steps_bs32=own_steps, accepted_steps_diffrax=dep_steps,
                preset_estimated_with_dependency_s=as_is - rec.seconds + dep_s)]


# ---------------------------------------------------------------------------------------------------------- draws
def _first_token_counts(args, kw):
    """(scalar normals, scalar chi-squares, 4-lane normals, 4-lane chi-squares) of one native first_token call."""
    m = args[2]
    n, d, H, s, inputs = kw["n"], kw["d"], kw["n_heads"], kw["n_tokens"], kw.get("inputs", "wishart")
    limit = math.isinf(n)
    nz = cz = nz4 = cz4 = 0
    if not limit:
        if inputs == "wishart":
            cz, nz = 1 + s, s * (s - 1) // 2
        else:  # explicit inputs (the ReLU Gram at s = 4 draws 2n half-normals on average, 4-lane)
            cz = 1
            if inputs == "relu" and s == 4:
                nz4 = 2 * n
            else:
                nz = s * n
    if s == 4 and H >= 3 and (limit or d >= 2):
        lanes = 4 * math.ceil(H / 4)
        nz4 += s * lanes
        cz4 += 0 if limit else 2 * lanes
    else:
        nz += s * H
        cz += 0 if limit else 2 * H
    return m * (nz + 1), m * cz, m * nz4, m * cz4


def _numpy_draws(n_normal: int, n_chi2: int, df: float, threads: int = 2, chunk: int = 1 << 20) -> float:
    """Seconds for numpy.random.Generator to draw n_normal standard normals and n_chi2 chi^2_df (as chi^2/df), split
    over ``threads`` generators in threads (NumPy's multithreaded-generation pattern: the draws release the GIL)."""
    gens = [np.random.Generator(np.random.PCG64(s)) for s in np.random.SeedSequence(0).spawn(threads)]

    def work(i):
        g, buf = gens[i], np.empty(chunk)
        left = n_normal // threads + (i < n_normal % threads)
        while left > 0:
            k = min(chunk, left)
            g.standard_normal(out=buf[:k])
            left -= k
        left = n_chi2 // threads + (i < n_chi2 % threads)
        while left > 0:
            k = min(chunk, left)
            np.divide(g.chisquare(df, k), df, out=buf[:k])
            left -= k

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(work, range(threads)))
    return time.perf_counter() - t0


def _rate(fn, n: int) -> float:
    fn(min(n, 1 << 16))
    t0 = time.perf_counter()
    fn(n)
    return (time.perf_counter() - t0) / n


def bench_draws_native(size):
    from attnlab.sakai import native as sn
    from attnlab.sakai import presets as sp

    name = "sakai-vary-heads"
    quick = size == "quick"
    attnlab.run(name, quick=quick)
    with Recorder(sn, "first_token") as ft, Recorder(sn, "brute_first") as bf:
        res = attnlab.run(name, quick=quick)
    assert res.implementations["sampler"] == "native", res.implementations
    as_is = res.elapsed_s
    counts = np.zeros(4, dtype=np.int64)
    for a, k, _ in ft.calls:
        counts += _first_token_counts(a, k)
    brute = sum(a[2] * (k["n_tokens"] * k["n"] ** 2 + 3 * k["n_heads"] * k["n"] * k["d"] + k["n"]
                        + k["n_heads"] * k["d"]) for a, k, _ in bf.calls)
    counts[0] += brute
    cfg = sp.SakaiConfig(**{**attnlab.presets()[name].defaults, **(attnlab.presets()[name].quick if quick else {})})
    df = float(cfg.width[0])  # the heads' chi^2_d/d, d = n: nearly all the chi-squares of the preset
    # the kernel's own per-draw cost (two OpenMP threads, as in the preset). Upper bounds: draws() seeds a fresh
    # xoshiro stream (splitmix64) for each draw (scalar kinds) or each 4 lanes (4-lane kinds); the 4-lane normals
    # from relu_gram, one stream per Gram of 2n half-normals, include the Gram's accumulation.
    n_probe = 1 << 22
    r_nz = _rate(lambda m: sn.draws(1, "normal", m), n_probe)
    r_cz = _rate(lambda m: sn.draws(1, "chi2", m, df), n_probe)
    r_nz4 = _rate(lambda m: sn.relu_gram(1, 1 << 16, max(1, m // (1 << 17))), n_probe)
    r_cz4 = _rate(lambda m: sn.draws(1, "chi2_4", m, df), n_probe)
    own = float(counts @ np.array([r_nz, r_cz, r_nz4, r_cz4]))
    n_normal, n_chi2 = int(counts[0] + counts[2]), int(counts[1] + counts[3])
    log(preset=name, wall_s=as_is, sampler_calls_s=ft.seconds, brute_calls_s=bf.seconds, normals=n_normal,
        chi2=n_chi2, ns_per_draw={"normal": r_nz * 1e9, "chi2": r_cz * 1e9, "normal4": r_nz4 * 1e9,
                                  "chi2_4": r_cz4 * 1e9}, own_draws_s=own)
    dep = _numpy_draws(n_normal, n_chi2, df)
    dep1 = {"normal": _numpy_draws(1 << 24, 0, df, threads=1) / (1 << 24) * 1e9,
            "chi2": _numpy_draws(0, 1 << 22, df, threads=1) / (1 << 22) * 1e9}
    with_dep = as_is - own + dep
    return [row("draws_native", "numpy.random.Generator.standard_normal / .chisquare (PCG64, 2 threads)", name,
                size, as_is, own, dep, with_dep,
                "estimated: as_is - own draws (counts x per-draw cost, an upper bound) + numpy drawing the same counts",
                {"note": "same laws (exact normal and chi-square); numbers differ by generator, as the C and JAX paths"
                         " already do; not a numerical comparison"},
                normals=n_normal, chi_squares=n_chi2, chi2_df=df, sampler_and_brute_calls_s=ft.seconds + bf.seconds,
                numpy_one_thread_ns_per_draw=dep1)]


def bench_draws_jax(size):
    import attnlab._random as ar
    from attnlab.sakai import limit, sampler

    name, kw = "sakai-vary-heads", {"quick": size == "quick", "implementation": "jax"}
    as_is = timed_run(name, **kw)
    log(preset=name, size=size, wall_s=as_is.elapsed_s, implementations=as_is.implementations)
    sites = [(m, n) for m in (ar, sampler, limit) for n in ("normal", "chi2") if hasattr(m, n)]
    orig = {(m, n): getattr(m, n) for m, n in sites}

    def swap(normal, chi2):
        for m, n in sites:
            setattr(m, n, normal if n == "normal" else chi2)
        jax.clear_caches()

    def cheap_normal(key, shape=()):  # a stand-in that draws nothing (not normal): what the run costs without draws
        shape = tuple(shape)
        i = jax.lax.iota(jnp.float64, math.prod(shape)).reshape(shape)
        return (i * 0.6180339887498949) % 1.0 - 0.5 + jax.random.key_data(key).sum() * 0.0

    def cheap_chi2(key, df, shape=()):
        return jnp.broadcast_to(jnp.asarray(df, jnp.float64), shape) * (1.0 + 0.0 * cheap_normal(key, shape))

    try:
        swap(lambda key, shape=(): jax.random.normal(key, tuple(shape), jnp.float64),
             lambda key, df, shape=(): jax.random.chisquare(key, df, tuple(shape), jnp.float64))
        dep = timed_run(name, **kw)
        swap(cheap_normal, cheap_chi2)
        free = timed_run(name, **kw)
    finally:
        for (m, n), f in orig.items():
            setattr(m, n, f)
        jax.clear_caches()
    own, dep_s = as_is.elapsed_s - free.elapsed_s, dep.elapsed_s - free.elapsed_s
    return [row("draws_jax", "jax.random.normal / jax.random.chisquare", name, size, as_is.elapsed_s, own, dep_s,
                dep.elapsed_s, "measured: jax.random swapped into the preset's compiled sampler",
                {"swapped_checks_passed": all(c.passed for c in dep.checks),
                 "as_is_checks_passed": all(c.passed for c in as_is.checks),
                 "note": "same laws; piece_s and dependency_s are the preset's time less a run with a stand-in that "
                         "draws nothing"},
                implementation=as_is.implementations)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pieces", default=",".join(PIECES))
    ap.add_argument("--quick", action="store_true", help="every preset at its quick size")
    args = ap.parse_args()
    pieces = set(args.pieces.split(","))
    env = {"device": str(jax.devices()[0]), "jax": jax.__version__, "machine": platform.node(),
           "cpus": os.cpu_count(), "load_avg_start": os.getloadavg(),
           "note": "2-core machine shared with another engineer: timings indicative"}
    rows = []
    if pieces & {"kde", "ks_w1", "bootstrap"}:
        rows += bench_distances(pieces, "quick" if args.quick else "paper")
    if "bs32" in pieces:
        rows += bench_bs32("quick")
    if "draws_native" in pieces:
        rows += bench_draws_native("quick" if args.quick else "paper")
    if "draws_jax" in pieces:
        rows += bench_draws_jax("quick")
    print(json.dumps({"name": "dependencies", "rows": rows, "load_avg_end": os.getloadavg(), **env}, default=float))


if __name__ == "__main__":
    main()
