"""Presets of Sakai, Karakida, Imaizumi, "Infinite-Width Limit of a Single Attention Layer: Analysis via Tensor
Programs" (NeurIPS 2025, arXiv:2506.00846): Figs. 1a/1b (width), 2a (scores), 2b (heads), 3a/3b (low rank),
5a/5b (ReLU inputs), and a width beyond the paper's.

Every finite-width sample is drawn by the exact width-free sampler (:mod:`attnlab.sakai.sampler`), which has the law
of the paper's finite layer (Algorithm 1); each run also draws the brute-force reference
(:mod:`attnlab.sakai.reference`) at a small width and checks that the two agree (two-sample KS at level 0.001). The
limit law is :mod:`attnlab.sakai.limit`, its constants by Gauss-Hermite quadrature.

Distances, per seed as in the paper and pooled: the official KDE-KL (500-point grid over the global range, 1e-12
floor), KS and W1 with a Poisson-bootstrap interval (seed 0) and across-seed intervals, the Rao-Blackwellised KL of
the two Gaussian scale mixtures and, for each, the null floor: the same distance between two independent limit
samples of the same size. The sampler, the reference statistic and the distances run in C or JAX as the config's
``implementation`` says (:func:`implementations`).
"""

from __future__ import annotations

import math

import jax
import numpy as np
import xarray as xr

from attnlab import native as _build
from attnlab import programs
from attnlab._random import fold_in, jax_normal, split
from attnlab.registry import Preset, deferred, register
from attnlab.sakai import distances as dist
from attnlab.sakai import native as width_native
from attnlab.sakai.configs import SakaiConfig
from attnlab.sakai.limit import limit_moments
from attnlab.sakai.reference import sample_reference_first, sample_reference_scores
from attnlab.sakai.sampler import sample_first_token_sweep, sample_scores_sweep
from attnlab.sakai.summaries import finding, summarize

CITATION = "Sakai, Karakida, Imaizumi, NeurIPS 2025 (arXiv:2506.00846)"




def _moments(y, v):
    """E y^2 (plain and Rao-Blackwellised E v) and excess kurtosis (plain and 3 Var v / E[v]^2), with SEs."""
    y, v = np.asarray(y, np.float64).ravel(), np.asarray(v, np.float64).ravel()
    N = y.size
    m1, m2 = v.mean(), np.mean(v**2)
    k_rb = 3.0 * (m2 / m1**2 - 1.0)
    grad = np.array([-6.0 * m2 / m1**3, 3.0 / m1**2])  # delta method on (E v, E v^2)
    cov = np.cov(np.stack([v, v**2])) / N
    y2 = y**2
    k = np.mean(y2**2) / np.mean(y2) ** 2 - 3.0
    return {"second_moment": y2.mean(), "second_moment_se": y2.std(ddof=1) / math.sqrt(N),
            "second_moment_rb": m1, "second_moment_rb_se": v.std(ddof=1) / math.sqrt(N),
            "excess_kurtosis": k, "excess_kurtosis_se": math.sqrt(24.0 / N),
            "excess_kurtosis_rb": k_rb, "excess_kurtosis_rb_se": float(np.sqrt(grad @ cov @ grad))}


@programs.jit
def _kde_stack(rows, grid):
    return jax.lax.map(lambda x: dist.kde(x, grid), rows)


def implementations(cfg: SakaiConfig) -> dict[str, str]:
    """The implementation of each job of a run with ``cfg`` (``cfg.implementation`` resolved on this machine): the
    exact sampler (``sampler``), the brute-force reference statistic (``reference``) and the distances (official
    KDE, KS/W1 rows and their Poisson bootstrap: ``distances``); the score probe has the sampler only."""
    available = jax.default_backend() == "cpu" and width_native.available()
    small = cfg.n_tokens <= width_native.MAX_TOKENS
    s_max = f"n_tokens <= {width_native.MAX_TOKENS}"
    jobs = {"sampler": _build.choose(cfg.implementation, available and small, s_max, width_native.unavailable_reason())}
    if cfg.experiment != "scores":
        jobs["reference"] = _build.choose(cfg.implementation, available and small and cfg.reference_width <= 100_000,
                                          f"{s_max} and reference_width <= 100000",
                                          width_native.unavailable_reason())
        jobs["distances"] = _build.choose(cfg.implementation, available, "the C kernel", width_native.unavailable_reason())
    return jobs


def _method(impl: str) -> str:
    return "native" if impl == "native" else "jax"


def _bootstrap(key, x, y, n_boot: int, impl: str):
    """Poisson-bootstrap replicates of (KS, W1), (2, n_boot): the C kernel (:func:`attnlab.sakai.native.
    bootstrap_ks_w1`, same law, its own streams) for ``impl == "native"``, else :func:`attnlab.sakai.distances.
    bootstrap_ks_w1`."""
    if impl == "native":
        return np.stack(width_native.bootstrap_ks_w1(width_native.seed_from_key(key), x, y, n_boot))
    return np.asarray(dist.bootstrap_ks_w1(key, np.asarray(x), np.asarray(y), n_boot))


def _kde_rows(rows, grid, impl: str):
    """Official KDE of each row of ``rows`` on ``grid`` (uniform: the C kernel's kernel sums along the grid for
    ``impl == "native"``, :func:`attnlab.sakai.native.kde_rows`; else the direct sums of
    :func:`attnlab.sakai.distances.kde`, which it matches to a relative 1e-12)."""
    if impl == "native":
        return width_native.kde_rows(rows, grid)
    return np.asarray(_kde_stack(np.asarray(rows), np.asarray(grid)))


def _ks_w1_rows(a, b, impl: str):
    """(KS, W1) of each pair of rows, (R, 2): the C merge of the sorted rows for ``impl == "native"``, else the
    pooled argsort of :func:`attnlab.sakai.distances.ks_w1_rows` (the same numbers)."""
    return np.stack((width_native.ks_w1_rows if impl == "native" else dist.ks_w1_rows)(a, b), -1)


PAD_HEADS_BUDGET = 4_000_000  # head draws below which every H of a preset shares one padded program
# head draws above which the exact side of the reference check is drawn apart, with REFERENCE_EXACT_FACTOR *
# n_reference networks instead of n_seeds * n_samples: at H = 256 (vary-heads) the reference row would otherwise cost a
# quarter of the preset, for a KS check whose critical value is set by the 2000 brute-force networks (level 0.001:
# 0.0457 with 20,000 exact draws against 0.0437 with 500,000); below it, one more compiled program costs more.
SEPARATE_REFERENCE_HEADS = 20_000_000
REFERENCE_EXACT_FACTOR = 10
# brute-force weights (normals) below which every H of a preset shares one reference program, max(H) heads drawn per
# network: above it a separate compilation per H costs less than drawing the padded heads (in vary-heads, H = 1
# inside the shared program would draw 256 heads per network)
REFERENCE_PAD_NORMALS = 20_000_000


def _draw(key, cfg: SakaiConfig, H: int, widths, head_widths, d_ref, impl: dict, with_reference: bool = True):
    """Exact draws ``(y, v)`` (len(widths) + 3, seeds, samples): the widths, the reference width (left out when
    ``with_reference`` is False), then two independent limit samples (theory and null), all from one compiled program
    (the limit being the width n = inf)."""
    return _draw_heads(key, cfg, {H: (widths, head_widths)}, d_ref, impl, with_reference)[H]


def _draw_heads(key, cfg: SakaiConfig, plan: dict, d_ref, impl: dict, with_reference: bool = True):
    """:func:`_draw` for several H (``plan``: H -> (widths, head_widths)) in one compiled sweep with max(H) heads
    drawn per network and the first H used at each width (same law; the extra heads cost their draws)."""
    S, N, s, act = cfg.n_seeds, cfg.n_samples, cfg.n_tokens, cfg.input_activation
    n_ref = cfg.reference_width
    low_rank = cfg.head_width is not None
    ws, ds, hs, spans = [], [], [], {}
    ref_w, ref_d = ([n_ref], [d_ref if low_rank else n_ref]) if with_reference else ([], [])
    for H, (widths, head_widths) in plan.items():
        w = list(widths) + ref_w + [math.inf, math.inf]
        d = list(head_widths) + ref_d + [math.inf, math.inf]
        spans[H] = (len(ws), len(ws) + len(w))
        ws, ds, hs = ws + w, ds + d, hs + [H] * len(w)
    H_max = max(plan)
    y, v = sample_first_token_sweep(key, widths=ws, head_widths=ds, n_heads=H_max, n_tokens=s, activation=act,
                                    n_samples=N, n_seeds=S, active_heads=None if len(plan) == 1 else hs,
                                    method=_method(impl["sampler"]))
    y, v = np.moveaxis(np.asarray(y), 1, 0), np.moveaxis(np.asarray(v), 1, 0)
    return {H: (y[a:b], v[a:b]) for H, (a, b) in spans.items()}


def _reference_exact(key, cfg: SakaiConfig, H: int, d_ref, impl: dict):
    """The exact side of the reference check drawn apart: ``REFERENCE_EXACT_FACTOR * n_reference`` networks."""
    d = d_ref if cfg.head_width is not None else cfg.reference_width
    y, _ = sample_first_token_sweep(key, widths=(cfg.reference_width,), head_widths=(d,), n_heads=H,
                                    n_tokens=cfg.n_tokens, activation=cfg.input_activation,
                                    n_samples=REFERENCE_EXACT_FACTOR * cfg.n_reference, method=_method(impl["sampler"]))
    return np.asarray(y).ravel()


def _reference_check(key, cfg: SakaiConfig, H: int, d: int | None, exact, max_heads: int, impl: dict):
    """Brute force vs exact at the reference width: KS statistic, its 0.001 critical value, second moments. The brute
    force (:func:`attnlab.sakai.reference.sample_reference_first`) runs in C where the kernel applies, else in JAX,
    where the H of a preset share one compiled program if padding is cheap (``max_heads`` heads drawn, the first H
    used; see ``REFERENCE_PAD_NORMALS``)."""
    kw = dict(n=cfg.reference_width, n_heads=H, n_tokens=cfg.n_tokens, activation=cfg.input_activation,
              head_width=d, n_samples=cfg.n_reference)
    ref = np.asarray(sample_reference_first(key, max_heads=max_heads, method=_method(impl["reference"]), **kw))
    ex = np.asarray(exact)
    ks, ks_control = _ks_w1_rows(np.stack([ref, ref]), np.stack([ex, ex / math.sqrt(cfg.reference_width)]),
                                 impl["distances"])[:, 0]
    return {"ks": float(ks), "crit": dist.ks_critical(ref.size, ex.size, 1e-3), "ks_control": float(ks_control),
            "m2_ref": float(np.mean(ref**2)), "m2_ref_se": float(np.std(ref**2, ddof=1) / math.sqrt(ref.size)),
            "m2_exact": float(np.mean(ex**2)), "m2_exact_se": float(np.std(ex**2, ddof=1) / math.sqrt(ex.size))}


def run(cfg: SakaiConfig, key, progress=None) -> xr.Dataset:
    if cfg.experiment == "scores":
        return _run_scores(cfg, key, progress)
    impl = implementations(cfg)
    configs = cfg.configs()
    heads = sorted({H for _, _, H in configs})
    n_steps = 2 * len(heads) + 3 + len(configs)  # per H: draws, reference; KDE; KS/W1; a bootstrap per config; RB
    tick = (lambda i: progress(i, n_steps)) if progress is not None else (lambda i: None)
    k_fin, k_ref, k_boot, k_gauss, k_ref_exact = split(key, 5)
    S, N = cfg.n_seeds, cfg.n_samples
    y_fin = np.zeros((len(configs), S, N))
    v_fin = np.zeros_like(y_fin)
    lim = {}
    refs, ref_exact = [], {}
    d_ref = None if cfg.head_width is None else min(cfg.head_width, cfg.reference_width)
    plan = {H: ([n for n, _, h in configs if h == H], [d for _, d, h in configs if h == H]) for H in heads}
    # small runs (quick sizes): every H in one padded program (one compilation instead of one per H)
    padded = len(heads) > 1 and S * N * max(heads) * (len(configs) + 3 * len(heads)) <= PAD_HEADS_BUDGET
    draws = _draw_heads(k_fin, cfg, plan, d_ref, impl) if padded else {}
    n_ref, d_ref_ = cfg.reference_width, d_ref or cfg.reference_width
    pad_ref = cfg.n_reference * max(heads) * 4 * n_ref * d_ref_ <= REFERENCE_PAD_NORMALS
    ref_heads = lambda H: max(heads) if pad_ref else H  # noqa: E731
    for i, H in enumerate(heads):
        idx = [c for c, (_, _, h) in enumerate(configs) if h == H]
        apart = not padded and S * N * H > SEPARATE_REFERENCE_HEADS
        if padded:
            ys, vs = draws[H]
        else:
            ys, vs = _draw(fold_in(k_fin, H), cfg, H, plan[H][0], plan[H][1], d_ref, impl, not apart)
        y_fin[idx], v_fin[idx] = ys[:len(idx)], vs[:len(idx)]
        ref_exact[H] = (_reference_exact(fold_in(k_ref_exact, H), cfg, H, d_ref, impl) if apart
                        else ys[len(idx)].ravel())
        lim[H] = (ys[-2], vs[-2], ys[-1], vs[-1])
        tick(2 * i + 1)
        refs.append(_reference_check(fold_in(k_ref, H), cfg, H, d_ref, ref_exact[H], ref_heads(H), impl))
        tick(2 * i + 2)
    theory = {H: limit_moments(cfg.n_tokens, cfg.input_activation, H) for H in heads}
    # negative controls: the limit law of the other input activation, and of a wrong head count
    other = "relu" if cfg.input_activation == "clip" else "clip"
    wrong_act = {H: limit_moments(cfg.n_tokens, other, H) for H in heads}
    wrong_heads = {H: limit_moments(cfg.n_tokens, cfg.input_activation, 1 if H > 1 else 4) for H in heads}
    gauss = {H: math.sqrt(theory[H]["second_moment"]) * np.asarray(jax_normal(fold_in(k_gauss, H), (S, N)))
             for H in heads}
    C = len(configs)
    hidx = [heads.index(H) for _, _, H in configs]
    y_lim = np.stack([lim[H][0] for H in heads])  # (heads, seed, sample)
    v_lim = np.stack([lim[H][1] for H in heads])
    y_null = np.stack([lim[H][2] for H in heads])

    # official KDE-KL: one grid over every sample of the experiment (global min to max)
    grid = dist.official_grid(y_fin, y_lim, n_points=cfg.kde_points)
    nh = len(heads)
    rows = np.concatenate([y_fin.reshape(C * S, N), y_lim.reshape(-1, N), y_null.reshape(-1, N),
                           np.stack([gauss[H] for H in heads]).reshape(-1, N)])
    dens = _kde_rows(rows, grid, impl["distances"])  # one compiled program for every KDE of the experiment
    k_fin_ = dens[:C * S].reshape(C, S, -1)
    k_lim_, k_null, k_gau = dens[C * S:].reshape(3, nh, S, -1)
    kl = lambda p, q: float(dist._discrete_kl(np.asarray(p) + dist.KDE_FLOOR, np.asarray(q) + dist.KDE_FLOOR))
    kde_kl = np.array([[kl(k_fin_[c, s], k_lim_[hidx[c], s]) for s in range(S)] for c in range(C)])
    kde_kl_null = np.array([[kl(k_lim_[h, s], k_null[h, s]) for s in range(S)] for h in range(len(heads))])
    kde_kl_gauss = np.array([[kl(k_lim_[h, s], k_gau[h, s]) for s in range(S)] for h in range(len(heads))])
    tick(2 * len(heads) + 1)

    # KS and W1: per seed, pooled over seeds, bootstrap on seed 0; null floor from two limit samples. Each family of
    # comparisons is one call (rows of finite-vs-limit pairs, then the limit-vs-limit null pairs)
    seed_rows = _ks_w1_rows(np.concatenate([y_fin.reshape(C * S, N), y_lim.reshape(nh * S, N)]),
                            np.concatenate([y_lim[hidx].reshape(C * S, N), y_null.reshape(nh * S, N)]),
                            impl["distances"])
    per_seed, per_seed_null = seed_rows[:C * S].reshape(C, S, 2), seed_rows[C * S:].reshape(nh, S, 2)
    pooled_rows = _ks_w1_rows(np.concatenate([y_fin.reshape(C, S * N), y_lim.reshape(nh, S * N)]),
                              np.concatenate([y_lim[hidx].reshape(C, S * N), y_null.reshape(nh, S * N)]),
                              impl["distances"])
    pooled, pooled_null = pooled_rows[:C], pooled_rows[C:]
    tick(2 * len(heads) + 2)
    boot = []
    for c in range(C):
        boot.append(_bootstrap(fold_in(k_boot, c), y_fin[c, 0], y_lim[hidx[c], 0], cfg.n_boot,
                               impl["distances"]))
        tick(2 * len(heads) + 3 + c)
    boot = np.array(boot)
    boot_ci = np.percentile(boot, [2.5, 97.5], axis=-1)  # (2, C, 2 stats)

    # Rao-Blackwellised KL of the scale mixtures (seed 0), its floor, and the Gaussian baseline of the limit
    half = 8.0 * math.sqrt(max(theory[H]["second_moment"] for H in heads))
    rb_grid = np.linspace(-half, half, 801)
    rb = lambda v: np.asarray(dist.rb_density(np.asarray(v), rb_grid))
    f_lim = {H: rb(lim[H][1][0]) for H in heads}
    f_null = {H: rb(lim[H][3][0]) for H in heads}
    rb_kl = np.array([dist.kl_quadrature(rb(v_fin[c, 0]), f_lim[configs[c][2]], rb_grid) for c in range(C)])
    rb_kl_null = np.array([dist.kl_quadrature(f_lim[H], f_null[H], rb_grid) for H in heads])
    phi = lambda H: np.exp(-0.5 * rb_grid**2 / theory[H]["second_moment"]) / math.sqrt(
        2 * math.pi * theory[H]["second_moment"])
    rb_kl_gauss = np.array([dist.kl_quadrature(f_lim[H], phi(H), rb_grid) for H in heads])

    tick(n_steps)

    plot_grid = np.linspace(-3, 3, 1000)  # the paper's plotting grid (seed 0 only)
    plot_dens = _kde_rows(np.concatenate([y_fin[:, 0], y_lim[:, 0]]), plot_grid, impl["distances"])
    mom_fin = [_moments(y_fin[c], v_fin[c]) for c in range(C)]
    mom_lim = [_moments(y_lim[h], v_lim[h]) for h in range(len(heads))]
    # the limit law's density on the plotting grid: the Rao-Blackwellised mixture of seed 0 (no KDE bandwidth)
    dens_rb = np.stack([np.asarray(dist.rb_density(np.asarray(lim[H][1][0]), plot_grid))
                        for H in heads])

    # the finite-width configurations on their swept quantities: (heads, width) at full rank (every pair of the
    # preset's H and n), (heads,) at low rank, where n = H n_H is a coordinate along the heads
    low_rank = cfg.experiment == "low_rank"
    widths = sorted({n for n, _, _ in configs})
    fd = ("heads",) if low_rank else ("heads", "width")
    pos = [(heads.index(H),) if low_rank else (heads.index(H), widths.index(n)) for n, _, H in configs]

    def grid(values):
        """Per-configuration values (C, ...) on the configuration dimensions ``fd`` (+ the trailing ones)."""
        values = np.asarray(values, dtype=float)
        out = np.full(tuple(len(heads) if d == "heads" else len(widths) for d in fd) + values.shape[1:], np.nan)
        for c, p in enumerate(pos):
            out[p] = values[c]
        return out

    hd, sd = ("heads",), fd + ("seed",)
    data = {
        "y_finite_seed0": (fd + ("sample",), grid(y_fin[:, 0]),
                           {"units": "1", "long_name": "first-token output Y[0,0], exact finite-width sampler"}),
        "y_limit_seed0": (("heads", "sample"), y_lim[:, 0], {"units": "1", "long_name": "Y[0,0], limit law"}),
        "density_finite": (fd + ("y",), grid(plot_dens[:C]),
                           {"units": "1", "long_name": "density of Y[0,0] at finite width (KDE, seed 0)"}),
        "density_limit": (("heads", "y"), plot_dens[C:],
                          {"units": "1", "long_name": "density of Y[0,0], limit law (KDE, seed 0)"}),
        "density_limit_rb": (("heads", "y"), dens_rb, {"units": "1", "long_name": "density of Y[0,0], limit law "
                                                                                  "(Rao-Blackwellised, seed 0)"}),
        "kde_kl": (sd, grid(kde_kl), {"units": "nat", "long_name": "official KDE-KL(finite || limit)"}),
        "kde_kl_null": (("heads", "seed"), kde_kl_null, {"units": "nat", "long_name": "KDE-KL(limit || limit')"}),
        "kde_kl_gauss": (("heads", "seed"), kde_kl_gauss, {"units": "nat",
                                                           "long_name": "KDE-KL(limit || N(0, E v) sample)"}),
        "ks": (sd, grid(per_seed[..., 0]), {"units": "1", "long_name": "KS distance to the limit"}),
        "w1": (sd, grid(per_seed[..., 1]), {"units": "1", "long_name": "W1 distance to the limit"}),
        "ks_null": (("heads", "seed"), per_seed_null[..., 0], {"units": "1", "long_name": "KS(limit, limit')"}),
        "w1_null": (("heads", "seed"), per_seed_null[..., 1], {"units": "1", "long_name": "W1(limit, limit')"}),
        "ks_pooled": (fd, grid(pooled[:, 0]), {"units": "1", "long_name": "KS to the limit, seeds pooled"}),
        "w1_pooled": (fd, grid(pooled[:, 1]), {"units": "1", "long_name": "W1 to the limit, seeds pooled"}),
        "ks_pooled_null": (hd, pooled_null[:, 0], {"units": "1", "long_name": "KS(limit, limit'), seeds pooled"}),
        "w1_pooled_null": (hd, pooled_null[:, 1], {"units": "1", "long_name": "W1(limit, limit'), seeds pooled"}),
        "ks_boot_ci": (fd + ("quantile",), grid(boot_ci[..., 0].T),
                       {"units": "1", "long_name": "KS to the limit, Poisson-bootstrap quantiles (seed 0)"}),
        "w1_boot_ci": (fd + ("quantile",), grid(boot_ci[..., 1].T),
                       {"units": "1", "long_name": "W1 to the limit, Poisson-bootstrap quantiles (seed 0)"}),
        "rb_kl": (fd, grid(rb_kl), {"units": "nat", "long_name": "Rao-Blackwellised KL(finite || limit), seed 0"}),
        "rb_kl_null": (hd, rb_kl_null, {"units": "nat", "long_name": "Rao-Blackwellised KL(limit || limit')"}),
        "rb_kl_gauss": (hd, rb_kl_gauss, {"units": "nat", "long_name": "KL(limit || N(0, E v)), RB density"}),
        "theory_second_moment": (hd, [theory[H]["second_moment"] for H in heads],
                                 {"units": "1", "long_name": "limit E y^2 by quadrature"}),
        "theory_excess_kurtosis": (hd, [theory[H]["excess_kurtosis"] for H in heads],
                                   {"units": "1", "long_name": "limit excess kurtosis by quadrature"}),
        "control_second_moment": (hd, [wrong_act[H]["second_moment"] for H in heads],
                                  {"units": "1", "long_name": f"limit E y^2 with {other} inputs (negative control)"}),
        "control_excess_kurtosis": (hd, [wrong_heads[H]["excess_kurtosis"] for H in heads],
                                    {"units": "1", "long_name": "limit excess kurtosis with H = 1 (H = 4 for H = 1): "
                                                                "negative control"}),
    }
    for key_ in mom_fin[0]:
        data[f"finite_{key_}"] = (fd, grid([m[key_] for m in mom_fin]), {"units": "1"})
        data[f"limit_{key_}"] = (hd, [m[key_] for m in mom_lim], {"units": "1"})
    for key_ in refs[0]:
        data[f"reference_{key_}"] = (hd, [r[key_] for r in refs], {"units": "1"})
    attrs = {"paper": CITATION, "experiment": cfg.experiment, "activation": cfg.input_activation,
             "reference_width": cfg.reference_width, "n_reference": cfg.n_reference}
    coords = {"heads": ("heads", heads, {"units": "1", "long_name": "number of heads H"}),
              "seed": ("seed", np.arange(S), {"units": "1", "long_name": "seed index"}),
              "sample": ("sample", np.arange(N), {"units": "1", "long_name": "network draw (seed 0)"}),
              "y": ("y", plot_grid, {"units": "1", "long_name": "first-token output Y[0,0]"}),
              "quantile": ("quantile", [0.025, 0.975], {"units": "1", "long_name": "bootstrap quantile"})}
    if low_rank:
        coords["width"] = ("heads", [cfg.head_width * H for H in heads], {"units": "1", "long_name": "width n = H n_H"})
    else:
        coords["width"] = ("width", widths, {"units": "1", "long_name": "width n"})
    if cfg.head_width is not None:  # else the per-head width is the width
        coords["head_width"] = ((), cfg.head_width, {"units": "1", "long_name": "per-head width n_H"})
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _run_scores(cfg: SakaiConfig, key, progress=None) -> xr.Dataset:
    """Figure 2(a): the score G_00 at 1/sqrt(n) and 1/n scaling, exact sampler; reference check at a small width."""
    n = cfg.width[-1]
    k_ex, k_ref = split(key)
    N, n_ex_ref = cfg.n_samples * cfg.n_seeds, 5 * cfg.n_reference
    # the width n and the reference width from one compiled program (same sample count, cut afterwards)
    g_sqrt, g_lin = (np.asarray(a) for a in sample_scores_sweep(k_ex, widths=(n, cfg.reference_width),
                                                                n_tokens=cfg.n_tokens, activation=cfg.input_activation,
                                                                n_samples=max(N, n_ex_ref),
                                                                method=_method(implementations(cfg)["sampler"])))
    e_sqrt, e_lin = g_sqrt[1, :n_ex_ref], g_lin[1, :n_ex_ref]
    g_sqrt, g_lin = g_sqrt[0, :N], g_lin[0, :N]
    r_sqrt, _ = sample_reference_scores(k_ref, n=cfg.reference_width, n_tokens=cfg.n_tokens,
                                        activation=cfg.input_activation, n_samples=cfg.n_reference)
    ks, _ = dist.ks_w1(np.asarray(r_sqrt), np.asarray(e_sqrt))
    ks_control, _ = dist.ks_w1(np.asarray(r_sqrt), np.asarray(e_lin))  # the exact sampler at 1/n scaling
    if progress is not None:
        progress(1, 1)
    coords = {"scaling": ("scaling", [0.5, 1.0], {"units": "1", "long_name": "exponent a of the score scaling "
                                                                        "(QK^T)_00 / n^a"}),
              "sample": ("sample", np.arange(N), {"units": "1", "long_name": "network draw"}),
              "width": ((), n, {"units": "1", "long_name": "width n"})}
    return xr.Dataset(
        {"score": (("scaling", "sample"), np.stack([g_sqrt, g_lin]),
                   {"units": "1", "long_name": "score (QK^T)_00 / n^a, exact sampler"}),
         "reference_ks": ((), float(ks), {"units": "1", "long_name": "KS(brute force, exact sampler), a = 1/2"}),
         "reference_ks_control": ((), float(ks_control), {"units": "1", "long_name": "KS to the 1/n-scaled score"}),
         "reference_crit": ((), dist.ks_critical(cfg.n_reference, 5 * cfg.n_reference, 1e-3),
                            {"units": "1", "long_name": "KS critical value, level 0.001"})},
        coords=coords, attrs={"paper": CITATION, "experiment": "scores", "activation": cfg.input_activation,
                              "reference_width": cfg.reference_width})


SCORES_UNUSED = frozenset({"n_heads", "head_width", "n_boot", "kde_points"})
"""The fields of :class:`SakaiConfig` that the score probe (``experiment="scores"``: one head's score, a KS check)
does not read."""


def _preset(name, figure, description, defaults, quick):
    unused = SCORES_UNUSED if defaults["experiment"] == "scores" else frozenset()
    return register(Preset(name=name, paper="sakai", citation=CITATION, figure=figure, description=description,
                           implementations=implementations, finding=finding,
                           config_cls=SakaiConfig, run=run, summarize=summarize, plot=deferred("attnlab.sakai.figures:plot"),
                           defaults=defaults, quick=quick, unused=unused))


# quick sizes: fewer exact draws and bootstrap replicates; the brute-force reference keeps its full n_reference, which
# its KS check needs to reject its control (the exact sampler at 1/n scaling) at every seed, and which costs little
_QUICK = {"n_samples": 40_000, "n_seeds": 2, "n_boot": 50}
_preset("sakai-vary-width", "Fig. 1a, 1b",
        "H = 2, n in {16, 64, 256, 1024}: finite-width densities approach the non-Gaussian limit; KL, KS, W1 with floors.",
        {"experiment": "vary_width"}, _QUICK)
_preset("sakai-vary-heads", "Fig. 2b",
        "n = 256, H in {1, 256}: finite vs limit per H and the infinite-head Gaussian; excess kurtosis per H.",
        {"experiment": "vary_heads", "width": (256,), "n_heads": (1, 256), "reference_width": 4},
        {**_QUICK, "n_samples": 3000})
_preset("sakai-scores", "Fig. 2a",
        "Score (QK^T)_00 at n = 256: O(1) and near N(0, 1) under 1/sqrt(n), collapses to 0 under 1/n.",
        {"experiment": "scores", "width": (256,), "n_seeds": 1}, {"n_samples": 20_000})
_preset("sakai-low-rank", "Fig. 3a, 3b",
        "Low rank: n_H = 64, H in {1, 4, 16}, n = 64 H; finite vs limit at the same H.",
        {"experiment": "low_rank", "head_width": 64, "n_heads": (1, 4, 16), "width": (64,)}, _QUICK)
_preset("sakai-relu", "Fig. 5a, 5b",
        "ReLU inputs, H = 2, n in {16..1024}, 100k samples: the limit is nearly Gaussian (excess kurtosis 0.0018).",
        {"experiment": "vary_width", "input_activation": "relu", "n_samples": 100_000}, _QUICK)
_preset("sakai-wide", "beyond the paper",
        "Widths up to n = 2^20 and H up to 1024 (exact sampler): distances to the limit against their null floors.",
        {"experiment": "wide", "width": (16, 256, 4096, 65536, 1048576), "n_heads": (2, 1024), "n_samples": 20_000,
         "n_seeds": 4, "reference_width": 4},
        {"width": (16, 1024, 1048576), "n_heads": (2, 64), "n_samples": 3000, "n_seeds": 2, "n_boot": 50})

from attnlab.sakai import kernel_presets as _kernel_presets  # noqa: E402,F401  registers sakai-kernel
from attnlab.sakai import regression as _regression  # noqa: E402,F401  registers sakai-kernel-regression
