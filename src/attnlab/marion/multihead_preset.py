r"""The preset ``marion-toy-multihead``: two erf-attention heads trained by projected SGD on two signal tokens, the toy
multi-head experiment of Marion, Berthier, Biau, Boyer (ICLR 2025), App. E.3; config, run, summary and finding. The
model, its closed-form risk and its exact reduced chain are in :mod:`attnlab.marion.multihead`, the figure in
:mod:`attnlab.marion.multihead_figures`.

**Experiment** (App. E.3). ``d = 80``, ``L = 10`` (tokens 1 and 2 carry ``s k*_1 + gamma z_1`` and
``s k*_2 + gamma z_2``), ``gamma^2 = 1/2``, ``eps = 0.1``; heads ``(k_1, v_1, k_2, v_2)`` uniform on the sphere;
projected SGD with batch 5 and step size ``1e-3`` for 100 000 updates; ``lambda_t = 2 / (1 + 2e-4 min(t, 25 000))``
(``lambda = 1/3`` for the last 75 000 updates); 20 runs; a test set of 1000 sequences per run; logs every 1000
updates of the excess risk ``E(T - y)^2 - eps^2`` and of the absolute alignments ``kappa_hj = |k_h . k*_j|``,
``nu_hj = |v_h . v*_j|``.

**Simulation.** Every run is the exact reduced chain on the Gram matrix of the eight vectors
(:func:`attnlab.marion.multihead.run_reduced`), ``lax.scan`` over updates, ``vmap`` over runs, float64. With
``paired`` (default), both signal-noise laws are simulated on the same draws (initialisations, teachers, batches, test
sets; the shared law uses ``z_1`` for both tokens): the dimension ``noise`` holds ``independent`` and ``shared``.
The logged excess risk is the closed form (:func:`attnlab.marion.multihead.population_excess_risk`), next to the
held-out estimate of the notebook (``test_excess_risk``).

**The official notebook's defects, each a switch** (``official=true`` sets the notebook's choice for every switch not
given explicitly; the default is the corrected experiment):

================================  ===================  ==============================================================
switch                            notebook / default   what it changes
================================  ===================  ==============================================================
``shared_signal_noise``           true / false         both signal tokens share one noise draw z (one PRNG key), so
                                                       y = gamma z . (v*_1 + v*_2) is readable from either token
``notebook_logging``              true / false         logs after updates 1, K + 1, ... (never the initial state nor
                                                       the last K - 1 updates) instead of at 0, K, ..., n_steps
``matching``                      head1 / best         matched curves "h = 1, 2" from head 1's larger alignment only,
                                                       instead of the better of the two assignments
================================  ===================  ==============================================================

``shared_signal_noise`` picks the law of the finding's headline and of the figure's emphasis; with ``paired`` the
other law runs alongside, so the finding states what the correction changes on the same draws.

**Classes of runs** (:func:`attnlab.marion.multihead.classify`, thresholds ``align_threshold`` and ``dominance``):
specialised (one head per direction), collapsed (both heads on one ``k*_j``), mixed, failed; with these thresholds the
notebook's printed table splits into 5 specialised, 10 collapsed, 1 mixed and 4 failed runs.

**Checks** (tolerance 5 standard errors, or a stated float64 bound; each with a negative control):

* the reduced chain against the full-vector update in R^d: the mean of ``sum |u . t|^2`` over students u and
  teachers t after one update from the final state of run 0 (both drawn ``n_onestep`` times, at the larger step size
  ``onestep_step_size`` so that the components outside the frame matter); control: the chain without them;
* the sphere constraint of those full-vector updates (round-off bound); control: the norm of the projected step
  before normalisation;
* the closed-form risk against Monte Carlo in R^d at every run's final state (mean over runs and laws); control: each
  state's closed form under the other signal-noise law;
* the closed-form risk against the held-out estimate at the last log (mean over runs and laws, SE over runs);
  control: the closed form at the first log;
* the frozen erf scale: lambda at the last log against ``lambda0 / (1 + rate cap)``; control: Part A's uncapped
  schedule ``lambda0 / (1 + 1e-4 t)``;
* (``paired``) shared noise makes every head's value vector read ``v*_1 + v*_2``: the mean over the shared law's
  heads of ``|nu_own| - |nu_other|`` (own: the direction of the head's larger ``|kappa|``) is 0; control: the same
  under independent noises, on the same draws;
* (the notebook's sizes and a shared-noise arm) the notebook's printed final ``kappa`` table: the mean aligned
  ``kappa`` of collapsed and of specialised runs against the table's, 5 SE of the difference of the two means;
  control: the classification of a deliberately permuted run (head 2's directions swapped, which turns specialised
  runs into collapsed ones and back).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import pydantic
import xarray as xr

from attnlab import programs
from attnlab._random import fold_in, split
from attnlab.config import ExperimentConfig
from attnlab.marion import multihead as mh
from attnlab.marion.predictors import LAMBDA_MAX
from attnlab.registry import Check, mean_se

__all__ = ["CITATION", "NOTEBOOK_KAPPA", "NOTEBOOK_SETTINGS", "SWITCHES", "ToyMultiheadConfig", "run", "summarize",
           "finding", "notebook_classes"]

CITATION = "Marion, Berthier, Biau, Boyer, ICLR 2025"
J = H = 2
N_VEC = 2 * J + 2 * H

NOTEBOOK_KAPPA = np.array([
    [.5044, .0581, .0648, .4661], [.7596, .0390, .7546, .0055], [.0767, .4606, .5458, .0446],
    [.7542, .0173, .7635, .0029], [.0941, .0541, .0029, .0302], [.7453, .0143, .7372, .0034],
    [.7251, .0930, .7647, .0109], [.0297, .7597, .0003, .7277], [.1227, .1122, .1087, .1033],
    [.0035, .7612, .0310, .7597], [.0276, .7275, .0037, .7508], [.2084, .4283, .3876, .2212],
    [.5209, .0440, .0657, .4587], [.0876, .7413, .0185, .7687], [.1012, .7391, .0334, .7558],
    [.0455, .0826, .0506, .0168], [.7445, .0562, .7515, .0440], [.0517, .4665, .4467, .0650],
    [.1185, .0423, .0084, .0049], [.4629, .0768, .0500, .5208],
]).reshape(20, 2, 2)
"""The official notebook's printed final alignments ``|k_h . k*_j|`` (Step 99 001) of its 20 runs, shape (run, h, j),
with the shared signal noise: the reference of the checks at the notebook's sizes."""

NOTEBOOK_TAIL = {"run": 20, "steps": (95001, 96001, 97001, 98001, 99001),
                 "excess_risk": (0.0880, 0.0931, 0.1013, 0.1032, 0.0924)}
"""The notebook's last five logged (held-out) excess risks of its run 20, a specialised run: their mean is a metric, to
compare with the shared law's ``shared_specialised_excess_risk_median``."""

NOTEBOOK_SETTINGS = {"d": 80, "L": 10, "gamma": math.sqrt(0.5), "eps": 0.1, "lambda0": 2.0, "schedule_rate": 2e-4,
                     "schedule_cap": 25_000, "step_size": 1e-3, "batch_size": 5, "n_steps": 100_000}
"""The notebook's sizes: the reference checks apply to runs with these values."""

SWITCHES = {"shared_signal_noise": True, "notebook_logging": True, "matching": "head1"}
"""The notebook's choice for each defect switch (what ``official=true`` sets)."""


class ToyMultiheadConfig(ExperimentConfig):
    """Config of the two-head toy model (field names are the ``--set`` keys)."""

    d: int = pydantic.Field(80, ge=16, description="dimension")
    L: int = pydantic.Field(10, ge=3, description="sequence length (tokens 1 and 2 carry the signals)")
    gamma: float = pydantic.Field(math.sqrt(0.5), gt=0, description="standard deviation of the signal tokens' noise")
    eps: float = pydantic.Field(0.1, ge=0, description="label noise standard deviation")
    lambda0: float = pydantic.Field(2.0, gt=0, le=LAMBDA_MAX, title="erf scale at t = 0",
                                    description=f"erf scale at t = 0, in (0, {LAMBDA_MAX:g}] "
                                    "(beyond it erf(lambda X_l . k) is sign(X_l . k) to round-off for all but 5e-4 "
                                    "of the tokens: attnlab.marion.predictors.LAMBDA_MAX)")
    schedule_rate: float = pydantic.Field(2e-4, ge=0, description="lambda_t = lambda0 / (1 + rate min(t, cap))")
    schedule_cap: int = pydantic.Field(25_000, ge=0, description="update from which lambda_t stays constant")
    step_size: float = pydantic.Field(1e-3, gt=0, description="SGD step size")
    batch_size: int = pydantic.Field(5, ge=1, description="SGD batch size")
    n_steps: int = pydantic.Field(100_000, ge=1, description="SGD updates")
    log_every: int = pydantic.Field(1000, ge=1, description="updates between logs")
    n_repeats: int = pydantic.Field(20, ge=1, description="independent runs")
    n_test: int = pydantic.Field(1000, ge=2, description="held-out sequences per run")
    n_mc: int = pydantic.Field(2000, ge=100, description="Monte Carlo sequences in R^d per run and law for the "
                               "closed-form check")
    n_onestep: int = pydantic.Field(4000, ge=100, description="draws of one update from the final state of run 0, "
                                    "full-vector and reduced, for the reduced-chain check")
    onestep_step_size: float = pydantic.Field(0.05, gt=0, description="step size of those updates")
    official: bool = pydantic.Field(False, description="the notebook's choice for every switch not set explicitly")
    shared_signal_noise: bool = pydantic.Field(False, description="one noise draw z shared by both signal tokens "
                                               "(the notebook); the headline law")
    notebook_logging: bool = pydantic.Field(False, description="log after updates 1, K + 1, ... (the notebook) "
                                            "instead of at 0, K, ..., n_steps")
    matching: Literal["best", "head1"] = pydantic.Field("best", description="matched curves from the better "
                                                        "assignment, or from head 1 only (the notebook)")
    paired: bool = pydantic.Field(True, description="also simulate the other signal-noise law on the same draws")
    align_threshold: float = pydantic.Field(0.25, gt=0, lt=1, description="least |kappa| of an aligned head")
    dominance: float = pydantic.Field(3.0, ge=1, description="an aligned head's |kappa| over its other direction's")

    @pydantic.model_validator(mode="before")
    @classmethod
    def _official(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("official") is True:
            data = {**{k: v for k, v in SWITCHES.items() if k not in data}, **data}
        return data

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        if self.log_every > self.n_steps or self.n_steps % self.log_every:
            raise ValueError(f"log_every ({self.log_every}) must divide n_steps ({self.n_steps})")
        return self

    def params(self) -> mh.ToyParams:
        return mh.ToyParams(self.lambda0, self.schedule_rate, float(self.schedule_cap), self.step_size, self.gamma,
                            self.eps)

    def laws(self) -> list[str]:
        """The simulated signal-noise laws, in the order of the dataset's ``noise`` coordinate."""
        primary = "shared" if self.shared_signal_noise else "independent"
        return ["independent", "shared"] if self.paired else [primary]

    def at_notebook_sizes(self) -> bool:
        """Whether the run has the notebook's sizes (the reference checks apply)."""
        return all(math.isclose(float(getattr(self, k)), float(v), rel_tol=1e-12)
                   for k, v in NOTEBOOK_SETTINGS.items())


@partial(programs.jit, static_argnames=("d", "L", "n_test"))
def _initial_all(run_keys, d: int, L: int, n_test: int):
    return jax.vmap(lambda k: _initial(k, d, L, n_test))(run_keys)


@partial(programs.jit, static_argnames=("d", "L", "n"))
def _mc_final(keys, grams, shared, lam, gamma, eps, d: int, L: int, n: int):
    """Monte Carlo risks in R^d of the flat final states ``grams`` (one key and law each), one state at a time."""

    def one(x):
        k, gram, sh = x
        return mh.mc_excess_risk(k, gram, lam, gamma, eps, d, L, n, sh, J, H)

    return jax.lax.map(one, (keys, grams, shared))


@partial(programs.jit, static_argnames=("d", "L"))
def _closed_form_other_law(grams, shared, lam, gamma, d: int, L: int):
    """The closed form of each flat state under the other signal-noise law (the Monte Carlo check's control)."""
    return jax.vmap(lambda g, s: mh.population_excess_risk(g, lam, gamma, d, L, J, H, jnp.where(s, 0.0, 1.0)))(
        grams, shared)


def _initial(run_key, d: int, L: int, n_test: int):
    """One run: the notebook's key tree (SGD stream, initialisation, teachers, test set), the initial Gram matrix and
    the test set's standard normals in the frame."""
    k_sgd, k_init, k_star, k_test = jax.random.split(run_key, 4)
    ks, vs = mh.sample_teachers(k_star, d, J)
    K, V = mh.init_students(k_init, d, H)
    a, b, c = jax.random.split(k_test, 3)
    test = (jax.random.normal(a, (n_test, J, N_VEC)), jax.random.normal(b, (n_test, L - J, N_VEC)),
            jax.random.normal(c, (n_test,)))
    return k_sgd, mh.gram_matrix(ks, vs, K, V), test


def _teacher_student_sq(gram):
    return jnp.sum(gram[..., 2 * J:, : 2 * J] ** 2, axis=(-1, -2))


def _onestep(key, gram, lam, cfg: ToyMultiheadConfig, shared: bool):
    """From ``gram``: ``n_onestep`` full-vector updates in R^d and as many reduced ones (and the chain without its
    out-of-frame part), at ``onestep_step_size``. Returns means and SEs of ``sum |u . t|^2`` and the full updates'
    largest sphere deviation and unnormalised step growth."""
    k_vec, k_full, k_red = jax.random.split(key, 3)
    vec = mh.embed(k_vec, gram, cfg.d)
    kt, vt = mh.teacher_index(J)
    ks_, vs_ = mh.student_index(J, H)
    alpha = cfg.onestep_step_size

    def full(k):
        K1, V1, _, dev, grow = mh.sgd_step_full(k, vec[kt], vec[vt], vec[ks_], vec[vs_], lam, alpha, cfg.gamma,
                                                cfg.eps, cfg.batch_size, cfg.L, shared)
        return _teacher_student_sq(mh.gram_matrix(vec[kt], vec[vt], K1, V1)), dev, grow

    def red(k, oof):
        nz = mh.draw_reduced_noise(k, cfg.batch_size, cfg.L, cfg.d, J, H)
        return _teacher_student_sq(mh.sgd_step_reduced(nz, gram, lam, alpha, cfg.gamma, cfg.eps, cfg.d, shared, J, H,
                                                       out_of_frame=oof)[0])

    n = cfg.n_onestep
    chunk = min(n, 500)
    n_chunks = -(-n // chunk)
    fk = jax.random.split(k_full, n_chunks * chunk).reshape(n_chunks, chunk)
    s_full, dev, grow = jax.lax.map(jax.vmap(full), fk)
    rk = jax.random.split(k_red, n_chunks * chunk)
    s_red = jax.vmap(lambda k: red(k, True))(rk)
    s_ctl = jax.vmap(lambda k: red(k, False))(rk)

    def mse(x):
        x = x.reshape(-1)
        return jnp.mean(x), jnp.std(x, ddof=1) / jnp.sqrt(x.size)

    return (*mse(s_full), *mse(s_red), *mse(s_ctl), jnp.max(dev), jnp.max(grow))


_onestep_jit = programs.jit(_onestep, static_argnames=("cfg", "shared"))


def run(cfg: ToyMultiheadConfig, key, progress=None) -> xr.Dataset:
    """Simulate every run under each law, then the closed-form and held-out risks along the logs, the Monte Carlo
    risks at the final states and the one-update comparison of the reduced chain with the full-vector update.

    ``progress(done, total)`` advances per segment of updates (20 segments), then once for the risks and once for the
    checks' draws.
    """
    n_seg, extra = 20, 2

    def report(done, total):
        if progress is not None:
            progress(done * n_seg / max(total, 1), n_seg + extra)

    report(0, n_seg)
    laws = cfg.laws()
    shared = jnp.asarray([law == "shared" for law in laws])
    run_keys = jax.random.split(key, cfg.n_repeats)
    k_mc, k_one = split(fold_in(key, 2**31 - 1))
    k_sgd, gram0, tests = _initial_all(run_keys, cfg.d, cfg.L, cfg.n_test)
    gram0 = jnp.broadcast_to(gram0, (len(laws), *gram0.shape))
    steps, grams = mh.run_reduced(gram0, k_sgd, shared, cfg.params(), d=cfg.d, L=cfg.L, batch_size=cfg.batch_size,
                                  n_steps=cfg.n_steps, log_every=cfg.log_every,
                                  notebook_logging=cfg.notebook_logging, J=J, H=H, progress=report,
                                  n_segments=n_seg)
    offset = 1 if cfg.notebook_logging else 0
    t_lambda = np.minimum(steps - offset, cfg.n_steps)  # the update each log's lambda belongs to
    lam = np.asarray(mh.lambda_capped(t_lambda, cfg.lambda0, cfg.schedule_rate, cfg.schedule_cap))
    risk, test = mh.risks_along(grams, tests, jnp.asarray(lam), shared, cfg.gamma, cfg.eps, cfg.d, cfg.L, J, H)
    report(n_seg + 1, n_seg)

    final = grams[-1]  # (law, run, n, n)

    n_arms = len(laws)
    flat = final.reshape(-1, N_VEC, N_VEC)
    sh_flat = jnp.repeat(shared, cfg.n_repeats)
    mc, mc_se = _mc_final(jax.random.split(k_mc, flat.shape[0]), flat, sh_flat, lam[-1], cfg.gamma, cfg.eps, cfg.d,
                          cfg.L, cfg.n_mc)
    other = _closed_form_other_law(flat, sh_flat, lam[-1], cfg.gamma, cfg.d, cfg.L)
    primary = laws.index("shared" if cfg.shared_signal_noise else "independent")
    one = _onestep_jit(k_one, final[primary, 0], float(lam[-1]), cfg, bool(cfg.shared_signal_noise))
    one = [float(x) for x in one]
    report(n_seg + 2, n_seg)

    kappa, nu = mh.alignments(grams, J, H)  # (log, law, run, h, j)
    to = lambda x: np.moveaxis(np.asarray(x), 0, 1)  # noqa: E731  (log, law, ...) -> (law, log, ...)
    dims = ("noise", "step", "run")
    law_run = lambda x: np.asarray(x).reshape(n_arms, cfg.n_repeats)  # noqa: E731
    data = {
        "gram": (("noise", "step", "run", "row", "col"), to(grams),
                 {"units": "1", "long_name": "Gram matrix of (k*_1, v*_1, k*_2, v*_2, k_1, v_1, k_2, v_2)"}),
        "kappa": (("noise", "step", "run", "head", "direction"), to(kappa),
                  {"units": "1", "long_name": "|k_h . k*_j|"}),
        "nu": (("noise", "step", "run", "head", "direction"), to(nu), {"units": "1", "long_name": "|v_h . v*_j|"}),
        "excess_risk": (dims, to(risk), {"units": "y^2", "long_name": "closed-form E(T - y)^2 - eps^2"}),
        "test_excess_risk": (dims, to(test), {"units": "y^2", "long_name": "held-out mean (T - y)^2 - eps^2",
                                              "n_samples": cfg.n_test}),
        "lambda": (("step",), lam, {"units": "1", "long_name": "erf scale of the logged risks"}),
        "mc_excess_risk": (("noise", "run"), law_run(mc), {
            "units": "y^2", "n_samples": cfg.n_mc, "long_name": "Monte Carlo E(T - y)^2 - eps^2 in R^d, final state"}),
        "mc_excess_risk_se": (("noise", "run"), law_run(mc_se), {"units": "y^2", "long_name": "its standard error"}),
        "other_law_excess_risk": (("noise", "run"), law_run(other), {
            "units": "y^2", "long_name": "closed form of the final state under the other signal-noise law"}),
    }
    names = ("full_mean", "full_se", "reduced_mean", "reduced_se", "control_mean", "control_se")
    for name, value in zip(names, one[:6], strict=True):
        data[f"onestep_{name}"] = ((), value, {
            "units": "1", "n_samples": cfg.n_onestep, "step_size": cfg.onestep_step_size,
            "long_name": "sum over students u and teachers t of (u . t)^2 after one update from run 0's final state"})
    data["onestep_sphere_deviation"] = ((), one[6], {"units": "1", "long_name": "max ||u| - 1| after a full update"})
    data["onestep_unnormalised_growth"] = ((), one[7], {
        "units": "1", "long_name": "max ||u~| - 1| of the projected step before normalisation"})
    coords = {"noise": laws, "step": steps, "run": np.arange(cfg.n_repeats), "head": [1, 2], "direction": [1, 2],
              "row": mh.vector_names(J, H), "col": mh.vector_names(J, H)}
    ds = xr.Dataset(data, coords=coords, attrs={
        "model": "sum of 2 erf heads, projected SGD, reduced chain on the Gram matrix (exact in law)",
        "primary_noise": laws[primary], "logging": "notebook" if cfg.notebook_logging else "aligned",
        "matching": cfg.matching})
    ds["noise"].attrs.update(units="1", long_name="signal-token noise: independent z_1, z_2 or one shared z (notebook)")
    ds["step"].attrs.update(units="1", long_name="number of SGD updates made")
    ds["run"].attrs.update(units="1", long_name="independent run")
    ds["head"].attrs.update(units="1", long_name="attention head h")
    ds["direction"].attrs.update(units="1", long_name="teacher direction j (signal token j)")
    ds["row"].attrs.update(units="1", long_name="vector of the Gram matrix")
    ds["col"].attrs.update(units="1", long_name="vector of the Gram matrix")
    return ds


# --- summary --------------------------------------------------------------------------------------------------------

def notebook_classes(cfg: ToyMultiheadConfig):
    """Class codes of the notebook's printed table under this config's thresholds."""
    return mh.classify(NOTEBOOK_KAPPA, cfg.align_threshold, cfg.dominance)


def _aligned_kappa(kappa, code, heads, cls: int):
    """The aligned ``|kappa|`` of every head of the runs of class ``cls`` (flat array)."""
    runs = np.flatnonzero(code == cls)
    if runs.size == 0:
        return np.zeros(0)
    k = kappa[runs]
    h = heads[runs]
    return np.take_along_axis(k, np.maximum(h, 0)[..., None], axis=-1)[..., 0].reshape(-1)


def _permuted(kappa):
    """The deliberately permuted run: head 2's directions swapped."""
    k = np.array(kappa, copy=True)
    k[..., 1, :] = k[..., 1, ::-1]
    return k


def _value_balance(ds, law: str):
    """``|nu_hj| - |nu_hj'|`` of every head at the last log under ``law``, j the direction of its larger ``|kappa|``
    (flat array). Under shared signal noise the risk sees ``v*_1, v*_2`` only through ``v*_1 + v*_2`` (``y - eps xi =
    gamma z . (v*_1 + v*_2)``), so ``v_h . (v*_1 - v*_2)`` gets no gradient beyond the O(1/sqrt(d)) cross-overlaps of
    the teachers: the mean is 0 whatever the head's alignment."""
    last = ds.sel(noise=law).isel(step=-1)
    kappa, nu = last.kappa.values, last.nu.values
    own = np.argmax(kappa, axis=-1)[..., None]
    return (np.take_along_axis(nu, own, -1) - np.take_along_axis(nu, 1 - own, -1)).reshape(-1)


def summarize(ds: xr.Dataset, cfg: ToyMultiheadConfig):
    """Metrics of the last log (classes, risks, alignments per law) and the checks, each with its negative control."""
    laws = list(ds.noise.values)
    last = ds.isel(step=-1)
    metrics: dict[str, float] = {"n_repeats": float(ds.sizes["run"]), "final_lambda": float(last["lambda"])}
    classes = {}
    for law in laws:
        kap = last.kappa.sel(noise=law).values
        code, heads = mh.classify(kap, cfg.align_threshold, cfg.dominance)
        classes[law] = (code, heads)
        for i, name in enumerate(mh.CLASSES):
            metrics[f"{law}_{name}"] = float(np.sum(code == i))
        coll = code == 1
        metrics[f"{law}_collapsed_on_k1"] = float(np.sum(coll & (heads[:, 0] == 0)))
        metrics[f"{law}_collapsed_on_k2"] = float(np.sum(coll & (heads[:, 0] == 1)))
        risk = last.excess_risk.sel(noise=law).values
        metrics[f"{law}_final_excess_risk_median"] = float(np.median(risk))
        metrics[f"{law}_final_test_excess_risk_median"] = float(np.median(last.test_excess_risk.sel(noise=law)))
        for i, name in ((0, "specialised"), (1, "collapsed")):
            if np.any(code == i):
                metrics[f"{law}_{name}_excess_risk_median"] = float(np.median(risk[code == i]))
                metrics[f"{law}_{name}_kappa_mean"] = float(np.mean(_aligned_kappa(kap, code, heads, i)))
        swap = mh.match_swap(kap, cfg.matching)
        m = mh.matched(kap, swap)
        metrics[f"{law}_matched_kappa_h1_mean"] = float(np.mean(m[:, 0]))
        metrics[f"{law}_matched_kappa_h2_mean"] = float(np.mean(m[:, 1]))
        metrics[f"{law}_max_abs_kappa"] = float(np.max(kap))
        metrics[f"{law}_value_balance_mean"] = float(np.mean(_value_balance(ds, law)))
        vcode, _ = mh.classify(last.nu.sel(noise=law).values, cfg.align_threshold, cfg.dominance)
        for i, cname in enumerate(mh.CLASSES):
            metrics[f"{law}_value_{cname}"] = float(np.sum(vcode == i))
    nb_code, _ = notebook_classes(cfg)
    for i, name in enumerate(mh.CLASSES):
        metrics[f"notebook_{name}"] = float(np.sum(nb_code == i))
    metrics["notebook_run20_tail_excess_risk_mean"] = float(np.mean(NOTEBOOK_TAIL["excess_risk"]))
    nb_matched = mh.matched(NOTEBOOK_KAPPA, mh.match_swap(NOTEBOOK_KAPPA, "head1"))  # the notebook's own rule
    metrics["notebook_matched_kappa_h1_mean"] = float(np.mean(nb_matched[:, 0]))
    metrics["notebook_matched_kappa_h2_mean"] = float(np.mean(nb_matched[:, 1]))

    checks = []
    mean_f, se_f = float(ds.onestep_full_mean), float(ds.onestep_full_se)
    mean_r, se_r = float(ds.onestep_reduced_mean), float(ds.onestep_reduced_se)
    n_one = int(ds.onestep_full_mean.attrs["n_samples"])
    checks.append(Check.where_finite(
        "reduced chain vs full-vector update: mean sum (u . t)^2 after one update (run 0's final state)",
        theory=mean_r, simulation=mean_f, tolerance=5.0 * math.hypot(se_f, se_r),
        basis=f"5 SE, {n_one} draws each, step size {ds.onestep_full_mean.attrs['step_size']:g}",
        control="the reduced chain without the gradient components outside the frame",
        control_theory=float(ds.onestep_control_mean)))
    checks.append(Check.where_finite(
        "sphere constraint after a full-vector update: max ||u| - 1|", theory=0.0,
        simulation=float(ds.onestep_sphere_deviation), tolerance=1e-12, basis="float64 round-off bound",
        control="the projected step before normalisation, max ||u~| - 1|",
        control_simulation=float(ds.onestep_unnormalised_growth)))

    risk_final = last.excess_risk.values.reshape(-1)
    mc = ds.mc_excess_risk.values.reshape(-1)
    mc_se = ds.mc_excess_risk_se.values.reshape(-1)
    checks.append(Check.where_finite(
        "closed-form excess risk vs Monte Carlo in R^d (final states, mean over runs and laws)",
        theory=float(np.mean(risk_final)), simulation=float(np.mean(mc)),
        tolerance=5.0 * float(np.sqrt(np.sum(mc_se**2))) / mc.size,
        basis=f"5 SE, {int(ds.mc_excess_risk.attrs['n_samples'])} sequences per run and law",
        control="each final state's closed form under the other signal-noise law",
        control_theory=float(np.mean(ds.other_law_excess_risk.values))))

    gap = (last.test_excess_risk - last.excess_risk).values.reshape(-1)
    name = "closed-form excess risk vs held-out estimate (last log, mean over runs and laws)"
    if gap.size < 2:
        checks.append(Check.not_evaluated(name, "one run: the standard error over runs needs two",
                                          theory=float(np.mean(risk_final))))
    else:
        checks.append(Check.where_finite(
            name, theory=float(np.mean(risk_final)), simulation=float(last.test_excess_risk.mean()),
            tolerance=5.0 * float(np.std(gap, ddof=1) / np.sqrt(gap.size)), basis=f"5 SE over {gap.size} runs",
            control=f"the closed form at the first log (step {int(ds.step[0])})",
            control_theory=float(ds.excess_risk.isel(step=0).mean())))

    t_last = int(ds.step[-1]) - (1 if cfg.notebook_logging else 0)
    frozen = cfg.lambda0 / (1.0 + cfg.schedule_rate * min(t_last, cfg.schedule_cap))
    checks.append(Check.where_finite(
        f"erf scale of the last log (update {t_last}) vs lambda0 / (1 + rate min(t, cap))", theory=frozen,
        simulation=float(last["lambda"]), tolerance=1e-12, basis="float64 round-off bound",
        control="Part A's uncapped schedule lambda0 / (1 + 1e-4 t)",
        control_theory=cfg.lambda0 / (1.0 + 1e-4 * t_last)))

    if "shared" in laws and "independent" in laws:
        name = ("shared noise: value vectors read v*_1 + v*_2, mean over heads of |nu_own| - |nu_other| = 0 "
                "(own: the larger |kappa|)")
        bal, ctl = _value_balance(ds, "shared"), _value_balance(ds, "independent")
        if bal.size < 2:
            checks.append(Check.not_evaluated(name, "one head: the standard error needs two", theory=0.0))
        else:
            m, se = mean_se(bal)
            checks.append(Check.where_finite(
                name, theory=0.0, simulation=m, tolerance=5.0 * se, basis=f"5 SE over {bal.size} heads",
                control="the same under independent noises, on the same draws",
                control_simulation=float(np.mean(ctl))))

    if "shared" in laws and cfg.at_notebook_sizes():
        kap = last.kappa.sel(noise="shared").values
        code, heads = classes["shared"]
        pcode, pheads = mh.classify(_permuted(kap), cfg.align_threshold, cfg.dominance)
        nb_code, nb_heads = notebook_classes(cfg)
        for cls, label in ((1, "collapsed"), (0, "specialised")):
            name = f"notebook table: mean aligned |kappa| of {label} runs (shared noise, last log)"
            ours = _aligned_kappa(kap, code, heads, cls)
            ref = _aligned_kappa(NOTEBOOK_KAPPA, nb_code, nb_heads, cls)
            perm = _aligned_kappa(_permuted(kap), pcode, pheads, cls)
            if ours.size < 2 or perm.size < 1:
                checks.append(Check.not_evaluated(
                    name, f"{ours.size // 2} {label} runs here, {perm.size // 2} once permuted (needs 1 and 1)",
                    theory=float(np.mean(ref))))
                continue
            (m_ref, se_ref), (m, se) = mean_se(ref), mean_se(ours)
            checks.append(Check.where_finite(
                name, theory=m_ref, simulation=m, tolerance=5.0 * math.hypot(se_ref, se),
                basis=f"5 SE of the difference, {ref.size // 2} notebook runs and {ours.size // 2} here",
                control="a deliberately permuted run: head 2's directions swapped before classifying",
                control_simulation=float(np.mean(perm))))
    return metrics, checks


def finding(metrics, cfg: ToyMultiheadConfig) -> str:
    n = int(metrics["n_repeats"])

    def split(law, kind=""):
        c = [int(metrics[f"{law}_{kind}{name}"]) for name in mh.CLASSES]
        return f"{c[0]}/{c[1]}/{c[2]}/{c[3]}"

    primary = "shared" if cfg.shared_signal_noise else "independent"
    other = "independent" if primary == "shared" else "shared"
    name = {"shared": "shared signal noise (notebook)", "independent": "independent signal noises (corrected)"}
    nb = [int(metrics[f"notebook_{c}"]) for c in mh.CLASSES]

    def law_text(law):
        return (f"{name[law]}: keys {split(law)}, values {split(law, 'value_')}, final excess risk median "
                f"{metrics[f'{law}_final_excess_risk_median']:.3g}, heads' |nu_own| - |nu_other| "
                f"{metrics[f'{law}_value_balance_mean']:+.2f}")

    text = f"runs specialised/collapsed/mixed/failed of {n}, {law_text(primary)}"
    if f"{other}_specialised" in metrics:
        text += f"; on the same draws, {law_text(other)}"
    text += (f"; the notebook's table (shared): keys {nb[0]}/{nb[1]}/{nb[2]}/{nb[3]}; max |kappa| "
             f"{max(metrics.get(f'{law}_max_abs_kappa', 0.0) for law in (primary, other)):.2f}")
    return text
