import pytest

import attnlab
from attnlab import runtime

from .common import TINY_KWARGS


@pytest.fixture(scope="session", autouse=True)
def _tiny_config_compiled():
    """The tiny marion-manifold config (:data:`common.TINY_KWARGS`) run once in the test worker, its compiled programs
    then offered to every process that starts after (:func:`attnlab.runtime.share_compile_cache`): the command lines,
    sweeps and Dask workers these tests start load them instead of each compiling them again (both workers of a
    two-worker sweep would otherwise compile the same programs side by side)."""
    attnlab.run("marion-manifold", quick=True, **TINY_KWARGS)
    runtime.share_compile_cache()
