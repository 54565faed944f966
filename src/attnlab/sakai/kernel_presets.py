"""Presets beyond the paper: the infinite-width kernels of softmax attention at 1/sqrt(n) scaling for many inputs and
deep stacks (:mod:`attnlab.sakai.kernel`, :mod:`attnlab.sakai.joint`), against finite-width networks.

``sakai-kernel``: on small data sets of sequences (random Gaussian tokens, and sequences with a planted
single-location signal as in the SLR papers, :mod:`attnlab.slr.data`), the kernel of one attention layer and of the
stack ``[attention, relu, attention]`` against the covariance of finite-width networks (the exact sampler of
:func:`attnlab.sakai.joint.sample_network`, checked in the same run against brute-force networks with explicit
weights, :func:`attnlab.sakai.reference.sample_reference_stack`), the 1/n finite-width bias along the width, the
finite-H joint law against finite width (its random kernel ``w^T C w``), the heads' effect on the non-Gaussianity,
and the one-sequence case against :mod:`attnlab.sakai.limit`. ``sakai-kernel-regression`` is in
:mod:`attnlab.sakai.regression`.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pydantic
import xarray as xr

from attnlab._random import fold_in, jax_normal, split
from attnlab.config import ExperimentConfig
from attnlab.registry import Check, Preset, register
from attnlab.sakai import distances as dist
from attnlab.sakai.joint import mixture_excess_kurtosis, projection_excess_kurtosis, sample_joint_limit, sample_network
from attnlab.sakai.kernel import attention_kernel, stack_kernel, token_kernel
from attnlab.sakai.limit import limit_moments, sample_limit_tokens
from attnlab.sakai.reference import sample_reference_stack

__all__ = ["KernelConfig", "sequences", "projections", "run", "summarize", "finding", "STACK"]

CITATION = "Sakai, Karakida, Imaizumi, NeurIPS 2025 (arXiv:2506.00846)"
STACK = ("attention", "relu", "attention")
"""The deep stack of the preset: attention, a dense layer with ReLU, attention (all of width n)."""
PROJECTIONS = ("one token", "two tokens of a sequence", "two sequences", "random")
Z_TOL = 5.0  # every entry within 5 combined standard errors
STACK_RESOLVED = 8.0  # the stack's draws stop once its checks' control lies this many combined SEs away (> Z_TOL)
KS_ALPHA = 1e-3
SHARED_PROGRAM_DRAWS = 10_000
"""Below this many draws per call the samplers draw the largest H of the run's heads and use the first H (one
compiled program serves every H: compilation dominates); from it on each call draws exactly its H heads (the draws
dominate: 50 000 finite-width draws take 4.4 s with 16 heads drawn, 1.3 s with 4, 0.5 s with 1)."""


class KernelConfig(ExperimentConfig):
    """Config of ``sakai-kernel`` (field names are the ``--set`` keys)."""

    datasets: tuple[Literal["gaussian", "planted"], ...] = pydantic.Field(
        ("gaussian", "planted"), description="data sets: iid N(0, I) tokens; SLR sequences with one planted signal token")
    n_sequences: int = pydantic.Field(6, ge=2, description="sequences m of each data set")
    n_tokens: int = pydantic.Field(4, ge=2, description="sequence length s")
    token_dim: int = pydantic.Field(8, ge=2, description="token dimension d_in (embedded by a dense layer)")
    widths: tuple[int, ...] = pydantic.Field((64, 256, 1024), description="widths n of the finite-width networks")
    n_heads: int = pydantic.Field(16, ge=1, description="heads H of the finite-width covariance checks")
    heads: tuple[int, ...] = pydantic.Field((1, 4, 16), description="heads H of the non-Gaussianity sweep")
    stack_heads: tuple[int, ...] = pydantic.Field((4, 8, 16), description="heads H of the stack's 1/H extrapolation")
    n_networks: int = pydantic.Field(50_000, ge=100, description="finite-width networks per width and H")
    n_limit: int = pydantic.Field(50_000, ge=100, description="draws of the infinite-width joint law per H")
    n_stack: int = pydantic.Field(20_000, ge=100, description="networks and limit draws per H for the stack, per round")
    stack_rounds: int = pydantic.Field(
        8, ge=1, description="rounds of n_stack draws at most: the stack is drawn round after round until its two "
                             "checks' control, the joint law at H = 1, lies STACK_RESOLVED combined SEs away")
    n_points: int = pydantic.Field(2048, ge=2, description="scrambled Sobol points per replicate (a power of 2)")
    n_replicates: int = pydantic.Field(16, ge=2, description="randomised-QMC replicates")
    law_width: int = pydantic.Field(65536, ge=1, description="width of the finite-width draws compared in law with the "
                                    "joint law (the exact sampler's cost does not depend on it)")
    reference_width: int = pydantic.Field(256, ge=1, description="width of the brute-force networks")
    reference_heads: int = pydantic.Field(4, ge=1, description="heads of the brute-force networks")
    n_reference: int = pydantic.Field(2000, ge=20, description="brute-force networks")

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        M = self.n_sequences * self.n_tokens
        for name in ("widths", "heads", "stack_heads"):
            values = getattr(self, name)
            if not values or any(int(x) < 1 for x in values) or list(values) != sorted(set(values)):
                raise ValueError(f"{name} must be a non-empty increasing list of integers >= 1; got {values!r}")
        if not self.datasets:
            raise ValueError("datasets must name at least one data set")
        if min(self.widths + (self.reference_width, self.law_width)) < max(M, self.token_dim):
            raise ValueError(f"widths, law_width, reference_width must be >= max(m s, token_dim) = {max(M, self.token_dim)}")
        if self.n_heads not in self.heads or self.reference_heads > max(self.heads):
            raise ValueError(f"n_heads ({self.n_heads}) must be one of heads {self.heads!r}, reference_heads <= max(heads)")
        if self.n_points & (self.n_points - 1):
            raise ValueError(f"n_points must be a power of 2; got {self.n_points}")
        if len(self.stack_heads) < 2:
            raise ValueError("stack_heads needs at least two H for the 1/H extrapolation")
        return self


def sequences(key, kind: str, m: int, s: int, d: int) -> np.ndarray:
    """A data set of m sequences of s tokens in R^d, (m, s, d): ``gaussian``: iid N(0, I_d) tokens; ``planted``: the
    single-location regression law of :func:`attnlab.slr.data.sample_tokens` (Marion et al.): one token at a uniform
    location drawn from ``N(sqrt(d/2) k*, I/2)``, the others N(0, I_d) (every token then has E|u|^2/d = 1)."""
    if kind == "gaussian":
        return np.asarray(jax_normal(key, (m, s, d)))
    from attnlab.slr.data import sample_teacher, sample_tokens

    kt, kx = split(key)
    k_star, v_star = sample_teacher(kt, d)
    return np.asarray(sample_tokens(kx, k_star, v_star, m, s, math.sqrt(0.5), 0.0, math.sqrt(d / 2.0)).X)


def projections(m: int, s: int, key) -> np.ndarray:
    """Unit projection vectors of the M = m s outputs (4, M): token (0, 0); tokens (0, 0) - (0, 1) (zero under average
    pooling, i.e. 1/n scaling); tokens (0, 0) - (1, 0); a random direction."""
    M = m * s
    e = np.eye(M)
    r = np.asarray(jax_normal(key, (M,)))
    return np.stack([e[0], (e[0] - e[1]) / math.sqrt(2), (e[0] - e[s]) / math.sqrt(2), r / np.linalg.norm(r)])


def _mean_se(C):
    C = np.asarray(C)
    return C.mean(0), C.std(0, ddof=1) / math.sqrt(C.shape[0])


def _max_z(a, a_se, b, b_se) -> float:
    """Largest entrywise |a - b| / sqrt(a_se^2 + b_se^2) (upper triangle)."""
    iu = np.triu_indices(a.shape[-1])
    z = np.abs(a - b) / np.sqrt(a_se**2 + b_se**2)
    return float(z[..., iu[0], iu[1]].max())


def _extrapolate(means, ses, heads):
    """Entrywise weighted least squares of ``a + b/H`` on the means (H, M, M): the intercept a and its SE."""
    x = 1.0 / np.asarray(heads, float)
    w = 1.0 / np.asarray(ses) ** 2
    S0, S1, S2 = w.sum(0), (w * x[:, None, None]).sum(0), (w * x[:, None, None] ** 2).sum(0)
    Sy, Sxy = (w * means).sum(0), (w * x[:, None, None] * means).sum(0)
    det = S0 * S2 - S1**2
    return (S2 * Sy - S1 * Sxy) / det, np.sqrt(S2 / det)


class _Draws:
    """Draws of C (N, M, M) taken in rounds: the running mean and sum of squared deviations (chunks merged by the
    parallel variance formula) and the projections ``w^T C w`` on the rows of ``W``, without keeping the draws."""

    def __init__(self, W):
        self.W, self.count, self.mean, self.m2, self.v = np.asarray(W), 0, 0.0, 0.0, []

    def add(self, C):
        C = np.asarray(C)
        n, mean = C.shape[0], C.mean(0)
        m2 = ((C - mean) ** 2).sum(0)
        total = self.count + n
        delta = mean - self.mean
        self.mean = self.mean + delta * n / total if self.count else mean
        self.m2 = self.m2 + m2 + delta**2 * self.count * n / total if self.count else m2
        self.count = total
        self.v.append(np.einsum("pi,nij,pj->np", self.W, C, self.W))

    def mean_se(self):
        return self.mean, np.sqrt(self.m2 / (self.count - 1) / self.count)

    def projections(self):
        return np.concatenate(self.v)


def _padded_heads(n_draws: int, largest: int) -> int | None:
    """The ``max_heads`` of a sampler call of ``n_draws`` draws (:data:`SHARED_PROGRAM_DRAWS`)."""
    return largest if n_draws < SHARED_PROGRAM_DRAWS else None


def _dataset(key, cfg: KernelConfig, kind: str, W) -> dict:
    """Every quantity of one data set."""
    m, s, d = cfg.n_sequences, cfg.n_tokens, cfg.token_dim
    M = m * s
    ks = split(key, 12)
    U = sequences(ks[0], kind, m, s, d)
    K0 = token_kernel(U)
    qmc = dict(n_points=cfg.n_points, n_replicates=cfg.n_replicates)
    k1 = attention_kernel(K0, key=ks[1], n_tokens=s, **qmc)
    k1_lin = attention_kernel(K0, key=ks[1], n_tokens=s, scaling="linear")
    k2 = stack_kernel(K0, STACK, key=ks[2], n_tokens=s, **qmc)
    k2_lin = stack_kernel(K0, STACK, key=ks[2], n_tokens=s, scaling="linear")
    H_max, N = max(cfg.heads), cfg.n_networks
    out = {"tokens": U, "input_kernel": K0, "kernel": k1.mean, "kernel_se": k1.se, "kernel_linear": k1_lin.mean,
           "kernel_stack": k2.mean, "kernel_stack_se": k2.se, "kernel_stack_linear": k2_lin.mean}

    # finite width, one layer: every width at H = n_heads, and every H at the largest width; these and the reference
    # width's exact draws below come from one compiled program per H drawn (n and the score scaling are traced
    # values; H too below SHARED_PROGRAM_DRAWS draws per call)
    net = lambda k, n, H, scaling="sqrt": sample_network(k, U, n=n, n_heads=H, n_samples=N,  # noqa: E731
                                                         max_heads=_padded_heads(N, H_max), scaling=scaling)
    cov, cov_se, widest = [], [], None
    for i, n in enumerate(cfg.widths):
        Yf, C = net(fold_in(ks[3], i), n, cfg.n_heads)
        a, b = _mean_se(C)
        cov.append(a)
        cov_se.append(b)
        widest = (Yf, C)
    out["finite_cov"], out["finite_cov_se"] = np.stack(cov), np.stack(cov_se)
    n_max = max(cfg.widths)
    lim_cov, lim_cov_se, kurt_lim, kurt_lim_se, kurt_fin, kurt_fin_se, ks_mix, ks_y, ks_mix_ctl = ([] for _ in range(9))
    v_lim, v_fin = {}, {}
    for i, H in enumerate(cfg.heads):
        Yf, Cf = net(fold_in(ks[4], i), cfg.law_width, H)
        Yl, Cl = sample_joint_limit(fold_in(ks[5], i), K0, n_tokens=s, n_heads=H, n_samples=cfg.n_limit,
                                    max_heads=_padded_heads(cfg.n_limit, H_max))
        Cf, Cl = np.asarray(Cf), np.asarray(Cl)
        Yf, Yl = np.asarray(Yf).reshape(N, M), np.asarray(Yl).reshape(cfg.n_limit, M)
        a, b = _mean_se(Cl)
        lim_cov.append(a)
        lim_cov_se.append(b)
        kl = [projection_excess_kurtosis(Cl, w) for w in W]
        kf = [projection_excess_kurtosis(Cf, w) for w in W]
        kurt_lim.append([k[0] for k in kl])
        kurt_lim_se.append([k[1] for k in kl])
        kurt_fin.append([k[0] for k in kf])
        kurt_fin_se.append([k[1] for k in kf])
        v_lim[H] = np.einsum("pi,nij,pj->pn", W, Cl, W)
        v_fin[H] = np.einsum("pi,nij,pj->pn", W, Cf, W)
        ks_mix.append(dist.ks_w1_rows(v_fin[H], v_lim[H])[0])
        ks_y.append(dist.ks_w1_rows((Yf @ W.T).T, (Yl @ W.T).T)[0])
        if H == cfg.n_heads:  # the same comparison at the largest width of the covariance sweep
            v_widest = np.einsum("pi,nij,pj->pn", W, np.asarray(widest[1]), W)
            out["ks_mixing_widest"] = dist.ks_w1_rows(v_widest, v_lim[H])[0]
    for H in cfg.heads:  # control: the random kernel of the limit law with another H (the farthest of the sweep)
        other = cfg.heads[-1] if H == cfg.heads[0] else cfg.heads[0]
        ks_mix_ctl.append(dist.ks_w1_rows(v_fin[H], v_lim[other])[0])
    out.update(limit_cov=np.stack(lim_cov), limit_cov_se=np.stack(lim_cov_se), kurtosis_limit=np.array(kurt_lim),
               kurtosis_limit_se=np.array(kurt_lim_se), kurtosis_finite=np.array(kurt_fin),
               kurtosis_finite_se=np.array(kurt_fin_se), ks_mixing=np.array(ks_mix),
               ks_mixing_control=np.array(ks_mix_ctl), ks_output=np.array(ks_y),
               mixing_finite=np.stack([v_fin[H][:, :2000] for H in cfg.heads]),
               mixing_limit=np.stack([v_lim[H][:, :2000] for H in cfg.heads]))

    # the stack: the finite-H limit law along stack_heads (and H = 1, the control), finite width at n_max, H = n_heads
    # drawn in rounds of n_stack (round 0 from the keys of one round) until the control of both stack checks, the
    # joint law at H = 1, lies STACK_RESOLVED combined SEs from what each check compares it with (the stack kernel,
    # the finite width), at most stack_rounds: the H-dependence of the stack is small, and a fixed count that
    # resolves it at every seed would cost most seeds several times the draws they need
    Hs = sorted(set(cfg.stack_heads) | {1, cfg.n_heads})
    sel = [Hs.index(H) for H in cfg.stack_heads]
    lim, fin = [_Draws(W) for _ in Hs], _Draws(W)
    for r in range(cfg.stack_rounds):
        for i, H in enumerate(Hs):
            kr = fold_in(ks[6], i) if r == 0 else fold_in(fold_in(ks[6], i), r)
            lim[i].add(sample_joint_limit(kr, K0, n_tokens=s, n_heads=H, layers=STACK, n_samples=cfg.n_stack,
                                          max_heads=_padded_heads(cfg.n_stack, max(Hs)))[1])
        fin.add(sample_network(ks[7] if r == 0 else fold_in(ks[7], r), U, n=n_max, n_heads=cfg.n_heads,
                               layers=STACK, n_samples=cfg.n_stack)[1])
        h1, h1_se = lim[Hs.index(1)].mean_se()
        fs, fs_se = fin.mean_se()
        if min(_max_z(np.asarray(k2.mean), np.asarray(k2.se), h1, h1_se), _max_z(h1, h1_se, fs, fs_se)) >= STACK_RESOLVED:
            break
    st_cov, st_se = (np.stack(x) for x in zip(*(d.mean_se() for d in lim)))
    st_kurt, st_kurt_se = [], []
    for d in lim:
        kk = [mixture_excess_kurtosis(v) for v in d.projections().T]
        st_kurt.append([k[0] for k in kk])
        st_kurt_se.append([k[1] for k in kk])
    ext, ext_se = _extrapolate(st_cov[sel], st_se[sel], cfg.stack_heads)
    out.update(stack_limit_cov=st_cov, stack_limit_cov_se=st_se, stack_extrapolated=ext, stack_extrapolated_se=ext_se,
               stack_finite_cov=fs, stack_finite_cov_se=fs_se, kurtosis_stack_limit=np.array(st_kurt),
               kurtosis_stack_limit_se=np.array(st_kurt_se), stack_heads_all=np.array(Hs),
               stack_draws=np.int64(fin.count))

    # brute force (explicit weights) against the exact sampler at the reference width
    n_ref, H_ref, N_ref = cfg.reference_width, cfg.reference_heads, cfg.n_reference
    Yb, Gb = sample_reference_stack(ks[8], U, n=n_ref, n_heads=H_ref, n_samples=N_ref)
    Ye, Ce = net(ks[9], n_ref, H_ref)
    Yc, Cc = net(ks[10], n_ref, H_ref, "linear")
    pb = (np.asarray(Yb).reshape(N_ref, M) @ W.T).T
    pe = (np.asarray(Ye).reshape(N, M) @ W.T).T
    pc = (np.asarray(Yc).reshape(N, M) @ W.T).T
    gb, gb_se = _mean_se(Gb)
    ge, ge_se = _mean_se(Ce)
    gc, gc_se = _mean_se(Cc)
    # brute force against the joint law itself (n = inf, the same H); control: the law at 1/n scaling, the Gaussian
    # N(0, K_lin) of average pooling (drawn from its eigen-factor: K_lin has rank m)
    Yl, _ = sample_joint_limit(ks[11], K0, n_tokens=s, n_heads=H_ref, n_samples=cfg.n_limit,
                               max_heads=_padded_heads(cfg.n_limit, H_max))
    lam, V = np.linalg.eigh(k1_lin.mean)
    g = np.asarray(jax_normal(fold_in(ks[11], 1), (cfg.n_limit, M)))
    plin = (g @ (V * np.sqrt(np.maximum(lam, 0.0))).T @ W.T).T
    pl = (np.asarray(Yl).reshape(cfg.n_limit, M) @ W.T).T
    out.update(reference_law_ks=dist.ks_w1_rows(pb, pl)[0], reference_law_ks_control=dist.ks_w1_rows(pb, plin)[0])
    out.update(reference_ks=dist.ks_w1_rows(pb, pe)[0], reference_ks_control=dist.ks_w1_rows(pb, pc)[0],
               reference_gram=gb, reference_gram_se=gb_se, reference_exact_gram=ge, reference_exact_gram_se=ge_se,
               reference_control_gram=gc, reference_control_gram_se=gc_se)
    return out


def _single(key, cfg: KernelConfig) -> dict:
    """One sequence (m = 1, Sigma = I, as the paper's clip inputs): the kernel against the quadrature of
    :func:`attnlab.sakai.limit.limit_moments`, and the joint sampler against :func:`sample_limit_tokens` (H = 1)."""
    s = cfg.n_tokens
    k1, k2, k3, k4 = split(key, 4)
    kern = attention_kernel(np.eye(s), key=k1, n_tokens=s, n_points=cfg.n_points, n_replicates=cfg.n_replicates)
    quad = limit_moments(s, "clip", 1)["second_moment"] if s <= 5 else math.nan
    N = cfg.n_limit
    _, Cj = sample_joint_limit(k2, np.eye(s), n_tokens=s, n_heads=1, n_samples=N, max_heads=_padded_heads(N, 4))
    _, Cc = sample_joint_limit(k4, np.eye(s), n_tokens=s, n_heads=4, n_samples=N, max_heads=_padded_heads(N, 4))
    _, Cs = sample_limit_tokens(k3, n_heads=1, n_tokens=s, activation="identity", n_samples=N)
    v = [np.asarray(C)[:, 0, 0] for C in (Cj, Cs, Cc)]
    return {"single_kernel": float(kern.mean[0, 0]), "single_kernel_se": float(kern.se[0, 0]),
            "single_kernel_offdiag": float(kern.mean[0, 1]), "single_kernel_offdiag_se": float(kern.se[0, 1]),
            "single_quadrature": quad, "single_relu_quadrature": limit_moments(s, "relu", 1)["second_moment"]
            if s <= 5 else math.nan,
            "single_ks": float(dist.ks_w1_rows(v[0][None], v[1][None])[0][0]),
            "single_ks_control": float(dist.ks_w1_rows(v[2][None], v[1][None])[0][0]),
            "single_ks_crit": dist.ks_critical(N, N, KS_ALPHA)}


def run(cfg: KernelConfig, key, progress=None) -> xr.Dataset:
    k_data, k_w, k_single = split(key, 3)
    m, s, M = cfg.n_sequences, cfg.n_tokens, cfg.n_sequences * cfg.n_tokens
    W = projections(m, s, k_w)
    parts = []
    for i, kind in enumerate(cfg.datasets):
        parts.append(_dataset(fold_in(k_data, i), cfg, kind, W))
        if progress is not None:
            progress(i + 1, len(cfg.datasets) + 1)
    single = _single(k_single, cfg)
    if progress is not None:
        progress(len(cfg.datasets) + 1, len(cfg.datasets) + 1)
    stack = lambda name: np.stack([p[name] for p in parts])  # noqa: E731
    tt, dt = ("token", "token2"), ("dataset", "token", "token2")
    one = {"units": "1"}
    v = lambda dims, name, long: (dims, stack(name), {**one, "long_name": long})  # noqa: E731
    Hs = [int(h) for h in parts[0]["stack_heads_all"]]
    data = {
        "tokens": v(("dataset", "sequence", "position", "feature"), "tokens", "token u of the data set"),
        "input_kernel": v(dt, "input_kernel", "token kernel K = U U^T/d_in (embedding)"),
        "kernel": v(dt, "kernel", "attention kernel K' (H -> inf), randomised QMC"),
        "kernel_se": v(dt, "kernel_se", "standard error of K' (QMC replicates)"),
        "kernel_linear": v(dt, "kernel_linear", "attention kernel at 1/n scaling (average pooling): control"),
        "kernel_stack": v(dt, "kernel_stack", "kernel of [attention, relu, attention] (H -> inf)"),
        "kernel_stack_se": v(dt, "kernel_stack_se", "standard error of the stack kernel"),
        "kernel_stack_linear": v(dt, "kernel_stack_linear", "stack kernel at 1/n scaling: control"),
        "finite_cov": v(("dataset", "width") + tt, "finite_cov", "finite-width covariance E[C] of an output feature"),
        "finite_cov_se": v(("dataset", "width") + tt, "finite_cov_se", "its standard error"),
        "limit_cov": v(("dataset", "heads") + tt, "limit_cov", "covariance E[C] of the joint law (n = inf, H)"),
        "limit_cov_se": v(("dataset", "heads") + tt, "limit_cov_se", "its standard error"),
        "kurtosis_limit": v(("dataset", "heads", "projection"), "kurtosis_limit",
                            "excess kurtosis of w^T y, joint law (n = inf)"),
        "kurtosis_limit_se": v(("dataset", "heads", "projection"), "kurtosis_limit_se", "its standard error"),
        "kurtosis_finite": v(("dataset", "heads", "projection"), "kurtosis_finite",
                             "excess kurtosis of w^T y at width law_width"),
        "kurtosis_finite_se": v(("dataset", "heads", "projection"), "kurtosis_finite_se", "its standard error"),
        "ks_mixing": v(("dataset", "heads", "projection"), "ks_mixing",
                       "KS(w^T C w at width law_width, joint law at the same H)"),
        "ks_mixing_control": v(("dataset", "heads", "projection"), "ks_mixing_control",
                               "KS(w^T C w at width law_width, joint law at another H): control"),
        "ks_mixing_widest": v(("dataset", "projection"), "ks_mixing_widest",
                              "KS(w^T C w at the largest width of the sweep, joint law), H = n_heads"),
        "ks_output": v(("dataset", "heads", "projection"), "ks_output",
                       "KS(w^T y at width law_width, joint law at the same H)"),
        "mixing_finite": v(("dataset", "heads", "projection", "draw"), "mixing_finite",
                           "random kernel w^T C w at width law_width (first draws)"),
        "mixing_limit": v(("dataset", "heads", "projection", "draw"), "mixing_limit",
                          "random kernel w^T C w of the joint law (first draws)"),
        "stack_limit_cov": v(("dataset", "stack_heads") + tt, "stack_limit_cov", "stack covariance, joint law (n = inf)"),
        "stack_limit_cov_se": v(("dataset", "stack_heads") + tt, "stack_limit_cov_se", "its standard error"),
        "stack_extrapolated": v(dt, "stack_extrapolated", "stack covariance extrapolated to H = inf (a + b/H fit)"),
        "stack_extrapolated_se": v(dt, "stack_extrapolated_se", "its standard error"),
        "stack_finite_cov": v(dt, "stack_finite_cov", "stack covariance at the largest width, H = n_heads"),
        "stack_finite_cov_se": v(dt, "stack_finite_cov_se", "its standard error"),
        "stack_draws": v(("dataset",), "stack_draws", "networks and limit draws per H of the stack (rounds of n_stack "
                                                      "until the control is resolved)"),
        "kurtosis_stack_limit": v(("dataset", "stack_heads", "projection"), "kurtosis_stack_limit",
                                  "excess kurtosis of w^T y, stack, joint law"),
        "kurtosis_stack_limit_se": v(("dataset", "stack_heads", "projection"), "kurtosis_stack_limit_se",
                                     "its standard error"),
        "reference_ks": v(("dataset", "projection"), "reference_ks", "KS(brute force, exact sampler) of w^T y"),
        "reference_ks_control": v(("dataset", "projection"), "reference_ks_control",
                                  "KS(brute force, exact sampler at 1/n scaling): control"),
        "reference_law_ks": v(("dataset", "projection"), "reference_law_ks",
                              "KS(brute force, joint law at n = inf and the same H) of w^T y"),
        "reference_law_ks_control": v(("dataset", "projection"), "reference_law_ks_control",
                                      "KS(brute force, joint law at 1/n scaling): control"),
        "reference_gram": v(dt, "reference_gram", "brute-force E[X X^T/n]"),
        "reference_gram_se": v(dt, "reference_gram_se", "its standard error"),
        "reference_exact_gram": v(dt, "reference_exact_gram", "exact sampler E[C] at the reference width"),
        "reference_exact_gram_se": v(dt, "reference_exact_gram_se", "its standard error"),
        "reference_control_gram": v(dt, "reference_control_gram", "exact sampler at 1/n scaling: control"),
        "reference_control_gram_se": v(dt, "reference_control_gram_se", "its standard error"),
        "projection_vector": (("projection", "token"), W, {**one, "long_name": "unit projection w of the outputs"}),
    }
    for name, val in single.items():
        data[name] = ((), val, {**one, "long_name": "one sequence, Sigma = I: " + name.removeprefix("single_")})
    data["reference_ks_crit"] = ((), dist.ks_critical(cfg.n_reference, cfg.n_networks, KS_ALPHA / len(W)),
                                 {**one, "long_name": "KS critical value, level 0.001 over the projections"})
    data["reference_law_ks_crit"] = ((), dist.ks_critical(cfg.n_reference, cfg.n_limit, KS_ALPHA / len(W)),
                                     {**one, "long_name": "KS critical value, level 0.001 over the projections"})
    data["ks_crit"] = ((), dist.ks_critical(cfg.n_networks, cfg.n_limit, KS_ALPHA / len(W)),
                       {**one, "long_name": "KS critical value, level 0.001 over the projections"})
    coords = {
        "dataset": ("dataset", list(cfg.datasets), {**one, "long_name": "data set of sequences"}),
        "sequence": ("sequence", np.arange(m), {**one, "long_name": "sequence a"}),
        "position": ("position", np.arange(s), {**one, "long_name": "token position i"}),
        "feature": ("feature", np.arange(cfg.token_dim), {**one, "long_name": "token feature"}),
        "token": ("token", np.arange(M), {**one, "long_name": "token (a, i) at index a s + i"}),
        "token2": ("token2", np.arange(M), {**one, "long_name": "token (b, j) at index b s + j"}),
        "width": ("width", list(cfg.widths), {**one, "long_name": "width n"}),
        "heads": ("heads", list(cfg.heads), {**one, "long_name": "number of heads H"}),
        "stack_heads": ("stack_heads", Hs, {**one, "long_name": "number of heads H (stack)"}),
        "projection": ("projection", list(PROJECTIONS), {**one, "long_name": "projection w of the outputs"}),
        "draw": ("draw", np.arange(parts[0]["mixing_finite"].shape[-1]), {**one, "long_name": "draw (network)"}),
    }
    attrs = {"paper": CITATION, "experiment": "kernel", "stack": list(STACK), "n_heads": cfg.n_heads,
             "law_width": cfg.law_width,
             "reference_width": cfg.reference_width, "reference_heads": cfg.reference_heads}
    return xr.Dataset(data, coords=coords, attrs=attrs)


def summarize(ds: xr.Dataset, cfg: KernelConfig):
    metrics, checks = {}, []
    n_max = int(ds.width.values[-1])
    H = cfg.n_heads
    for kind in ds.dataset.values:
        D = ds.sel(dataset=kind)
        K, Kse = D.kernel.values, D.kernel_se.values
        F, Fse = D.finite_cov.sel(width=n_max).values, D.finite_cov_se.sel(width=n_max).values
        z = _max_z(K, Kse, F, Fse)
        z_ctl = _max_z(D.kernel_linear.values, 0.0 * Kse, F, Fse)
        checks.append(Check(f"{kind}: one-layer kernel vs finite-width covariance, n = {n_max}, H = {H} "
                            "(largest entrywise |z|)", 0.0, z, Z_TOL,
                            basis="5 combined SEs per entry (finite-width Monte Carlo and QMC)",
                            control="the kernel at 1/n scaling (average pooling)", control_simulation=z_ctl))
        for n in ds.width.values:
            bias = np.abs(D.finite_cov.sel(width=n).values - K)
            metrics[f"{kind}_mean_abs_bias_n{int(n)}"] = float(bias.mean())
            metrics[f"{kind}_n_times_mean_abs_bias_n{int(n)}"] = float(int(n) * bias.mean())
            metrics[f"{kind}_mean_se_n{int(n)}"] = float(D.finite_cov_se.sel(width=n).values.mean())
        metrics[f"{kind}_max_z_n{n_max}"] = z
        metrics[f"{kind}_kernel_qmc_se_max"] = float(Kse.max())
        metrics[f"{kind}_kernel_vs_linear_max"] = float(np.abs(K - D.kernel_linear.values).max())
        # the joint law at every H has the kernel's covariance (E C does not depend on H)
        zl = max(_max_z(K, Kse, D.limit_cov.sel(heads=h).values, D.limit_cov_se.sel(heads=h).values)
                 for h in ds.heads.values)
        metrics[f"{kind}_limit_cov_vs_kernel_max_z"] = zl

        # the random kernel w^T C w in law, at every H: at width law_width, where the finite-width deviation (of
        # order 1/n in the CDF) is below the KS resolution; at the sweep's largest width it is a metric
        crit = float(ds.ks_crit)
        for h in ds.heads.values:
            ks, ctl = D.ks_mixing.sel(heads=h).values, D.ks_mixing_control.sel(heads=h).values
            other = int(ds.heads.values[-1] if h == ds.heads.values[0] else ds.heads.values[0])
            checks.append(Check(f"{kind}: random kernel w^T C w, n = {cfg.law_width} vs the joint law, H = {int(h)} "
                                "(largest two-sample KS over 4 projections)", 0.0, float(ks.max()), crit,
                                basis="KS critical value, level 0.001 (Bonferroni over the projections)",
                                control=f"the joint law with H = {other}", control_simulation=float(ctl.max())))
        metrics[f"{kind}_ks_mixing_n{n_max}_H{H}"] = float(D.ks_mixing_widest.values.max())
        for h in ds.heads.values:
            metrics[f"{kind}_ks_mixing_H{int(h)}"] = float(D.ks_mixing.sel(heads=h).values.max())
            metrics[f"{kind}_ks_output_H{int(h)}"] = float(D.ks_output.sel(heads=h).values.max())
            for p, name in enumerate(ds.projection.values):
                tag = name.replace(" ", "_")
                metrics[f"{kind}_kurtosis_limit_H{int(h)}_{tag}"] = float(D.kurtosis_limit.sel(heads=h).values[p])
        # the stack: the kernel against the 1/H extrapolation of the joint law; finite width against the joint law
        S, Sse = D.kernel_stack.values, D.kernel_stack_se.values
        E, Ese = D.stack_extrapolated.values, D.stack_extrapolated_se.values
        one = D.stack_limit_cov.sel(stack_heads=1)
        checks.append(Check(f"{kind}: stack kernel vs the joint law extrapolated to H = inf (a + b/H over H = "
                            f"{', '.join(map(str, cfg.stack_heads))}; largest entrywise |z|)", 0.0,
                            _max_z(S, Sse, E, Ese), Z_TOL,
                            basis=f"5 combined SEs per entry (fit and QMC), {int(D.stack_draws)} draws per H",
                            control="the joint law at H = 1 (no extrapolation)",
                            control_simulation=_max_z(S, Sse, one.values,
                                                      D.stack_limit_cov_se.sel(stack_heads=1).values)))
        L = D.stack_limit_cov.sel(stack_heads=H)
        Lse = D.stack_limit_cov_se.sel(stack_heads=H)
        Fs, Fsse = D.stack_finite_cov.values, D.stack_finite_cov_se.values
        checks.append(Check(f"{kind}: stack covariance, n = {n_max} vs the joint law at H = {H} (largest entrywise |z|)",
                            0.0, _max_z(L.values, Lse.values, Fs, Fsse), Z_TOL,
                            basis=f"5 combined SEs per entry (Monte Carlo of both), {int(D.stack_draws)} draws each",
                            control="the joint law at H = 1", control_simulation=_max_z(
                                one.values, D.stack_limit_cov_se.sel(stack_heads=1).values, Fs, Fsse)))
        metrics[f"{kind}_stack_kernel_vs_H{H}_max_abs"] = float(np.abs(S - L.values).max())
        metrics[f"{kind}_stack_kernel_vs_H1_max_abs"] = float(np.abs(S - one.values).max())
        # brute force against the exact sampler
        rc = float(ds.reference_ks_crit)
        checks.append(Check(f"{kind}: brute force vs exact sampler, n = {cfg.reference_width}, H = "
                            f"{cfg.reference_heads} (largest KS of w^T y over 4 projections)", 0.0,
                            float(D.reference_ks.values.max()), rc,
                            basis=f"KS critical value, level 0.001 over the projections, {cfg.n_reference} networks",
                            control="the exact sampler at 1/n scaling",
                            control_simulation=float(D.reference_ks_control.values.max())))
        checks.append(Check(f"{kind}: brute force, n = {cfg.reference_width} vs the joint law (n = inf) at H = "
                            f"{cfg.reference_heads} (largest KS of w^T y over 4 projections)", 0.0,
                            float(D.reference_law_ks.values.max()), float(ds.reference_law_ks_crit),
                            basis=f"KS critical value, level 0.001 over the projections, {cfg.n_reference} networks",
                            control="the joint law at 1/n scaling (average pooling)",
                            control_simulation=float(D.reference_law_ks_control.values.max())))
        zg = _max_z(D.reference_gram.values, D.reference_gram_se.values, D.reference_exact_gram.values,
                    D.reference_exact_gram_se.values)
        zg_ctl = _max_z(D.reference_gram.values, D.reference_gram_se.values, D.reference_control_gram.values,
                        D.reference_control_gram_se.values)
        checks.append(Check(f"{kind}: brute-force E[X X^T/n] vs exact E[C], n = {cfg.reference_width} (largest "
                            "entrywise |z|)", 0.0, zg, Z_TOL, basis="5 combined SEs per entry",
                            control="the exact sampler at 1/n scaling", control_simulation=zg_ctl))
    q = float(ds.single_quadrature)
    if math.isfinite(q):
        checks.append(Check(f"one sequence (Sigma = I, s = {cfg.n_tokens}): kernel K'_00 vs E y_0^2 by quadrature",
                            q, float(ds.single_kernel), 5 * float(ds.single_kernel_se),
                            basis="5 QMC standard errors", control="the ReLU inputs' constant",
                            control_theory=float(ds.single_relu_quadrature)))
    else:
        checks.append(Check.not_evaluated("one sequence: kernel K'_00 vs quadrature",
                                          "the quadrature supports n_tokens <= 5"))
    checks.append(Check("one sequence, H = 1: joint sampler's C_00 vs sample_limit_tokens' (two-sample KS)", 0.0,
                        float(ds.single_ks), float(ds.single_ks_crit), basis="KS critical value, level 0.001",
                        control="the joint sampler with H = 4", control_simulation=float(ds.single_ks_control)))
    metrics["single_kernel_00"] = float(ds.single_kernel)
    metrics["single_quadrature"] = q
    metrics["single_kernel_01"] = float(ds.single_kernel_offdiag)
    return metrics, checks


def finding(metrics: dict, cfg: KernelConfig) -> str:
    kind = cfg.datasets[0]
    n0, n1 = cfg.widths[0], cfg.widths[-1]
    k1 = metrics[f"{kind}_kurtosis_limit_H{cfg.heads[0]}_random"]
    k2 = metrics[f"{kind}_kurtosis_limit_H{cfg.heads[-1]}_random"]
    return (f"{kind} data: the attention kernel matches the finite-width covariance within "
            f"{metrics[f'{kind}_max_z_n{n1}']:.1f} SE at n = {n1}; mean |bias| "
            f"{metrics[f'{kind}_mean_abs_bias_n{n0}']:.1e} at n = {n0}, {metrics[f'{kind}_mean_abs_bias_n{n1}']:.1e} at "
            f"n = {n1} (Monte Carlo SE {metrics[f'{kind}_mean_se_n{n1}']:.1e}); excess kurtosis of a random projection "
            f"{k1:.3f} at H = {cfg.heads[0]}, {k2:.4f} at H = {cfg.heads[-1]}")


def _plot(ds, cfg):
    from attnlab.sakai.kernel_figures import plot

    return plot(ds, cfg)


register(Preset(
    name="sakai-kernel", paper="sakai", citation=CITATION, figure="beyond the paper",
    description="Infinite-head kernel of softmax attention at 1/sqrt(n) (QMC) for one layer and [attention, relu, "
                "attention] on Gaussian and planted-signal sequences vs finite-width networks; finite-H joint law",
    config_cls=KernelConfig, run=run, summarize=summarize, plot=_plot, finding=finding,
    defaults={},
    quick={"datasets": ("planted",), "n_networks": 4000, "n_limit": 4000, "n_stack": 1000, "n_points": 512,
           "n_replicates": 8, "reference_width": 32, "n_reference": 300, "heads": (1, 16), "stack_heads": (4, 16)}))
