"""The configs of the bruno presets (validated, frozen pydantic models) and what they need: one place that the
presets, their summaries and their figures import (:mod:`attnlab.bruno.presets` registers them)."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pydantic

from attnlab.config import ExperimentConfig

__all__ = ["BrunoConfig", "LOG_MAX", "Matrix", "ROW_B"]


Matrix = tuple[tuple[float, ...], ...]


ROW_B = ((1.0, -1.0, 0.0), (1.0, 1.0, 0.0), (0.0, 0.0, 0.25))


LOG_MAX = math.log(np.finfo(np.float64).max)
"""log of the largest float64 (709.78): the largest exponent whose exponential is finite."""


def _norm(A, B=None) -> float:
    """The spectral norm of ``A`` (or of ``A^T B``), computed on the matrices scaled to entries of magnitude <= 1 (no
    overflow however large the entries)."""
    a = float(np.max(np.abs(A)))
    if B is None:
        return 0.0 if a == 0 else a * float(np.linalg.norm(A / a, 2))
    b = float(np.max(np.abs(B)))
    return 0.0 if a == 0 or b == 0 else a * b * float(np.linalg.norm((A / a).T @ (B / b), 2))


class BrunoConfig(ExperimentConfig):
    """Config of a Bruno et al. experiment (field names are the ``--set`` keys)."""

    scenario: Literal["alignment", "backward-heat", "forward-heat", "three-phases"] = pydantic.Field(
        "alignment", description="the phase shown: alignment (Fig. 1), backward heat (Fig. 2), forward heat "
                                 "(Fig. 3) or all three in sequence (Fig. 4)")
    n_tokens: int = pydantic.Field(10_000, ge=1, description="number of tokens N")
    d: int = pydantic.Field(3, ge=2, description="dimension of the ambient space (tokens on S^{d-1})")
    beta: float = pydantic.Field(30.0, gt=0, description="inverse temperature; beta |Q^T K| <= 354 (see Q)")
    dt: float = pydantic.Field(1e-2, gt=0, description="step size (1/L in the paper's Eq. (1))")
    dt_max: float = pydantic.Field(1e-2, gt=0, description="largest step on late log-spaced segments")
    integrator: Literal["euler", "bs32"] = pydantic.Field(
        "euler", description="euler: the paper's discrete model, Eq. (1); bs32: the SA ODE with adaptive "
                             "Bogacki-Shampine 3(2) steps (first trial step dt, cap dt_max, local error tol)")
    tol: float = pydantic.Field(1e-5, gt=0, description="bs32: absolute local error per step")
    t_end: float = pydantic.Field(6.0, gt=0, description="horizon")
    times: tuple[float, ...] = pydantic.Field((), description="snapshot times (empty: n_snapshots log-spaced)")
    n_snapshots: int = pydantic.Field(24, ge=2, description="log-spaced snapshot times when times is empty")
    t_first: float = pydantic.Field(0.01, gt=0, description="first log-spaced snapshot time")
    Q: Matrix | None = pydantic.Field(
        None, description="query matrix, d x d (None: the identity); with K, beta |Q^T K|_2 <= 354 = log(max float64) "
                          "/ 2, so that the attention weights exp(beta <Q x, K y>) of unit tokens and their ratios "
                          "(differences of two scores, up to 2 beta |Q^T K|) stay finite")
    K: Matrix | None = pydantic.Field(None, description="key matrix, d x d (None: the identity); see Q")
    V: Matrix | None = pydantic.Field(
        None, description="value matrix, d x d (None: the identity); t_end |V|_2 <= 709 = log(max float64), so that "
                          "the flow's growth e^{t V} (the alignment phase's closed form) stays finite")
    V_b: Matrix | None = pydantic.Field(ROW_B, description="alignment row (b) value matrix (None: one row only); "
                                        "t_end |V_b|_2 <= 709 as for V")
    means: tuple[float, ...] = pydantic.Field((1.0, 3.0, 5.0), description="angles (rad) of the initial mixture's "
                                              "components (azimuths on S^2)")
    weights: tuple[float, ...] = pydantic.Field((0.4, 0.35, 0.25), description="the components' weights (sum 1)")
    variance: float = pydantic.Field(0.04, gt=0, description="wrapped-normal variance of each component")
    latitude_range: float = pydantic.Field(math.pi / 2, gt=0, le=math.pi / 2, description="|latitude| <= this")
    kernel_dtype: Literal["float64", "float32"] = pydantic.Field(
        "float64", description="precision of the attention sums (tokens and integration stay float64)")
    implementation: Literal["auto", "native", "jax"] = pydantic.Field(
        "auto", description="attention sums in the C kernel (float32, d <= 8, CPU) or in JAX (auto: the exact "
                            "Fourier sums on the circle where d = 2, Q^T K = c I and the steps are Euler's, else C "
                            "where it applies); the run records which ran")
    bins: int = pydantic.Field(64, ge=4, description="histogram bins on [0, 2 pi)")
    pde_grid: int = pydantic.Field(512, ge=64, description="grid of the finite-beta mean-field PDE on S^1")
    n_sampling: int = pydantic.Field(400, ge=20, description="multinomial draws for the histogram sampling error")
    cluster_c: float = pydantic.Field(1.0, gt=0, description="cluster threshold angle c / sqrt(beta)")

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        for name in ("Q", "K", "V", "V_b"):
            M = getattr(self, name)
            if M is not None and (len(M) != self.d or any(len(row) != self.d for row in M)):
                raise ValueError(f"{name} must be a square {self.d} x {self.d} matrix")
        if self.times and (any(t <= 0 for t in self.times) or list(self.times) != sorted(set(self.times))):
            raise ValueError("times must be positive and strictly increasing")
        if self.times and self.times[-1] > self.t_end + 1e-12:
            raise ValueError("times must not exceed t_end")
        if self.t_first >= self.t_end:
            raise ValueError("t_first must be < t_end")
        if len(self.weights) != len(self.means) or abs(sum(self.weights) - 1) > 1e-9 or min(self.weights) < 0:
            raise ValueError("weights must be nonnegative, sum to 1 and match the means")
        if self.scenario == "forward-heat" and self.d != 2:
            raise ValueError("the forward-heat scenario lives on S^1 (d = 2)")
        if self.scenario in ("backward-heat", "three-phases") and self.d != 3:
            raise ValueError(f"the {self.scenario} scenario lives on S^2 (d = 3)")
        if self.dt_max < self.dt:
            raise ValueError("dt_max must be >= dt")
        scores = self.beta * _norm(self.matrix("Q"), self.matrix("K"))
        if not scores <= LOG_MAX / 2:
            raise ValueError(f"invalid value for 'beta': beta |Q^T K| must be <= {int(LOG_MAX / 2)} (attention weights "
                             f"exp(beta <Q x, K y>) and their ratios finite in float64); got {scores:.3g}")
        for name in ("V", "V_b"):
            growth = self.t_end * _norm(self.matrix(name)) if getattr(self, name) is not None or name == "V" else 0.0
            if not growth <= LOG_MAX:
                raise ValueError(f"invalid value for {name!r}: t_end |{name}| must be <= {int(LOG_MAX)} (the flow's "
                                 f"growth e^(t {name}) finite in float64); got {growth:.3g}")
        return self

    def matrix(self, name: str):
        M = getattr(self, name)
        return np.eye(self.d) if M is None else np.asarray(M, dtype=float)

    def snapshot_times(self) -> np.ndarray:
        if self.times:
            return np.asarray(self.times, dtype=float)
        return np.geomspace(self.t_first, self.t_end, self.n_snapshots)

    def step_sizes(self, times) -> np.ndarray:
        """dt on early segments, growing with the segment length up to dt_max (log-spaced horizons)."""
        seg = np.diff(np.concatenate([[0.0], times]))
        return np.clip(seg / 50, self.dt, self.dt_max)
