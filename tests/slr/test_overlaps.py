"""The overlaps as named structures: one function from vectors, one field order per notation, frame coordinates."""

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.slr.data import init_sphere, orthonormal_frame, sample_teacher
from attnlab.slr.overlaps import DohmatobOverlaps, Overlaps, frame_coordinates, overlaps


def test_fields_and_the_dictionary_between_notations():
    assert Overlaps._fields == ("kappa", "nu", "theta", "eta", "rho")
    assert DohmatobOverlaps._fields == ("mu", "nu", "eta", "zeta", "rho")
    o = Overlaps(kappa=0.1, nu=0.2, theta=0.3, eta=0.4, rho=0.5)
    d = o.to_dohmatob()
    assert (d.mu, d.nu, d.eta, d.zeta, d.rho) == (0.1, 0.2, 0.4, 0.3, 0.5)
    assert d.to_marion() == o
    y = d.stack()
    assert np.asarray(y).tolist() == [0.1, 0.2, 0.4, 0.3, 0.5]
    assert DohmatobOverlaps.unstack(y) == tuple(jnp.asarray(x) for x in d)


def test_overlaps_from_vectors_one_and_batched(key):
    ks, vs = sample_teacher(key, 9)
    k, v = init_sphere(jax.random.fold_in(key, 1), 9)
    o = overlaps(k, v, ks, vs)
    assert float(o.kappa) == float(k @ ks) and float(o.theta) == float(v @ ks) and float(o.eta) == float(k @ vs)
    # batched in NumPy with broadcasting teachers: the same numbers
    K = np.stack([np.asarray(k)] * 3)
    V = np.stack([np.asarray(v)] * 3)
    ob = overlaps(K, V, np.asarray(ks)[None], np.asarray(vs)[None])
    assert isinstance(ob.nu, np.ndarray) and ob.nu.shape == (3,)
    np.testing.assert_allclose(np.stack(ob), np.stack(o)[:, None].repeat(3, 1), rtol=1e-14, atol=1e-15)


def test_frame_coordinates_reproduce_the_overlaps(key):
    ks, vs = sample_teacher(key, 12)
    k, v = init_sphere(jax.random.fold_in(key, 2), 12)
    o = overlaps(k, v, ks, vs)
    k4, v4 = frame_coordinates(o)
    E = orthonormal_frame(jax.random.fold_in(key, 3), 12)
    o2 = overlaps(k4 @ E, v4 @ E, E[0], E[1])
    for a, b in zip(o, o2):
        assert abs(float(a) - float(b)) < 1e-13
    np.testing.assert_allclose([float(jnp.linalg.norm(k4)), float(jnp.linalg.norm(v4))], 1.0, atol=1e-13)
