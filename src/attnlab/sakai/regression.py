r"""``sakai-kernel-regression`` (beyond the paper): kernel ridge regression with the attention kernel on single-location
regression, against trained finite-width attention networks of growing width.

Task: the single-location regression (SLR) law of Marion et al. (:func:`attnlab.slr.data.sample_tokens`): s tokens
in R^d, one at a uniform location ``J0`` drawn from ``N(sqrt(d/2) k*, I/2)``, the others N(0, I_d), label
``y = u_{J0} . v* + eps xi``. Network: embedding ``U W_E/sqrt(d)``, one attention layer (H heads, width n,
1/sqrt(n) scaling, :mod:`attnlab.sakai.joint`), readout of each sequence's token mean ``f = w . mean_i y_i/sqrt(n)``.

* **Kernel regime, H -> inf (theory).** As n -> inf and then H -> inf the readout's features have the kernel
  ``k(a, b) = mean_{i,j} K'^{ab}_{ij}`` (:func:`attnlab.sakai.kernel.attention_blocks`, pooled); training the
  readout to convergence with ridge ``lambda`` (the minimiser that gradient descent with weight decay reaches) is
  kernel ridge regression, ``f(x) = k(x, X)(k(X, X) + lambda I)^{-1} y``. Its test error is computed on every QMC
  replicate of the kernel: the mean and its standard error.
* **Finite H (theory).** At finite H the n -> inf kernel is *random*: ``C(p)`` of the joint law, one draw per
  network (:func:`attnlab.sakai.joint.sample_joint_limit`, ``readout="mean"``). A trained readout of a wide network
  is kernel ridge regression with that random kernel, so its expected test error is
  ``E_p[err(C(p))]`` (Monte Carlo over the scores), not the error of the mean kernel; it approaches the H = inf
  error as the kernel concentrates (the difference is of order 1/H).
* **Readout-trained networks (simulation).** Width n, H heads: the exact features of n output coordinates
  (:func:`attnlab.sakai.joint.sample_network`, ``n_out = n``), the readout fitted by ridge regression on them
  (random features). Their test error differs from the n = inf value by O(1/n) (random-features ridge
  regression); it is extrapolated to n = inf by weighted least squares of ``a + b/n`` over the widths.
* **Fully trained networks (simulation, where the kernel regime does not apply).** All weights (embedding, the
  heads' Q, K, V, O, readout) trained by full-batch gradient descent on the squared loss from the same
  initialisation (the brute-force layer of :mod:`attnlab.sakai.reference`), at a few small widths: the features
  move, attention can learn to find the signal token, and the test error leaves the kernel's.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pydantic
import xarray as xr

from attnlab import programs
from attnlab.config import ExperimentConfig
from attnlab.registry import Check, Preset, mean_se, register
from attnlab.sakai.joint import sample_joint_limit, sample_network
from attnlab.sakai.kernel import attention_blocks, token_kernel
from attnlab.sakai.reference import _attention

__all__ = ["RegressionConfig", "slr_data", "krr_test_error", "attention_krr", "random_kernel_krr",
           "readout_trained", "train_network", "memory_bytes", "run", "summarize", "finding"]

CITATION = "Sakai, Karakida, Imaizumi, NeurIPS 2025 (arXiv:2506.00846)"
Z_TOL = 5.0


RIDGE_MIN = 1e-8
"""The smallest ridge of a config: see :attr:`RegressionConfig.ridge`."""
LEARNING_RATE_MAX = 2.0
"""The largest gradient-descent step of a config: see :attr:`RegressionConfig.learning_rate`."""


class RegressionConfig(ExperimentConfig):
    """Config of ``sakai-kernel-regression`` (field names are the ``--set`` keys)."""

    n_tokens: int = pydantic.Field(2, ge=2, description="sequence length s (SLR: L)")
    token_dim: int = pydantic.Field(8, ge=2, description="token dimension d")
    noise: float = pydantic.Field(0.1, ge=0.0, description="label noise eps")
    n_train: int = pydantic.Field(128, ge=4, description="training sequences")
    n_test: int = pydantic.Field(128, ge=4, description="test sequences")
    ridge: float = pydantic.Field(
        0.01, title="ridge lambda of the readout",
        description=f"ridge lambda of the readout, >= {RIDGE_MIN:g}: the kernel matrices are O(1) "
                                        "and singular (rank n < n_train for random features of width n), so K + "
                                        "lambda I has condition number up to |K|/lambda and below 1e-8 a float64 solve "
                                        "keeps fewer than half its digits (at 1e-300 the readout's test error was 2444)")
    widths: tuple[int, ...] = pydantic.Field((256, 512, 1024), description="widths n of the readout-trained networks")
    heads: tuple[int, ...] = pydantic.Field((1, 16), description="heads H of the readout-trained networks")
    limit_heads: tuple[int, ...] = pydantic.Field((64, 128, 256), description="heads H of the random kernel's 1/H "
                                                                              "extrapolation to H = inf")
    n_networks: int = pydantic.Field(200, ge=4, description="networks per (n, H) and random-kernel draws per H")
    n_points: int = pydantic.Field(512, ge=2, description="scrambled Sobol points per replicate (a power of 2)")
    n_replicates: int = pydantic.Field(8, ge=2, description="randomised-QMC replicates")
    train_widths: tuple[int, ...] = pydantic.Field((16, 32, 64), description="widths of the fully trained networks")
    train_heads: int = pydantic.Field(2, ge=1, description="heads of the fully trained networks")
    train_steps: int = pydantic.Field(300, ge=1, description="full-batch gradient steps")
    learning_rate: float = pydantic.Field(
        0.5, gt=0.0, le=LEARNING_RATE_MAX, title="gradient-descent step size",
        description=f"gradient-descent step size, in (0, {LEARNING_RATE_MAX:g}]: full-batch gradient descent is "
                    "stable below 2 over the loss's largest curvature, of order 1 for standard normal weights with "
                    "the 1/sqrt(n) scalings (at the quick sizes steps of 4 overshoot and 8 diverge to NaN)")
    n_trained: int = pydantic.Field(4, ge=2, description="fully trained networks per width (initialisations)")

    @pydantic.field_validator("ridge")
    @classmethod
    def _ridge(cls, v):
        if not v >= RIDGE_MIN:
            raise ValueError(f"ridge must be >= {RIDGE_MIN:g} (a float64 solve of K + ridge I keeps half its digits)")
        return v

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        for name in ("widths", "heads", "limit_heads", "train_widths"):
            values = getattr(self, name)
            if not values or any(int(x) < 1 for x in values) or list(values) != sorted(set(values)):
                raise ValueError(f"{name} must be a non-empty increasing list of integers >= 1; got {values!r}")
        M = (self.n_train + self.n_test) * self.n_tokens
        if min(self.widths) < self.token_dim or len(self.widths) < 2 or len(self.limit_heads) < 2:
            raise ValueError(f"two widths (each >= token_dim) and two limit_heads are needed; M = {M}")
        if self.n_points & (self.n_points - 1):
            raise ValueError(f"n_points must be a power of 2; got {self.n_points}")
        return self


def slr_data(key, n_train: int, n_test: int, s: int, d: int, noise: float):
    """Training and test SLR sequences and labels: ``(U_train, y_train, U_test, y_test)`` (one teacher)."""
    from attnlab.slr.data import sample_teacher, sample_tokens

    kt, ka, kb = jax.random.split(key, 3)
    k_star, v_star = sample_teacher(kt, d)
    out = []
    for k, m in ((ka, n_train), (kb, n_test)):
        b = sample_tokens(k, k_star, v_star, m, s, math.sqrt(0.5), noise, math.sqrt(d / 2.0))
        out += [np.asarray(b.X), np.asarray(b.y)]
    return tuple(out)


def krr_test_error(K_train, K_cross, y_train, y_test, ridge: float) -> np.ndarray:
    """Test mean squared error of kernel ridge regression, batched: ``K_train`` (..., n, n), ``K_cross`` (..., t, n)
    (test against training points); ``f = K_cross (K_train + ridge I)^{-1} y_train``."""
    K_train, K_cross = np.asarray(K_train), np.asarray(K_cross)
    A = K_train + ridge * np.eye(K_train.shape[-1])
    alpha = np.linalg.solve(A, np.broadcast_to(y_train, K_train.shape[:-1])[..., None])[..., 0]
    pred = np.einsum("...tn,...n->...t", K_cross, alpha)
    return np.mean((pred - y_test) ** 2, -1)


def attention_krr(key, U_train, U_test, y_train, y_test, ridge: float, *, n_points: int, n_replicates: int,
                  scaling: str = "sqrt"):
    """Test error of kernel ridge regression with the pooled attention kernel (H -> inf), one per QMC replicate (R,)
    (``scaling="linear"``: the 1/n-scaling kernel, exact: one value)."""
    mt, s = U_train.shape[0], U_train.shape[1]
    K0 = token_kernel(np.concatenate([U_train, U_test]))
    m = K0.shape[0] // s
    if scaling == "linear":
        B = K0.reshape(m, s, m, s).mean((1, 3))
        return krr_test_error(B[:mt, :mt], B[mt:, :mt], y_train, y_test, ridge)[None]
    ia, ib = np.triu_indices(mt)
    ta, tb = np.meshgrid(np.arange(mt, m), np.arange(mt), indexing="ij")
    blocks = attention_blocks(K0, np.concatenate([ia, ta.ravel()]), np.concatenate([ib, tb.ravel()]), key=key,
                              n_tokens=s, n_points=n_points, n_replicates=n_replicates).mean((-1, -2))
    R = blocks.shape[0]
    Ktr = np.empty((R, mt, mt))
    Ktr[:, ia, ib] = blocks[:, :ia.size]
    Ktr[:, ib, ia] = blocks[:, :ia.size]
    Kte = blocks[:, ia.size:].reshape(R, m - mt, mt)
    return krr_test_error(Ktr, Kte, y_train, y_test, ridge)


def random_kernel_krr(key, U_train, U_test, y_train, y_test, ridge: float, *, n_heads: int, n_samples: int,
                      max_heads: int | None = None):
    """Test errors (n_samples,) of kernel ridge regression with the random n = inf kernel ``C(p)`` of H heads (one
    draw of the joint law's scores each)."""
    mt, s = U_train.shape[0], U_train.shape[1]
    K0 = token_kernel(np.concatenate([U_train, U_test]))
    _, C = sample_joint_limit(key, K0, n_tokens=s, n_heads=n_heads, n_samples=n_samples, readout="mean",
                              max_heads=max_heads, chunk=8)
    C = np.asarray(C)
    return krr_test_error(C[:, :mt, :mt], C[:, mt:, :mt], y_train, y_test, ridge)


def readout_trained(key, U_train, U_test, y_train, y_test, ridge: float, *, widths, n_heads: int, n_networks: int,
                    max_heads: int | None = None, batch: int = 32):
    """Test errors (len(widths), n_networks) of width-n networks with H heads whose readout is trained by ridge
    regression on the exact features of their n output coordinates (the first n of ``max(widths)`` columns drawn
    at width n: the columns are iid given the heads, so any n of them are the width-n network's)."""
    mt = U_train.shape[0]
    U = np.concatenate([U_train, U_test])
    n_max = max(widths)
    out = np.empty((len(widths), n_networks))
    for w, n in enumerate(widths):
        done = 0
        while done < n_networks:
            k = jax.random.fold_in(jax.random.fold_in(key, w), done)
            Y, _ = sample_network(k, U, n=n, n_heads=n_heads, n_samples=batch, n_out=n_max, readout="mean",
                                  max_heads=max_heads, chunk=1)
            Phi = np.asarray(Y)[:, :, 0, :n]  # (batch, m, n): features of the n output coordinates
            K = Phi @ np.swapaxes(Phi, -1, -2) / n
            take = min(batch, n_networks - done)
            out[w, done:done + take] = krr_test_error(K[:take, :mt, :mt], K[:take, mt:, :mt], y_train, y_test,
                                                      ridge)
            done += take
    return out


def _init(key, d: int, n: int, H: int):
    ks = jax.random.split(key, 3)
    return {"E": jax.random.normal(ks[0], (d, n)), "W": jax.random.normal(ks[1], (4, H, n, n)),
            "w": jax.random.normal(ks[2], (n,))}


def _predict(params, U, n: int, H: int):
    """The network: embedding, one attention layer (:func:`attnlab.sakai.reference._attention`), readout of the
    token mean; all weights standard normal with the explicit scalings of Algorithm 1."""
    X = U @ params["E"] / math.sqrt(U.shape[-1])
    W = params["W"]
    Y = _attention(X, W[0], W[1], W[2], W[3], n, n, H)
    return Y.mean(-2) @ params["w"] / math.sqrt(n)


@functools.partial(programs.jit, static_argnums=(5, 6, 7))
def _train(key, U_train, y_train, U_test, y_test, n: int, H: int, steps: int, lr):
    params = _init(key, U_train.shape[-1], n, H)
    loss = lambda p: 0.5 * jnp.mean((_predict(p, U_train, n, H) - y_train) ** 2)  # noqa: E731
    test = lambda p: jnp.mean((_predict(p, U_test, n, H) - y_test) ** 2)  # noqa: E731
    grad = jax.grad(loss)  # gradient descent on every weight

    def step(p, _):
        g = grad(p)
        p = jax.tree.map(lambda a, b: a - lr * b, p, g)
        return p, (2 * loss(p), test(p))

    p0 = params
    _, (train_curve, test_curve) = jax.lax.scan(step, p0, None, length=steps)
    return jnp.concatenate([2 * loss(p0)[None], train_curve]), jnp.concatenate([test(p0)[None], test_curve])


def train_network(key, U_train, y_train, U_test, y_test, *, n: int, n_heads: int, steps: int, learning_rate: float):
    """Full-batch gradient descent on every weight of a width-n network with H heads (squared loss), from a standard
    normal initialisation: the training and test mean squared errors after each step, each (steps + 1,)."""
    return tuple(np.asarray(a) for a in _train(key, jnp.asarray(U_train), jnp.asarray(y_train), jnp.asarray(U_test),
                                                jnp.asarray(y_test), n, n_heads, steps, learning_rate))


def _fit_inverse(x, means, ses):
    """Weighted least squares of ``a + b/x``: (a, its SE)."""
    t = 1.0 / np.asarray(x, float)
    w = 1.0 / np.asarray(ses) ** 2
    A = np.stack([np.ones_like(t), t], 1)
    cov = np.linalg.inv(A.T @ (w[:, None] * A))
    a = cov @ A.T @ (w * np.asarray(means))
    return float(a[0]), float(math.sqrt(cov[0, 0]))


def run(cfg: RegressionConfig, key, progress=None) -> xr.Dataset:
    kd, kk, kr, kn, kt = jax.random.split(key, 5)
    s, d = cfg.n_tokens, cfg.token_dim
    Utr, ytr, Ute, yte = slr_data(kd, cfg.n_train, cfg.n_test, s, d, cfg.noise)
    tick = (lambda i: progress(i, 4)) if progress is not None else (lambda i: None)
    data_args = (Utr, Ute, ytr, yte, cfg.ridge)
    krr = attention_krr(kk, *data_args, n_points=cfg.n_points, n_replicates=cfg.n_replicates)
    krr_lin = attention_krr(kk, *data_args, n_points=cfg.n_points, n_replicates=cfg.n_replicates, scaling="linear")
    tick(1)
    heads = sorted(set(cfg.heads) | set(cfg.limit_heads))
    rand = np.stack([random_kernel_krr(jax.random.fold_in(kr, i), *data_args, n_heads=H, n_samples=cfg.n_networks,
                                       max_heads=max(cfg.heads) if H <= max(cfg.heads) else max(cfg.limit_heads))
                     for i, H in enumerate(heads)])
    tick(2)
    ro = np.stack([readout_trained(jax.random.fold_in(kn, i), *data_args, widths=cfg.widths, n_heads=H,
                                   n_networks=cfg.n_networks, max_heads=max(cfg.heads)) for i, H in enumerate(cfg.heads)])
    tick(3)
    curves_train, curves_test = [], []
    for w, n in enumerate(cfg.train_widths):
        tr, te = zip(*[train_network(jax.random.fold_in(jax.random.fold_in(kt, w), i), Utr, ytr, Ute, yte, n=n,
                                     n_heads=cfg.train_heads, steps=cfg.train_steps,
                                     learning_rate=cfg.learning_rate) for i in range(cfg.n_trained)])
        curves_train.append(np.stack(tr))
        curves_test.append(np.stack(te))
    tick(4)
    one = {"units": "1"}
    mse = {"units": "1", "long_name": "test mean squared error"}
    coords = {
        "replicate": ("replicate", np.arange(krr.size), {**one, "long_name": "randomised-QMC replicate"}),
        "heads": ("heads", list(cfg.heads), {**one, "long_name": "number of heads H (readout-trained)"}),
        "kernel_heads": ("kernel_heads", heads, {**one, "long_name": "number of heads H (random kernel)"}),
        "width": ("width", list(cfg.widths), {**one, "long_name": "width n (readout-trained networks)"}),
        "network": ("network", np.arange(cfg.n_networks), {**one, "long_name": "network (or draw of the scores)"}),
        "train_width": ("train_width", list(cfg.train_widths), {**one, "long_name": "width n (fully trained)"}),
        "init": ("init", np.arange(cfg.n_trained), {**one, "long_name": "initialisation"}),
        "step": ("step", np.arange(cfg.train_steps + 1), {**one, "long_name": "gradient step"}),
    }
    data = {
        "krr_error": (("replicate",), krr, {**mse, "long_name": "KRR test MSE, attention kernel (H -> inf), per "
                                                                 "QMC replicate"}),
        "krr_error_linear": ((), float(krr_lin[0]), {**mse, "long_name": "KRR test MSE, 1/n-scaling kernel "
                                                                          "(control)"}),
        "random_kernel_error": (("kernel_heads", "network"), rand, {**mse, "long_name": "KRR test MSE with the random "
                                                                                  "kernel C(p) of H heads (n = inf)"}),
        "readout_error": (("heads", "width", "network"), ro, {**mse, "long_name": "test MSE of readout-trained "
                                                                                  "width-n networks"}),
        "trained_train_curve": (("train_width", "init", "step"), np.stack(curves_train),
                                {**mse, "long_name": "training MSE of fully trained networks"}),
        "trained_test_curve": (("train_width", "init", "step"), np.stack(curves_test),
                               {**mse, "long_name": "test MSE of fully trained networks"}),
        "label_variance": ((), float(np.var(yte)), {**mse, "long_name": "variance of the test labels"}),
        "noise_floor": ((), cfg.noise**2, {**mse, "long_name": "Bayes error eps^2"}),
    }
    attrs = {"paper": CITATION, "experiment": "kernel-regression", "ridge": cfg.ridge,
             "train_heads": cfg.train_heads}
    return xr.Dataset(data, coords=coords, attrs=attrs)


def summarize(ds: xr.Dataset, cfg: RegressionConfig):
    metrics = {}
    krr, krr_se = mean_se(ds.krr_error.values)
    metrics.update(krr_error=krr, krr_error_se=krr_se, krr_error_linear=float(ds.krr_error_linear),
                   label_variance=float(ds.label_variance), noise_floor=float(ds.noise_floor))
    checks = []
    widths = [int(n) for n in ds.width.values]
    rk = {int(H): mean_se(ds.random_kernel_error.sel(kernel_heads=H).values) for H in ds.kernel_heads.values}
    for H, (a, b) in rk.items():
        metrics[f"random_kernel_error_H{H}"], metrics[f"random_kernel_error_se_H{H}"] = a, b
    for H in ds.heads.values:
        H = int(H)
        ms = [mean_se(ds.readout_error.sel(heads=H, width=n).values) for n in widths]
        for n, (a, b) in zip(widths, ms):
            metrics[f"readout_error_H{H}_n{n}"], metrics[f"readout_error_se_H{H}_n{n}"] = a, b
        ext, ext_se = _fit_inverse(widths, [a for a, _ in ms], [b for _, b in ms])
        metrics[f"readout_error_extrapolated_H{H}"], metrics[f"readout_error_extrapolated_se_H{H}"] = ext, ext_se
        checks.append(Check(f"readout-trained networks, H = {H} (n -> inf by a + b/n over n = "
                            f"{', '.join(map(str, widths))}) vs the random-kernel prediction E_p err(C(p))", rk[H][0],
                            ext, Z_TOL * math.hypot(rk[H][1], ext_se), basis="5 combined SEs (fit and Monte Carlo)",
                            control="the kernel regime's error (the H -> inf kernel)", control_theory=krr))
    hs = [int(h) for h in cfg.limit_heads]
    ext_h, ext_h_se = _fit_inverse(hs, [rk[h][0] for h in hs], [rk[h][1] for h in hs])
    metrics["random_kernel_error_extrapolated"], metrics["random_kernel_error_extrapolated_se"] = ext_h, ext_h_se
    h0 = int(ds.kernel_heads.values[0])
    checks.append(Check(f"random-kernel prediction extrapolated to H = inf (a + b/H over H = {', '.join(map(str, hs))}) "
                        "vs kernel ridge regression with the attention kernel", krr, ext_h,
                        Z_TOL * math.hypot(krr_se, ext_h_se), basis="5 combined SEs (QMC replicates and fit)",
                        control=f"the random-kernel prediction at H = {h0} (no extrapolation)",
                        control_simulation=rk[h0][0]))
    final = ds.trained_test_curve.isel(step=-1)
    for n in ds.train_width.values:
        a, b = mean_se(final.sel(train_width=n).values)
        metrics[f"trained_test_error_n{int(n)}"], metrics[f"trained_test_error_se_n{int(n)}"] = a, b
        metrics[f"trained_train_error_n{int(n)}"] = float(ds.trained_train_curve.isel(step=-1)
                                                          .sel(train_width=n).mean())
    return metrics, checks


def finding(metrics: dict, cfg: RegressionConfig) -> str:
    H0, H1 = cfg.heads[0], cfg.heads[-1]
    n = cfg.widths[-1]
    best = min(metrics[f"trained_test_error_n{w}"] for w in cfg.train_widths)
    return (f"kernel ridge regression with the attention kernel: test MSE {metrics['krr_error']:.4f}; readout-trained "
            f"networks at n = {n}: {metrics[f'readout_error_H{H1}_n{n}']:.4f} (H = {H1}), "
            f"{metrics[f'readout_error_H{H0}_n{n}']:.4f} (H = {H0}, random kernel: "
            f"{metrics[f'random_kernel_error_H{H0}']:.4f}); fully trained: {best:.4f} (label variance "
            f"{metrics['label_variance']:.3f})")


def memory_bytes(cfg: RegressionConfig) -> float:
    """Upper bound of the bytes of a run: the token kernel and the QMC blocks, the pooled covariances of the draws,
    a batch of networks' features (25 networks, m x max(n)), the fully trained networks' weights and gradients."""
    m = cfg.n_train + cfg.n_test
    M = m * cfg.n_tokens
    pairs = cfg.n_train * (cfg.n_train + 1) / 2 + cfg.n_test * cfg.n_train
    qmc = cfg.n_replicates * pairs * cfg.n_tokens**2 + cfg.n_replicates * cfg.n_points * 4 * cfg.n_tokens**2 * 4
    draws = 2.0 * cfg.n_networks * m * m + 25.0 * m * max(cfg.widths) * 3 + 8.0 * M * M
    n_t = max(cfg.train_widths)
    trained = 12.0 * cfg.train_heads * n_t * n_t + 8.0 * m * cfg.n_tokens * n_t * cfg.train_heads
    return 2.0 * 8.0 * (M * M + qmc + draws + trained) + 64.0 * 2**20


def _plot(ds, cfg):
    from attnlab.sakai.kernel_figures import plot_regression

    return {"regression": plot_regression(ds, cfg)}


register(Preset(
    name="sakai-kernel-regression", paper="sakai", citation=CITATION, figure="beyond the paper",
    description="Kernel ridge regression with the attention kernel on single-location regression vs readout-trained "
                "networks of growing width (random kernel at finite H) and fully trained networks",
    config_cls=RegressionConfig, run=run, summarize=summarize, plot=_plot, finding=finding,
    defaults={},
    # quick: H = 4 rather than 16 (the random kernel's distance to the kernel regime, the check's control, is of order
    # 1/H, which the quick size's networks resolve at H = 4 whatever the seed, not at H = 16)
    quick={"n_train": 48, "n_test": 64, "widths": (64, 128, 256), "heads": (1, 4), "n_networks": 96, "n_points": 256,
           "n_replicates": 6, "train_widths": (32,), "train_steps": 150, "n_trained": 2}))
