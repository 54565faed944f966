import jax
import pytest

import attnlab  # noqa: F401  (switches JAX to float64)
from attnlab.compiled import release_compiled_programs


@pytest.fixture(autouse=True)
def _release_compiled_programs():
    """A test worker compiles thousands of programs, each holding memory mappings: past the kernel's limit, XLA's
    JIT fails or crashes (see :mod:`attnlab.compiled`). Drop compiled programs between tests once past half of it."""
    release_compiled_programs()


@pytest.fixture
def key():
    """A fixed key: statistical thresholds below are stated for this key (diffrax/equinox convention)."""
    return jax.random.key(20251122)
