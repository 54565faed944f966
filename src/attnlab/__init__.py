"""attnlab: exact simulation and theory of attention layers.

Importing attnlab switches JAX to float64 (``jax_enable_x64``): closed-form risks, dynamics and distances to
invariant manifolds are compared at round-off level, which float32 cannot resolve.

It also turns on JAX's persistent compilation cache (in ``$ATTNLAB_JAX_CACHE``, default
``~/.cache/attnlab/jax``; set the variable to ``off`` to disable it): the presets' run time is dominated by XLA
compilation on small machines, and a second run of the same program, in any process, loads it from disk.
Cached executables are the same programs, so results are unchanged.
"""

import os as _os

import jax as _jax

_jax.config.update("jax_enable_x64", True)

_cache = _os.environ.get("ATTNLAB_JAX_CACHE", _os.path.join(_os.path.expanduser("~"), ".cache", "attnlab", "jax"))
if _cache.lower() not in ("", "off", "0", "none"):
    try:
        _os.makedirs(_cache, exist_ok=True)
        _jax.config.update("jax_compilation_cache_dir", _cache)
        _jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
    except OSError:  # read-only home: run without the cache
        pass

__version__ = "0.1.0"

__all__ = ["__version__"]
