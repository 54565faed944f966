"""The configs of the duranthon presets (validated, frozen pydantic models) and what they need: one place that the
presets, their summaries and their figures import (:mod:`attnlab.duranthon.presets` registers them)."""

from __future__ import annotations

import math
from typing import Literal

import pydantic

from attnlab.config import ExperimentConfig
from attnlab.duranthon.activations import ACTIVATIONS

__all__ = ["ActName", "ActivationsConfig", "LowSNRConfig", "PAPER_LAM_GRID", "PAPER_SETTINGS", "PopulationConfig",
           "SampleComplexityConfig"]


ActName = Literal["softmax", "linear", "centred_linear", "erf", "softplus"]


def _positive_finite(name: str, values):
    """Validator body shared by the tuple fields of positive, finite numbers (nus, alphas)."""
    if any(not math.isfinite(x) or x <= 0 for x in values):
        raise ValueError(f"every {name} must be finite and > 0, got {values}")
    return values


class PopulationConfig(ExperimentConfig):
    """Config of ``duranthon-population`` (field names are the ``--set`` keys)."""

    models: tuple[Literal["spiked", "max"], ...] = pydantic.Field(("spiked", "max"), description="data models: "
                                                                  "spiked-SLR, max-SLR")
    nus: tuple[float, ...] = pydantic.Field((1.0, 2.0, 5.0, 10.0), min_length=1, description="signal strengths")
    Ls: tuple[int, ...] = pydantic.Field((2, 3), min_length=1, description="fixed sequence lengths")
    activations: tuple[ActName, ...] = pydantic.Field(("softmax", "linear", "centred_linear", "softplus"),
                                                      description="attention-weight functions sigma compared")
    n_mc: int = pydantic.Field(50_000, ge=1000, description="Monte Carlo samples per risk estimate")
    kappa_max: float = pydantic.Field(40.0, gt=0, description="upper end of the key-scale search")
    D_check: int = pydantic.Field(40, ge=4, description="dimension of the R^D check of the risk on M")
    n_check: int = pydantic.Field(4000, ge=100, description="sequences in the R^D check")

    _nus = pydantic.field_validator("nus")(classmethod(lambda cls, v: _positive_finite("nu", v)))

    @pydantic.field_validator("Ls")
    @classmethod
    def _Ls(cls, v):
        if any(x < 1 for x in v):
            raise ValueError(f"every sequence length must be >= 1, got {v}")
        return v


class ActivationsConfig(ExperimentConfig):
    """Config of ``duranthon-activations``: fixed L in {1, 2, 3} and L ~ U{1, 2, 3} for each model."""

    nu_spiked: float = pydantic.Field(5.0, gt=0, allow_inf_nan=False, description="nu of spiked-SLR")
    nu_max: float = pydantic.Field(math.inf, gt=0, allow_inf_nan=True, description="nu of max-SLR (may be inf)")
    activations: tuple[ActName, ...] = pydantic.Field(ACTIVATIONS, description="attention-weight functions sigma "
                                                      "compared")
    n_mc: int = pydantic.Field(100_000, ge=1000, description="Monte Carlo samples per risk estimate")
    kappa_max: float = pydantic.Field(1000.0, gt=0, description="upper end of the key-scale search")


class _ReplicaVsERMConfig(ExperimentConfig):
    """Fields shared by the replica-against-ERM presets (sample complexity, low SNR)."""

    model: Literal["spiked", "max"] = pydantic.Field("spiked", description="data model: spiked-SLR or max-SLR")
    n_sets: int = pydantic.Field(2, ge=2, description="independent frozen sets (their spread gives the SE)")
    sqrt_ND: float = pydantic.Field(500.0, gt=0, description="simulation size: D = sqrt_ND/sqrt(alpha)")
    n_test: int = pydantic.Field(4000, ge=100, description="fresh test samples per ERM run")
    informed_scale: float = pydantic.Field(5.0, gt=0, description="key scale of the informed start if nu = inf")

    @pydantic.model_validator(mode="after")
    def _nu(self):
        if math.isinf(self.nu) and self.model == "spiked":
            raise ValueError("nu = inf is defined for max-SLR only")
        return self


# The paper's Fig. 3 settings: model, nu, L; lambda tuned by grid search (the paper's grid is not known: ours below)
PAPER_SETTINGS = {"fig3-spiked-nu1": {"model": "spiked", "nu": 1.0, "L": 3},
                  "fig3-spiked-nu2": {"model": "spiked", "nu": 2.0, "L": 3},
                  "fig3-max-nuinf": {"model": "max", "nu": math.inf, "L": 3}}


PAPER_LAM_GRID = (0.03, 0.1, 0.3, 1.0, 3.0)


class SampleComplexityConfig(_ReplicaVsERMConfig):
    """Config of ``duranthon-sample-complexity`` (one model, nu, L per run; lambda fixed or by grid search).

    ``setting`` names one of the paper's Fig. 3 settings (:data:`PAPER_SETTINGS`): it fixes model, nu and L (an
    explicit different value is an error) and, unless given, searches lambda over :data:`PAPER_LAM_GRID`::

        attnlab sweep duranthon-sample-complexity --grid setting=fig3-spiked-nu1,fig3-spiked-nu2,fig3-max-nuinf
    """

    setting: Literal["custom", "fig3-spiked-nu1", "fig3-spiked-nu2", "fig3-max-nuinf"] = pydantic.Field(
        "custom", description="one of the paper's Fig. 3 settings (fixes model, nu, L and the lambda grid), or "
                              "custom")
    nu: float = pydantic.Field(5.0, gt=0, allow_inf_nan=True, description="signal strength (may be inf for max-SLR)")
    L: int = pydantic.Field(2, ge=1, description="sequence length")
    alphas: tuple[float, ...] = pydantic.Field((1.0, 2.0, 4.0, 8.0), min_length=1,
                                               description="sample ratios alpha = N / D")
    lam: float | Literal["optimal"] = pydantic.Field(
        1.0, description="lambda_k = lambda_v, a positive number (when lam_grid is empty), or \"optimal\": per alpha "
                         "and activation the minimiser lambda* of the replica test error, bracketed by lam_star_grid "
                         "(else lam_grid, else PAPER_LAM_GRID)")
    lam_grid: tuple[float, ...] = pydantic.Field((), description="lambda_k = lambda_v grid: per alpha and activation "
                                                 "the lambda of lowest replica test error (empty: fixed lam)")
    lam_star_grid: tuple[float, ...] = pydantic.Field(
        (), description="with lam = optimal, the lambda_k = lambda_v grid whose adjacent points bracket lambda* (at "
                        "least 2 values; empty: lam_grid, else PAPER_LAM_GRID); lambda* outside its range leaves the "
                        "optimum unevaluated")
    lam_grid_rs_stable: bool = pydantic.Field(True, description="grid search among RS-stable (AT) fixed points only")
    activations: tuple[Literal["softmax", "linear"], ...] = pydantic.Field(("softmax", "linear"),
                                                                           description="attention weights compared")
    n_replica: int = pydantic.Field(1500, ge=50, description="frozen samples per replica set")
    n_seeds: int = pydantic.Field(3, ge=2, description="ERM repeats per alpha")
    n_risk: int = pydantic.Field(50_000, ge=1000, description="Monte Carlo samples of the test-error formula")

    _alphas = pydantic.field_validator("alphas")(classmethod(lambda cls, v: _positive_finite("alpha", v)))
    _lam_grid = pydantic.field_validator("lam_grid", "lam_star_grid")(
        classmethod(lambda cls, v: _positive_finite("lambda", v)))

    @pydantic.field_validator("lam", mode="before")
    @classmethod
    def _lam(cls, v):
        if v == "optimal" or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v)):
            return v
        raise ValueError("lam must be a positive number or \"optimal\"")

    @pydantic.field_validator("lam_star_grid")
    @classmethod
    def _bracket(cls, v):
        if len(v) == 1:
            raise ValueError(f"lam_star_grid must be empty or hold at least 2 values (its brackets); got {v}")
        return v

    @pydantic.model_validator(mode="before")
    @classmethod
    def _paper_setting(cls, values):
        if not isinstance(values, dict) or values.get("setting", "custom") == "custom":
            return values
        values = dict(values)
        for k, v in PAPER_SETTINGS.get(values["setting"], {}).items():
            if k in values and (values[k] != v if k == "model" else float(values[k]) != float(v)):
                raise ValueError(f"setting={values['setting']} fixes {k}={v}, got {k}={values[k]}")
            values[k] = v
        values.setdefault("lam_grid", PAPER_LAM_GRID)
        return values


class LowSNRConfig(_ReplicaVsERMConfig):
    """Config of ``duranthon-low-snr`` (spiked-SLR by default, nu = 1, L = 3: the paper's low-SNR setting)."""

    nu: float = pydantic.Field(1.0, gt=0, allow_inf_nan=True, description="signal strength (may be inf for max-SLR)")
    L: int = pydantic.Field(3, ge=1, description="sequence length")
    alphas: tuple[float, ...] = pydantic.Field((2.0,), min_length=1, description="sample ratios alpha = N / D")
    lams: tuple[float, ...] = pydantic.Field((1.0, 0.3, 0.1, 0.03, 0.01), min_length=2,
                                             description="lambda_k = lambda_v path (continuation, decreasing)")
    activation: Literal["softmax", "linear"] = pydantic.Field("softmax", description="attention weights")
    jacobians: tuple[Literal["implicit", "stein"], ...] = pydantic.Field(
        ("implicit", "stein"), description="estimators of V_hat compared: pointwise (implicit function theorem) and "
                                           "Stein's lemma")
    n_replica: int = pydantic.Field(1024, ge=50, description="frozen samples per replica set")
    qmc: bool = pydantic.Field(True, description="frozen sets by scrambled Sobol (independent scrambles) or MC")
    n_seeds: int = pydantic.Field(3, ge=2, description="ERM data sets per alpha (informed and random start each)")
    n_risk: int = pydantic.Field(20_000, ge=1000, description="Monte Carlo samples of the test-error formula")
    max_iter: int = pydantic.Field(200, ge=10, description="map evaluations per replica point")

    _alphas = pydantic.field_validator("alphas")(classmethod(lambda cls, v: _positive_finite("alpha", v)))
    _lams = pydantic.field_validator("lams")(classmethod(lambda cls, v: _positive_finite("lambda", v)))
