r"""The presets ``marion-transformer-single-head`` (T2) and ``marion-transformer-multihead`` (T3): a one-layer
transformer with a frozen register token trained by SGD on single-location regression, the transformer experiments of
Marion, Berthier, Biau, Boyer (ICLR 2025), App. E.3; configs, run, summary and finding. The model, its training and
its diagnostics are in :mod:`attnlab.marion.transformer`, the figures in :mod:`attnlab.marion.transformer_figures`.

**Experiments** (App. E.3). ``d = 80``, ``L = 10``, ``gamma^2 = 1/2``, ``eps = 0.1``, feed-forward width 200, plain
SGD with batch 128, a held-out set of 1000 sequences per run, logs every 100 updates.

* T2: one head of width ``p = 80``, no output matrix, one signal token (law D1); step size ``1e-2``, 8000 updates,
  20 runs.
* T3: two heads of width ``p = d/2 = 40`` and an output matrix ``W_O``, two signal tokens (law D2); step size
  ``2e-2``, 10 000 updates, 10 runs; the alignments of the two heads with the two directions are matched to curves
  "h = 1, 2" by an assignment of heads to directions.

**Simulation.** Every run of every model trains in ``precision`` (``lax.scan`` over updates, the runs in sequence
and the models of a run together, :func:`attnlab.marion.transformer.train`): float32 by default, as the notebooks
trained (the update is bound by its matrix products, which float32 computes in about half the time; the faithful
checks of a float32 run allow the spread of float32 round-off, :data:`FAITHFUL_SPREAD_F32`), or float64; the logs,
Monte Carlo risks, floors and checks compute in float64 from the trained weights. With ``paired`` (default) the
corrected model and the notebook's run side by side on the same random numbers (initial draws, teachers, batches,
held-out sets): the dimension ``model`` holds the config's model and the other one. Beside the logged diagnostics the
run computes, at the final state: a Monte Carlo excess risk with ``n_mc`` fresh sequences, the LayerNorm floor of each run
(:func:`attnlab.marion.transformer.layernorm_floor`), and the forward-pass checks on ``n_forward`` sequences.

**The official notebooks' defects, each a switch** (``official=true`` sets the notebook's choice for every switch not
given explicitly; the default is the corrected experiment):

==========================  =====================  =================================================================
switch                      notebook / default     what it changes
==========================  =====================  =================================================================
``zero_key_init``           true / false           the key matrix ``W_K`` (the notebook's ``W_q``) starts at 0, so
                                                   ``M = W_Q^T W_K`` has rank 1 at every step and its logged rank-1
                                                   ratio is 1 by construction; corrected: ``N(0, 2/(p+d))`` like
                                                   ``W_Q``, and the ratio measures something
``alignment``               notebook / exact       ``kappa``: top right singular vector of ``W_K`` against
                                                   ``cos(q, k*)`` with ``q = W_K^T W_Q LN(r)``, the direction the
                                                   register attends along; ``nu``: the value map with the ReLU
                                                   linearised against its held-out mean Jacobian (both are logged;
                                                   the switch picks the figure's and the finding's)
``shared_signal_noise``     true / false           (T3) both signal tokens share one noise draw z, so
                                                   ``y = gamma z . (v*_1 + v*_2)`` is readable from either token
``coupled_output_init``     true / false           (T3) ``W_O`` drawn with ``W_V``'s key: ``W_O`` is ``W_V``
                                                   flattened and rescaled
``notebook_logging``        true / false           (T3) logs after updates 1, K + 1, ... (never the initial state
                                                   nor the last K - 1 updates) instead of at 0, K, ..., n_steps
``matching``                head1 / best           (T3) matched curves from head 1's larger alignment only, instead
                                                   of the better of the two assignments
==========================  =====================  =================================================================

**Random numbers.** ``notebook_keys`` (default true) draws every run's numbers as the notebooks did (their key tree,
JAX's non-partitionable threefry, float32 normals): with seed 0 and the notebook's run count the notebook model's
runs are the notebook's own runs, which the faithful checks compare with its printed outputs. It is no defect, so
``official`` leaves it alone; false takes JAX's default threefry.

**Checks** (each with a negative control; statistical tolerances are 5 standard errors, the others stated bounds):

* the register-row forward pass against the notebook's full ``(L + 1)``-row computation (float64 round-off);
  control: the full computation read out at row 1;
* invariance under permutations of the ``L`` tokens (round-off); control: the register exchanged with token 1;
* (paired) with ``W_K = 0`` the rank one of ``M_a`` at every log, ``max s_2 / s_1``, and the notebook's ``kappa``
  equal to ``|cos(q, k*)|`` (the training precision's round-off over the updates,
  :func:`~attnlab.marion.transformer_summary.rank_one_tolerance`); control: the model with a Gaussian ``W_K``;
* the held-out excess risk against a Monte Carlo estimate at the final state (5 SE from each run's held-out and
  Monte Carlo sample variances); control: the held-out risk of the first log;
* (T3, paired) ``W_O = sqrt((1/d) / (2/(p+d))) W_V`` flattened, in the notebook's model (round-off); control: the
  corrected model's independent ``W_O``;
* at the notebook's sizes, the notebook model's outputs against the notebook's reference outputs: T2, the final
  excess risk and alignments against its runs 1-5 (5 SE of the difference of the means; control: the untrained model);
  T3, the matched ``kappa`` curves' final means against its printed table (5 SE; control: the other assignment of
  heads to directions) and the final excess risk against its runs 1, 2 and 10;
* with ``notebook_keys``, seed 0, the notebook's run count and sizes, its runs themselves: T2, the first printed
  rows of run 1 (steps 0-400; 1e-5; control: the printed rows one log later) and the final values of runs 1-5
  (2.5e-3; control: runs 6-10); T3 (with its logging offsets), the printed final ``kappa`` table (trained in float32:
  5 standard deviations of the difference of two float32 trainings, :func:`faithful_bound`; in float64: 2e-3, the
  drift between platforms of a faithful rerun; control: heads exchanged) and the tail of run 10 (same basis;
  control: the tail of run 9).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any, ClassVar, Literal

import jax
import jax.numpy as jnp
import numpy as np
import pydantic
import xarray as xr

from attnlab import programs
from attnlab._random import fold_in
from attnlab.config import ExperimentConfig
from attnlab.marion import transformer as tf

__all__ = ["CITATION", "SingleHeadConfig", "MultiHeadConfig", "NOTEBOOK_T2", "NOTEBOOK_T3", "FAITHFUL_SPREAD_F32",
           "faithful_bound", "run", "memory_bytes"]

CITATION = "Marion, Berthier, Biau, Boyer, ICLR 2025"

NOTEBOOK_T2 = {
    "first_rows": {  # run 1, cell exec 14 of the single-head notebook
        "step": (0, 100, 200, 300, 400),
        "excess_risk": (0.526958, 0.516937, 0.486541, 0.207992, 0.053753),
        "kappa": (0.204095, 0.960340, 0.987578, 0.992880, 0.993748),
        "nu": (0.111166, 0.530913, 0.626913, 0.756444, 0.912970),
    },
    "final_runs": {  # runs 1-5 at step 8000, faithful reruns
        "excess_risk": (0.0042, 0.0060, 0.0061, 0.0061, 0.0134),
        "kappa": (0.9965, 0.9957, 0.9819, 0.9829, 0.9882),
        "nu": (0.983, 0.983, 0.979, 0.983, 0.971),
    },
}
"""The single-head notebook's reference outputs: its printed first rows of run 1 (steps 0-400: excess risk, the
alignment of ``W_K``'s top right singular vector with k*, the linearised value alignment with v*) and its runs 1-5
after 8000 updates."""

NOTEBOOK_T3 = {
    "kappa": np.array([
        [.9659, .3291, .7930, .7471], [.7368, .7282, .5081, .8625], [.2459, .9452, .8170, .5590],
        [.6693, .7274, .7986, .5666], [.5742, .7646, .9040, .2146], [.6337, .7484, .9362, .1373],
        [.9534, .1109, .7060, .7069], [.7331, .6114, .5703, .7612], [.4741, .9113, .9149, .3181],
        [.3747, .8685, .8800, .3421]]).reshape(10, 2, 2),
    "run10_tail": {
        "step": (9501, 9601, 9701, 9801, 9901),
        "excess_risk": (0.014838, 0.014519, 0.014437, 0.014336, 0.014869),
        "kappa": ((0.878941, 0.879164, 0.879421, 0.879819, 0.880046),
                  (0.866838, 0.867217, 0.867683, 0.868326, 0.868500)),
        "nu": ((0.612433, 0.614146, 0.613892, 0.613180, 0.614886),
               (0.650802, 0.651024, 0.655122, 0.655757, 0.654472)),
    },
    "final_excess_risk": (0.038, 0.006, 0.015),  # runs 1, 2 and 10, faithful reruns
}
"""The multi-head notebook's reference outputs: its printed final ``|e_1^a . k*_j|`` (Step 9901; shape (run, head,
direction)), the last five logs of its run 10 (matched curves h = 1, 2 by its head-1 rule) and the final excess risks
of its runs 1, 2 and 10."""

FAITHFUL_ROWS_TOLERANCE = 1e-5
"""Bound on ``|ours - printed|`` for the single-head notebook's first rows (steps 0-400): the notebook ran in float32
(relative round-off 6e-8 per operation), this run in its precision from the same float32 draws, over at most 400
updates (ten times the 1e-6 to which a float32 re-implementation reproduced them)."""

FAITHFUL_DRIFT = 2e-3
"""Bound on ``|ours - printed|`` for the multi-head notebook's final alignments and run-10 tail: the drift over
10 000 updates measured between two platforms for a faithful rerun of its run 1."""

FAITHFUL_SPREAD_F32 = {"table": 1.41e-3, "tail": 1.52e-4}
"""Standard deviations, largest over entries, of the multi-head notebook's faithful final ``kappa`` table (10 runs x
2 heads x 2 directions) and of its run-10 tail (excess risk, matched ``kappa`` and ``nu`` at the last five logs),
over 8 float32 trainings of its 10 runs from initial weights that differ entry by entry by one unit in the last place
(``tools/round_off_spread.py``, 10 000 updates each). The spread is float32 round-off accumulated over the updates,
which another platform's summation order (or another vectorisation of the same program) changes in the same way:
the same 8 trainings in float64 spread by 2e-15; in float32 the unperturbed replica lies 3.1e-4 from the printed
table, the perturbed ones up to 2.7e-3, and the preset's own paired run (two models vectorised, not eight) 2.7e-3."""

_ARM_FIELDS = ("zero_key_init", "coupled_output_init", "shared_signal_noise")


class TransformerConfig(ExperimentConfig):
    """Fields shared by the single-head and the multi-head configs (field names are the ``--set`` keys)."""

    N_HEADS: ClassVar[int] = 1
    N_SIGNALS: ClassVar[int] = 1
    SWITCHES: ClassVar[dict[str, Any]] = {}
    MODEL_SWITCHES: ClassVar[tuple[str, ...]] = ()
    NOTEBOOK_SETTINGS: ClassVar[dict[str, float]] = {}
    NOTEBOOK_RUNS: ClassVar[int] = 1

    d: int = pydantic.Field(80, ge=8, description="token dimension")
    L: int = pydantic.Field(10, ge=3, description="tokens per sequence, the register excluded")
    gamma: float = pydantic.Field(math.sqrt(0.5), gt=0, description="standard deviation of the signal noise")
    eps: float = pydantic.Field(0.1, ge=0, description="label noise standard deviation")
    ffn_width: int = pydantic.Field(200, ge=1, description="width m of the ReLU feed-forward layer")
    step_size: float = pydantic.Field(1e-2, gt=0, description="SGD step size")
    batch_size: int = pydantic.Field(128, ge=1, description="SGD batch size")
    n_steps: int = pydantic.Field(8000, ge=1, description="SGD updates")
    log_every: int = pydantic.Field(100, ge=1, description="updates between logs")
    n_repeats: int = pydantic.Field(20, ge=2, description="independent runs")
    n_test: int = pydantic.Field(1000, ge=2, description="held-out sequences per run")
    n_mc: int = pydantic.Field(20_000, ge=100, description="Monte Carlo sequences per run for the final risk")
    n_floor: int = pydantic.Field(20_000, ge=100, description="Monte Carlo draws per run for the LayerNorm floor")
    n_forward: int = pydantic.Field(64, ge=2, description="sequences per run for the forward-pass checks")
    official: bool = pydantic.Field(False, description="the notebook's choice for every switch not set explicitly")
    notebook_keys: bool = pydantic.Field(True, description="the notebook's random numbers (non-partitionable "
                                         "threefry): with seed 0, its runs")
    zero_key_init: bool = pydantic.Field(False, description="W_K (the notebook's W_q) starts at 0 (the notebook): "
                                         "M = W_Q^T W_K is then rank one by construction")
    alignment: Literal["exact", "notebook"] = pydantic.Field(
        "exact", description="alignments shown: cos(q, k*) and the held-out value Jacobian (exact), or the top "
        "singular vector of W_K and the ReLU linearised (notebook)")
    paired: bool = pydantic.Field(True, description="also train the other model (notebook or corrected) on the "
                                  "same random numbers")
    precision: Literal["float32", "float64"] = pydantic.Field(
        "float32", description="precision of the SGD updates (the notebooks' float32); logs, Monte Carlo risks, "
        "floors and checks compute in float64 from the trained weights")

    @pydantic.model_validator(mode="before")
    @classmethod
    def _official(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("official") is True:
            data = {**{k: v for k, v in cls.SWITCHES.items() if k not in data}, **data}
        return data

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        if self.log_every > self.n_steps or self.n_steps % self.log_every:
            raise ValueError(f"log_every ({self.log_every}) must divide n_steps ({self.n_steps})")
        if self.L <= self.N_SIGNALS:
            raise ValueError(f"L ({self.L}) must exceed the number of signal tokens ({self.N_SIGNALS})")
        return self

    # --- derived -----------------------------------------------------------------------------------------------------

    @property
    def head_width(self) -> int:
        """The head width ``p``."""
        raise NotImplementedError

    def sizes(self) -> tf.Sizes:
        return tf.Sizes(d=self.d, L=self.L, J=self.N_SIGNALS, H=self.N_HEADS, p=self.head_width, m=self.ffn_width,
                        output_matrix=self.N_HEADS > 1, batch_size=self.batch_size, n_test=self.n_test,
                        precision=self.precision)

    def model_switches(self) -> dict[str, bool]:
        """The switches that change the simulated model, as set."""
        return {k: bool(getattr(self, k)) for k in self.MODEL_SWITCHES}

    def models(self) -> list[tuple[str, dict[str, bool]]]:
        """The simulated models ``(label, switches)``, the config's first; with ``paired``, the notebook's model (or
        the corrected one when the config's is the notebook's) second. Labels: ``corrected``, ``notebook`` or
        ``custom`` (switches of both)."""
        notebook = {k: bool(self.SWITCHES[k]) for k in self.MODEL_SWITCHES}
        corrected = {k: not v for k, v in notebook.items()}
        own = self.model_switches()
        label = "notebook" if own == notebook else "corrected" if own == corrected else "custom"
        out = [(label, own)]
        if self.paired:
            out.append(("corrected", corrected) if label == "notebook" else ("notebook", notebook))
        return out

    def at_notebook_sizes(self) -> bool:
        """Whether the run has the notebook's sizes and optimiser (its reference outputs apply)."""
        return all(math.isclose(float(getattr(self, k)), float(v), rel_tol=1e-12)
                   for k, v in self.NOTEBOOK_SETTINGS.items())


_COMMON_NOTEBOOK = {"d": 80, "L": 10, "gamma": math.sqrt(0.5), "eps": 0.1, "ffn_width": 200, "batch_size": 128,
                    "log_every": 100, "n_test": 1000}


class SingleHeadConfig(TransformerConfig):
    """T2: one softmax head of width ``head_dim``, no output matrix, one signal token."""

    N_HEADS: ClassVar[int] = 1
    N_SIGNALS: ClassVar[int] = 1
    SWITCHES: ClassVar[dict[str, Any]] = {"zero_key_init": True, "alignment": "notebook"}
    MODEL_SWITCHES: ClassVar[tuple[str, ...]] = ("zero_key_init",)
    NOTEBOOK_SETTINGS: ClassVar[dict[str, float]] = {**_COMMON_NOTEBOOK, "head_dim": 80, "step_size": 1e-2,
                                                      "n_steps": 8000}
    NOTEBOOK_RUNS: ClassVar[int] = 20

    head_dim: int = pydantic.Field(80, ge=1, description="width p of the head (the notebook's r)")

    @property
    def head_width(self) -> int:
        return self.head_dim


class MultiHeadConfig(TransformerConfig):
    """T3: two softmax heads of width ``d/2`` and an output matrix, two signal tokens."""

    N_HEADS: ClassVar[int] = 2
    N_SIGNALS: ClassVar[int] = 2
    SWITCHES: ClassVar[dict[str, Any]] = {
        "zero_key_init": True, "coupled_output_init": True, "shared_signal_noise": True, "notebook_logging": True,
        "matching": "head1", "alignment": "notebook"}
    MODEL_SWITCHES: ClassVar[tuple[str, ...]] = ("zero_key_init", "coupled_output_init", "shared_signal_noise")
    NOTEBOOK_SETTINGS: ClassVar[dict[str, float]] = {**_COMMON_NOTEBOOK, "step_size": 2e-2, "n_steps": 10_000}
    NOTEBOOK_RUNS: ClassVar[int] = 10

    step_size: float = pydantic.Field(2e-2, gt=0, description="SGD step size")
    n_steps: int = pydantic.Field(10_000, ge=1, description="SGD updates")
    n_repeats: int = pydantic.Field(10, ge=2, description="independent runs")
    shared_signal_noise: bool = pydantic.Field(False, description="one noise draw z shared by both signal tokens "
                                               "(the notebook)")
    coupled_output_init: bool = pydantic.Field(False, description="W_O drawn with the key of W_V (the notebook)")
    notebook_logging: bool = pydantic.Field(False, description="log after updates 1, K + 1, ... (the notebook) "
                                            "instead of at 0, K, ..., n_steps")
    matching: Literal["best", "head1"] = pydantic.Field("best", description="matched curves from the better "
                                                        "assignment, or from head 1 only (the notebook)")
    precision: Literal["float32", "float64"] = pydantic.Field(
        "float32", description="precision of the SGD updates (the notebook's float32; its faithful checks then allow "
        "the spread of float32 round-off); logs, Monte Carlo risks, floors and checks compute in float64")

    @pydantic.model_validator(mode="after")
    def _even(self):
        if self.d % self.N_HEADS:
            raise ValueError(f"d ({self.d}) must be a multiple of the number of heads ({self.N_HEADS})")
        return self

    @property
    def head_width(self) -> int:
        return self.d // self.N_HEADS


# --- run --------------------------------------------------------------------------------------------------------------

def _logging(cfg) -> bool:
    return bool(getattr(cfg, "notebook_logging", False))


@partial(programs.jit, static_argnames=("sz", "n_steps"))
def _initial(run_keys, arms: tf.Arm, sz: tf.Sizes, n_steps: int):
    """The notebook's key tree: each run key splits into (SGD stream, initialisation, teachers, held-out set); the
    stream into one key per update. Returns the initial parameters (arm, run, ...) in the training precision, the
    runs' data and step keys, and the output coupling of the float64 initial parameters (:func:`_output_coupling`;
    None without an output matrix)."""

    def per_run(k):
        k_sgd, k_init, k_star, k_test = jax.random.split(k, 4)
        ks, vs = tf.sample_teachers(k_star, sz.d, sz.J)
        return jax.random.split(k_sgd, n_steps), k_init, ks, vs, k_test

    step_keys, k_init, ks, vs, k_test = jax.vmap(per_run)(run_keys)
    params, r = jax.vmap(lambda a: jax.vmap(lambda k: tf.init_params(k, sz, a))(k_init))(arms)
    coupling = _output_coupling(params, sz)  # in float64, before the cast to the training precision
    params = tf.cast_floats(params, jnp.dtype(sz.precision))
    return params, tf.RunData(r[0], ks, vs, k_test), step_keys, coupling


@partial(programs.jit, static_argnames=("sz", "n_mc", "n_floor", "n_forward"))
def _final_extras(key, params, runs: tf.RunData, arms: tf.Arm, gamma, eps, sz: tf.Sizes, n_mc: int, n_floor: int,
                  n_forward: int):
    """At the final state of every arm and run (runs one at a time, arms vectorised): the Monte Carlo excess risk,
    the LayerNorm floor, and the forward checks' largest gaps (register row vs full computation, vs its row 1; token
    permutation, register exchanged). Leading axes (arm, run)."""
    k_mc, k_floor, k_fwd = jax.random.split(key, 3)
    n_runs = runs.r.shape[0]
    params = tf.cast_floats(params, jnp.float64)  # exactly widened from the training precision

    def one(p, run, arm, k_mc, k_floor, k_fwd):
        mc, mc_se = tf.mc_excess_risk(k_mc, p, run.r, run.k_star, run.v_star, n_mc, sz.L, gamma, eps,
                                      arm.shared_signal_noise)
        floor, floor_se = tf.layernorm_floor(k_floor, run.k_star, run.v_star, gamma, arm.shared_signal_noise, n_floor)
        X, _ = tf.sample_tokens(k_fwd, run.k_star, run.v_star, n_forward, sz.L, gamma, eps, arm.shared_signal_noise)
        y_hat = tf.predict(p, run.r, X)
        full = tf.predict_full(p, run.r, X, 0)
        row1 = tf.predict_full(p, run.r, X, 1)
        perm = tf.predict_full(p, run.r, X[:, ::-1], 0)
        Z = jnp.concatenate([jnp.broadcast_to(run.r, (n_forward, 1, sz.d)), X], axis=1)
        swapped = tf.predict_rows(p, Z[:, jnp.array([1, 0, *range(2, sz.L + 1)])], 0)
        gaps = [jnp.max(jnp.abs(y_hat - x)) for x in (full, row1, perm, swapped)]
        return mc, mc_se, floor, floor_se, jnp.stack(gaps)

    keys = [jax.random.split(k, n_runs) for k in (k_mc, k_floor, k_fwd)]
    over_arms = jax.vmap(one, in_axes=(0, None, 0, None, None, None))
    by_run = jax.tree.map(lambda a: jnp.moveaxis(a, 1, 0), params)  # (run, arm, ...)
    per_run = jax.lax.map(lambda x: over_arms(x[0], x[1], arms, *x[2:]), (by_run, runs, *keys))  # bounded memory
    return jax.tree.map(lambda a: jnp.moveaxis(a, 0, 1), per_run)


def _output_coupling(params, sz: tf.Sizes):
    """``max |W_O - sqrt((1/d) / (2/(p+d))) flat(W_V)|`` per arm and run (the notebook's key reuse gives 0)."""
    if params.W_O is None:
        return None
    c = math.sqrt((1.0 / sz.d) / (2.0 / (sz.p + sz.d)))
    W_V = params.W_V.reshape(*params.W_V.shape[:2], sz.d, sz.d)
    return jnp.max(jnp.abs(params.W_O - c * W_V), axis=(-1, -2))


def _is_notebook_root(key) -> bool:
    return bool(np.array_equal(np.asarray(jax.random.key_data(key)),
                               np.asarray(jax.random.key_data(jax.random.key(0)))))


def run(cfg: TransformerConfig, key, progress=None) -> xr.Dataset:
    """Train every model and run, then the final-state Monte Carlo risks, LayerNorm floors and forward checks.

    ``progress(done, total)`` advances per segment of updates (up to 20), then once for the final-state work.
    """
    with jax.threefry_partitionable(not cfg.notebook_keys):
        return _run(cfg, key, progress)


def _run(cfg: TransformerConfig, key, progress) -> xr.Dataset:
    n_seg = 20

    def report(done, total):
        if progress is not None:
            progress(done * n_seg / max(total, 1), n_seg + 1)

    report(0, n_seg)
    models = cfg.models()
    arms = tf.Arm(*(jnp.asarray([sw.get(f, False) for _, sw in models]) for f in _ARM_FIELDS))
    sz = cfg.sizes()
    params0, runs, step_keys, coupling = _initial(jax.random.split(key, cfg.n_repeats), arms, sz, cfg.n_steps)
    steps, logs, params = tf.train(params0, runs, step_keys, arms, sz, gamma=cfg.gamma, eps=cfg.eps,
                                   step_size=cfg.step_size, n_steps=cfg.n_steps, log_every=cfg.log_every,
                                   notebook_logging=_logging(cfg), progress=report, n_segments=n_seg)
    mc, mc_se, floor, floor_se, gaps = _final_extras(fold_in(key, 2**31 - 1), params, runs, arms,
                                                     cfg.gamma, cfg.eps, sz, cfg.n_mc, cfg.n_floor, cfg.n_forward)
    gaps = np.max(np.asarray(gaps), axis=1)  # (arm, 4): largest over runs
    report(n_seg + 1, n_seg)

    to = lambda x: np.moveaxis(np.asarray(x), 0, 1)  # noqa: E731  (log, arm, ...) -> (arm, log, ...)
    hj = ("model", "step", "run", "head", "direction")
    data = {
        "test_excess_risk": (("model", "step", "run"), to(logs["test_excess_risk"]), {
            "units": "y^2", "long_name": "held-out mean (y_hat - y)^2 - eps^2", "n_samples": cfg.n_test}),
        "test_excess_risk_se": (("model", "step", "run"), to(logs["test_excess_risk_se"]), {
            "units": "y^2", "long_name": "its standard error (sample standard deviation / sqrt(n_test))"}),
        "rank1_ratio": (hj[:4], to(logs["rank1_ratio"]), {
            "units": "1", "long_name": "s_1^2 / sum_i s_i^2 of M_a = W_Q^aT W_K^a (NaN where M_a = 0)"}),
        "s2_over_s1": (hj[:4], to(logs["s2_over_s1"]), {"units": "1", "long_name": "s_2 / s_1 of M_a"}),
        "kappa_notebook": (hj, to(logs["kappa_notebook"]), {
            "units": "1", "long_name": "|e_1 . k*_j|, e_1 the top right singular vector of W_K^a (notebook)"}),
        "kappa_exact": (hj, to(logs["kappa_exact"]), {
            "units": "1", "long_name": "cos(q_a, k*_j), q_a = W_K^aT W_Q^a LN(r) (NaN where q_a = 0)"}),
        "nu_notebook": (hj, to(logs["nu_notebook"]), {
            "units": "1", "long_name": "cos(W_V^a W_O^a (I + W_2 W_1)^T theta, v*_j) (notebook, ReLU linearised)"}),
        "nu_exact": (hj, to(logs["nu_exact"]), {
            "units": "1", "long_name": "cos(W_V^a W_O^a E[J_f(h_0)]^T theta, v*_j) (held-out mean Jacobian)"}),
        "attention_signal": (hj, to(logs["attention_signal"]), {
            "units": "1", "long_name": "held-out mean attention of the register on signal token j"}),
        "mc_excess_risk": (("model", "run"), np.asarray(mc), {
            "units": "y^2", "n_samples": cfg.n_mc, "long_name": "Monte Carlo E(y_hat - y)^2 - eps^2, final state"}),
        "mc_excess_risk_se": (("model", "run"), np.asarray(mc_se), {"units": "y^2", "long_name": "its standard error"}),
        "layernorm_floor": (("model", "run"), np.asarray(floor), {
            "units": "y^2", "n_samples": cfg.n_floor,
            "long_name": "E Var(y | LN(X)): the least excess risk of a function of the layer-normalised tokens"}),
        "layernorm_floor_se": (("model", "run"), np.asarray(floor_se), {
            "units": "y^2", "long_name": "its Monte Carlo standard error"}),
        "k_star_overlap": (("run",), np.asarray(jnp.sum(runs.k_star[:, 0] * runs.k_star[:, -1], axis=-1)), {
            "units": "1", "long_name": "k*_1 . k*_J (1 with one direction)"}),
    }
    names = {"forward_gap": "max |y_hat - full computation read at the register row|",
             "forward_gap_row1": "max |y_hat - full computation read at row 1|",
             "permutation_gap": "max |y_hat - full computation with tokens 1..L reversed|",
             "register_swap_gap": "max |y_hat - full computation with the register and token 1 exchanged|"}
    for i, (name, long_name) in enumerate(names.items()):
        data[name] = (("model",), gaps[:, i], {"units": "y", "long_name": long_name + " (final state)",
                                               "n_samples": cfg.n_forward})
    if coupling is not None:
        data["output_coupling"] = (("model", "run"), np.asarray(coupling), {
            "units": "1", "long_name": "max |W_O - sqrt((1/d)/(2/(p+d))) flat(W_V)| at initialisation"})
    for f in _ARM_FIELDS:
        data[f] = (("model",), np.asarray([sw.get(f, False) for _, sw in models]), {
            "units": "1", "long_name": f"switch {f} of each model"})
    coords = {"model": [label for label, _ in models], "step": steps, "run": np.arange(cfg.n_repeats),
              "head": np.arange(1, cfg.N_HEADS + 1), "direction": np.arange(1, cfg.N_SIGNALS + 1)}
    faithful = (cfg.notebook_keys and _is_notebook_root(key) and cfg.n_repeats == cfg.NOTEBOOK_RUNS
                and cfg.at_notebook_sizes())
    ds = xr.Dataset(data, coords=coords, attrs={
        "model_description": f"register + pre-LN softmax attention ({cfg.N_HEADS} head(s) of width "
                             f"{cfg.head_width}) + ReLU feed-forward, plain SGD",
        "logging": "notebook" if _logging(cfg) else "aligned", "alignment": cfg.alignment,
        "matching": getattr(cfg, "matching", "none"), "faithful_runs": int(faithful)})
    ds["model"].attrs.update(units="1", long_name="simulated model: corrected, notebook or custom switches")
    ds["step"].attrs.update(units="1", long_name="number of SGD updates made")
    ds["run"].attrs.update(units="1", long_name="independent run")
    ds["head"].attrs.update(units="1", long_name="attention head a")
    ds["direction"].attrs.update(units="1", long_name="teacher direction j (signal token j)")
    return ds


# --- summary ----------------------------------------------------------------------------------------------------------

def faithful_bound(precision: str, part: str) -> tuple[float, str]:
    """The bound on ``|ours - printed|`` of a faithful multi-head run's ``part`` (``"table"``: the final ``kappa``
    table; ``"tail"``: run 10's last five logs) and its basis. Trained in float32, the run and the notebook's print are
    two float32 trainings: ``5 sqrt(2) s`` with ``s`` the spread of :data:`FAITHFUL_SPREAD_F32`; in float64,
    :data:`FAITHFUL_DRIFT`."""
    if precision == "float32":
        spread = FAITHFUL_SPREAD_F32[part]
        return 5.0 * math.sqrt(2.0) * spread, (f"5 standard deviations of the difference of two float32 trainings "
                                               f"(round-off spread {spread:.3g}, FAITHFUL_SPREAD_F32)")
    return FAITHFUL_DRIFT, "the drift between platforms of a faithful rerun (FAITHFUL_DRIFT)"


def memory_bytes(cfg: TransformerConfig) -> float:
    """An upper bound of the bytes a run takes: every run's and model's batch and held-out set with the forward and
    backward temporaries (as if vectorised together: a bound also for the runs in sequence), the update keys, the
    logs, and one run's Monte Carlo chunk and LayerNorm-floor draws at a time."""
    f64 = 8.0
    A = 2.0 if cfg.paired else 1.0
    R, L, d, J = float(cfg.n_repeats), float(cfg.L), float(cfg.d), float(cfg.N_SIGNALS)
    tokens = R * A * (float(cfg.n_test) + float(cfg.batch_size)) * (L + 1) * d * 3.0
    params = R * A * (4.0 * cfg.head_width * d + d * d + 2.0 * cfg.ffn_width * (d + 1)) * 3.0
    keys = R * float(cfg.n_steps)
    logs = (float(cfg.n_steps) / cfg.log_every + 2.0) * A * R * (5.0 * cfg.N_HEADS * J + 2.0 * cfg.N_HEADS + 1.0)
    final = A * (min(2000.0, cfg.n_mc) * (L + 1) * d * 4.0 + J * float(cfg.n_floor) * (d + 241.0) * 3.0)
    return 2.0 * f64 * (tokens + params + keys + logs + final)
