"""The preset ``icl-lsa``, registered with attnlab through the entry point ``icl`` of the group ``attnlab.presets``.

Gradient descent on the LSA layer's Gamma (:mod:`attnlab_icl.lsa`) from a small initialisation, at several prompt
lengths n, against the closed forms. Two checks per prompt length, each with its negative control:

* **the trained layer is one step of preconditioned GD**: ||mean over seeds of Gamma_T - Gamma*||_F / ||Gamma*||_F
  against 0 (Gamma_T: each run's average of its iterates over the last half), within 5 standard errors of that mean
  (the seeds' spread) plus the distance of population gradient descent, averaged alike (closed form); control: the
  same distance to plain one-step GD, eta* I;
* **in-context risk**: the mean squared error of the trained layers on fresh prompts against R*(n), within 5
  standard errors over seeds plus their exact excess risk R(Gamma_T) - R*(n) (closed form, averaged over seeds);
  control: the optimum's risk at twice the prompt length, R*(2n).
"""

from __future__ import annotations

import jax
import numpy as np
import xarray as xr
from pydantic import Field

from attnlab.extend import (
    SIMULATION,
    THEORY,
    Check,
    ExperimentConfig,
    Preset,
    mean_se,
    panels,
    paper_figure,
    register,
    sparse,
)
from attnlab_icl import lsa

CITATION = "Zhang, Frei, Bartlett (JMLR 2024); Ahn et al. (NeurIPS 2023)"


class LSAConfig(ExperimentConfig):
    d: int = Field(8, ge=1, le=256, description="input dimension d")
    condition: float = Field(5.0, ge=1.0, le=100.0, description="condition number of the input covariance Sigma")
    prompt_lengths: tuple[int, ...] = Field((8, 16, 32, 64, 128), min_length=1,
                                            description="prompt lengths n (examples per prompt) to train at")
    n_seeds: int = Field(16, ge=2, le=4096, description="independent training runs per prompt length")
    steps: int = Field(2000, ge=1, le=10**6, description="gradient steps T on Gamma")
    batch: int = Field(128, ge=1, le=10**5, description="fresh prompts per gradient step")
    lr: float = Field(0.4, gt=0, lt=1.0, description="step eta as a fraction of 1 / (2 lambda_max M_max), the "
                                                       "stability limit of population gradient descent")
    gamma0: float = Field(1e-3, ge=0, le=1.0, description="initial Gamma_0 = gamma0 I (small initialisation)")
    n_test: int = Field(8192, ge=2, le=10**7, description="fresh test prompts per trained layer")


def run(config: LSAConfig, key, progress=None) -> xr.Dataset:
    """Train Gamma at each prompt length (``n_seeds`` runs, vmapped) and evaluate the trained layers; with the
    closed forms at the same points and on a fine grid of prompt lengths."""
    lam, ns = lsa.spectrum(config.d, config.condition), list(config.prompt_lengths)
    gammas, mc, eta, residual = [], [], [], []
    for i, n in enumerate(ns):
        step = config.lr / (2 * lam.max() * lsa.moment_matrix(lam, n).max())
        k_train, k_test = jax.random.split(jax.random.fold_in(key, n))
        g = lsa.train(jax.random.split(k_train, config.n_seeds), lam, n=n, steps=config.steps,
                      batch=config.batch, eta=step, gamma0=config.gamma0)
        mc.append(np.asarray(lsa.mc_risk(jax.random.split(k_test, config.n_seeds), g, lam, n=n, size=config.n_test)))
        gammas.append(np.asarray(g))
        star = lsa.optimal_gamma(lam, n)
        gd = lsa.population_gd(lam, n, step, config.steps, config.gamma0)
        residual.append(np.linalg.norm(gd - star) / np.linalg.norm(star))
        eta.append(step)
        if progress is not None:
            progress(i + 1, len(ns))
    grid = np.unique(np.geomspace(min(ns) / 2, max(ns) * 2, 60).round(2))
    one = {"units": "1"}
    return xr.Dataset(
        {"gamma": (("n", "seed", "k", "l"), np.stack(gammas), {**one, "long_name": "trained Gamma_T"}),
         "mc_risk": (("n", "seed"), np.stack(mc), {**one, "long_name": "test mean squared error"}),
         "exact_risk": (("n", "seed"), np.stack([lsa.risk(g, lam, n) for g, n in zip(gammas, ns)]),
                        {**one, "long_name": "R(Gamma_T), closed form"}),
         "optimal_gamma": (("n", "k"), np.stack([lsa.optimal_gamma(lam, n) for n in ns]),
                           {**one, "long_name": "diagonal of Gamma*"}),
         "optimal_risk": ("n", lsa.optimal_risk(lam, ns), {**one, "long_name": "R*(n)"}),
         "plain_eta": ("n", lsa.plain_gd_eta(lam, ns), {**one, "long_name": "eta* of plain one-step GD"}),
         "gd_residual": ("n", np.array(residual), {**one, "long_name": "relative distance of population GD"}),
         "step": ("n", np.array(eta), {**one, "long_name": "gradient step eta"}),
         "lambda": ("k", lam, {**one, "long_name": "eigenvalues of Sigma"}),
         "risk_grid": ("n_grid", lsa.optimal_risk(lam, grid), {**one, "long_name": "R*(n)"}),
         "plain_risk_grid": ("n_grid", [lsa.risk(lsa.plain_gd_eta(lam, m) * np.eye(lam.size), lam, m) for m in grid],
                             {**one, "long_name": "risk of plain one-step GD"})},
        coords={"n": ("n", ns, {**one, "long_name": "prompt length n"}),
                "seed": ("seed", np.arange(config.n_seeds), {**one, "long_name": "training run"}),
                "k": ("k", np.arange(config.d), {**one, "long_name": "eigen-direction of Sigma (row)"}),
                "l": ("l", np.arange(config.d), {**one, "long_name": "eigen-direction of Sigma (column)"}),
                "n_grid": ("n_grid", grid, {**one, "long_name": "prompt length n"})})


def summarize(ds: xr.Dataset, config: LSAConfig):
    """Per prompt length, the two checks of the module doc, and the metrics."""
    metrics, checks = {}, []
    for n in ds.n.values:
        at = ds.sel(n=n)
        g, star = at.gamma.values, np.diag(at.optimal_gamma.values)
        scale, mean = np.linalg.norm(star), g.mean(axis=0)
        se = np.sqrt(np.sum(g.var(axis=0, ddof=1)) / g.shape[0]) / scale
        distance = np.linalg.norm(mean - star) / scale
        checks.append(Check.where_finite(
            f"n = {n}: trained Gamma = Gamma* (relative Frobenius distance)", theory=0.0, simulation=distance,
            tolerance=5 * se + float(at.gd_residual),
            basis="5 SE over seeds + distance of population GD after T steps (closed form)",
            control="plain one-step GD, eta* I, instead of Gamma*",
            control_simulation=np.linalg.norm(mean - float(at.plain_eta) * np.eye(star.shape[0])) / scale))
        risk, risk_se = mean_se(at.mc_risk.values)
        excess = float(np.mean(at.exact_risk.values - at.optimal_risk.values))
        checks.append(Check.where_finite(
            f"n = {n}: test risk of the trained layer = R*(n)", theory=float(at.optimal_risk), simulation=risk,
            tolerance=5 * risk_se + excess, basis="5 SE over seeds + mean excess R(Gamma_T) - R*(n) (closed form)",
            control="R*(2n), the optimum at twice the prompt length",
            control_theory=float(lsa.optimal_risk(ds["lambda"].values, 2 * n))))
        metrics[f"risk_n{n}"], metrics[f"gamma_distance_n{n}"] = risk, distance
    return metrics, checks


@paper_figure
def plot(ds: xr.Dataset, config: LSAConfig):
    """(a) in-context risk against n: R*(n), plain one-step GD, and the trained layers; (b) the diagonal of the
    trained Gamma at the longest prompt against Gamma* (open diamonds for fewer than five eigenvalues) and eta* I."""
    fig, (a, b) = panels(2)
    a.plot(ds.n_grid, ds.risk_grid, **THEORY, label=r"$\mathcal{R}^*(n)$, $\Gamma^*$")
    a.plot(ds.n_grid, ds.plain_risk_grid, color="0.5", linestyle=":", label=r"plain GD, $\eta^* I$")
    mean, se = ds.mc_risk.mean("seed"), ds.mc_risk.std("seed") / np.sqrt(ds.sizes["seed"])
    a.errorbar(ds.n, mean, yerr=2 * se, **SIMULATION, label="trained LSA")
    a.set(xscale="log", yscale="log", xlabel=r"prompt length $n$", ylabel=r"risk $\mathbb{E}(\hat y - y_q)^2$")
    a.legend()
    last = ds.isel(n=-1)
    diag = np.diagonal(last.gamma.values, axis1=1, axis2=2)
    b.plot(last["lambda"], last.optimal_gamma, **sparse(THEORY, last.sizes["k"]), label=r"$\Gamma^*_{kk}$")
    b.axhline(float(last.plain_eta), color="0.5", linestyle=":", label=r"$\eta^*$")
    b.errorbar(last["lambda"], diag.mean(0), yerr=2 * diag.std(0, ddof=1) / np.sqrt(diag.shape[0]), **SIMULATION,
               label=r"trained $\Gamma_{kk}$")
    b.set(xlabel=r"eigenvalue $\lambda_k$ of $\Sigma$", ylabel=r"$\Gamma_{kk}$", title=f"$n = {int(last.n)}$")
    b.legend()
    return {"risk": fig}


def finding(metrics, config: LSAConfig) -> str:
    n = max(config.prompt_lengths)
    return (f"gradient descent from small Gamma_0 reaches the preconditioner Gamma* within "
            f"{metrics[f'gamma_distance_n{n}']:.2g} (relative) at n = {n}, and the trained layer's risk follows "
            f"R*(n) over n = {', '.join(map(str, config.prompt_lengths))}")


register(Preset(
    name="icl-lsa", paper="icl", citation=CITATION, figure="ZFB Thm. 4.1",
    description="One linear self-attention layer trained on in-context linear regression reaches one step of "
                "preconditioned GD, Gamma* = ((1 + 1/n) Sigma + tr(Sigma)/n I)^-1, with in-context risk R*(n).",
    config_cls=LSAConfig, run=run, summarize=summarize, plot=plot, finding=finding,
    quick={"prompt_lengths": (8, 16, 32), "n_seeds": 8, "steps": 600, "n_test": 4096}))
