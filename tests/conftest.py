import jax
import pytest

import attnlab  # noqa: F401  (switches JAX to float64)


@pytest.fixture
def key():
    """A fixed key: statistical thresholds below are stated for this key (diffrax/equinox convention)."""
    return jax.random.key(20251122)
