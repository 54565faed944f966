"""attnlab: exact simulation and theory of attention layers.

Importing attnlab switches JAX to float64 (``jax_enable_x64``): closed-form risks, dynamics and distances to
invariant manifolds are compared at round-off level, which float32 cannot resolve.
"""

import jax as _jax

_jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"

__all__ = ["__version__"]
