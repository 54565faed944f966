"""Owen's T of the shared SLR core against SciPy (zeta's identities are tested with Marion's risk)."""

import numpy as np
import scipy.special as sp

from attnlab.slr.owen import owens_t


def test_owens_t_matches_scipy():
    h = np.linspace(-25, 25, 501)
    for a in (1e-3, 0.05, 0.3, 0.7, 1.0):
        got = np.asarray(owens_t(h, np.full_like(h, a)))
        assert np.max(np.abs(got - sp.owens_t(h, a))) < 1e-15
