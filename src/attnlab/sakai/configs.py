"""The configs of the sakai presets (validated, frozen pydantic models) and what they need: one place that the
presets, their summaries and their figures import (:mod:`attnlab.sakai.presets` registers them)."""

from __future__ import annotations

from typing import Literal

import pydantic

from attnlab.config import ExperimentConfig

__all__ = ["SakaiConfig"]


class SakaiConfig(ExperimentConfig):
    """Config of a Sakai et al. experiment (field names are the ``--set`` keys)."""

    experiment: Literal["vary_width", "vary_heads", "scores", "low_rank", "wide"] = pydantic.Field(
        "vary_width", description="which figure: widths at fixed H (Fig. 1), heads at fixed width (Fig. 2b), the "
                                  "score probe (Fig. 2a), low rank n = H n_H (Fig. 3), or widths beyond the paper")
    width: tuple[int, ...] = pydantic.Field((16, 64, 256, 1024), description="widths n (low rank: n = H * head_width)")
    n_heads: tuple[int, ...] = pydantic.Field((2,), description="numbers of heads H")
    n_tokens: int = pydantic.Field(4, ge=1, description="sequence length s")
    n_samples: int = pydantic.Field(50_000, ge=20, description="networks per configuration and seed")
    n_seeds: int = pydantic.Field(10, ge=1, description="independent seeds (the paper's distances are per seed)")
    input_activation: Literal["clip", "relu"] = pydantic.Field(
        "clip", description="input activation psi: clip(t, -100, 100) (Fig. 1-3) or ReLU (Fig. 5)")
    head_width: int | None = pydantic.Field(None, ge=1, description="per-head width n_H (low rank)")
    reference_width: int = pydantic.Field(8, ge=1, description="width of the brute-force reference check")
    n_reference: int = pydantic.Field(2000, ge=20, description="brute-force networks per reference check")
    n_boot: int = pydantic.Field(200, ge=10, description="bootstrap replicates (seed 0)")
    kde_points: int = pydantic.Field(500, ge=10, description="official KDE-KL grid size")
    implementation: Literal["auto", "native", "jax"] = pydantic.Field(
        "auto", description="C kernels or JAX for the sampler, the brute-force reference and the distances "
                            "(auto: C where it applies); the run records which ran")

    @pydantic.field_validator("width", "n_heads", mode="before")
    @classmethod
    def _as_tuple(cls, v):
        return (v,) if isinstance(v, int) else v

    @pydantic.model_validator(mode="after")
    def _consistent(self):
        for name in ("width", "n_heads"):
            values = getattr(self, name)
            if not values or any(int(x) < 1 for x in values):
                raise ValueError(f"{name} must be a non-empty list of integers >= 1; got {values!r}")
        if self.experiment == "low_rank" and self.head_width is None:
            raise ValueError("the low_rank experiment needs head_width (the paper uses 64)")
        if self.experiment == "vary_heads" and len(self.width) != 1:
            raise ValueError(f"vary_heads uses one width; got width={self.width!r}")
        if self.experiment in ("vary_width", "scores") and len(self.n_heads) != 1:
            raise ValueError(f"{self.experiment} uses one number of heads; got n_heads={self.n_heads!r}")
        if self.experiment == "scores" and len(self.width) != 1:
            raise ValueError(f"scores probes one width; got width={self.width!r}")
        return self

    def configs(self) -> list[tuple[int, int, int]]:
        """The (n, d, H) triples of the experiment: width, per-head width, heads."""
        if self.experiment == "low_rank":
            return [(H * self.head_width, self.head_width, H) for H in self.n_heads]
        d = lambda n: n if self.head_width is None else self.head_width
        return [(n, d(n), H) for H in self.n_heads for n in self.width]
