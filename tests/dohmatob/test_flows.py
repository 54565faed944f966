"""Mean-field overlap flows (spec B6): derivation checks, stationary points and their classification, invariance of M."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.dohmatob.flows import classify, field2, field4, field5, integrate, jacobian_eigenvalues, stationary_points_on_M
from attnlab.dohmatob.meanfield import DohmatobModel, mean_field_risk
from attnlab.slr.overlaps import DohmatobOverlaps, overlaps

G = 1 / math.sqrt(2)


def _model(link, zero_r=False):
    return DohmatobModel(100, 20, 1.0, G, link, zero_r)


def test_field5_is_the_riemannian_gradient_flow_of_the_overlaps():
    """u' = -P_u grad_u R, v' = -P_v grad_v R in R^d, with R = R_bar(overlaps): the overlaps' time derivatives."""
    m = DohmatobModel(100, 20, 1.0, 0.6, "relu")  # r != 0, all five overlaps active
    d = 7
    us, vs = jnp.eye(d)[0], jnp.eye(d)[1]
    u = jax.random.normal(jax.random.key(0), (d,)) + 0.8 * us
    v = jax.random.normal(jax.random.key(1), (d,)) + 0.5 * vs
    u, v = u / jnp.linalg.norm(u), v / jnp.linalg.norm(v)

    def ov(u, v):
        return jnp.array([u @ us, v @ vs, u @ vs, v @ us, u @ v])

    R = lambda u, v: mean_field_risk(overlaps(u, v, us, vs).to_dohmatob(), m)  # noqa: E731
    gu, gv = jax.grad(R, argnums=(0, 1))(u, v)
    du, dv = -(gu - (u @ gu) * u), -(gv - (v @ gv) * v)
    _, dov = jax.jvp(ov, (u, v), (du, dv))
    np.testing.assert_allclose(field5(ov(u, v), m), dov, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("link", ["linear", "quadratic", "relu"])
def test_field4_is_field5_at_r_zero(link):
    m = _model(link, zero_r=True)
    for y in np.random.default_rng(1).uniform(-0.5, 0.5, (5, 5)):
        y = jnp.asarray(y)
        f5 = field5(y, m)
        np.testing.assert_allclose(field4(y[:4], m), f5[:4], rtol=1e-10, atol=1e-13)


def test_linear_link_explicit_flow_on_M():
    """Spec B6 [I]: mu' = -2 gamma^2 A (p - nu)(1 - mu^2), nu' = 2 gamma^2 p (1 - nu^2)."""
    from attnlab.dohmatob.meanfield import localisation_derivative, localisation_probability

    m = _model("linear")
    for mu, nu in [(0.3, 0.2), (0.35, -0.4), (0.6, 0.9)]:
        p, A = float(localisation_probability(mu, m)), float(localisation_derivative(mu, m))
        ref = [-2 * G**2 * A * (p - nu) * (1 - mu**2), 2 * G**2 * p * (1 - nu**2)]
        np.testing.assert_allclose(field2(jnp.array([mu, nu]), m), ref, rtol=1e-10, atol=1e-14)


def _kinds(link):
    return {(round(p.mu, 4), round(p.nu, 4)): p.kind for p in stationary_points_on_M(_model(link))}


def test_prop10_linear_classification_on_M():
    assert _kinds("linear") == {(1.0, 1.0): "sink", (1.0, -1.0): "source", (-1.0, 1.0): "saddle",
                                (-1.0, -1.0): "saddle"}


def test_prop10_relu_classification_on_M():
    """Prop. 10(C) with its typo fixed as in the proof: (1,1) sink, (-1,1) saddle, (+-1,-1) degenerate."""
    assert _kinds("relu") == {(1.0, 1.0): "sink", (-1.0, 1.0): "saddle", (1.0, -1.0): "degenerate",
                              (-1.0, -1.0): "degenerate"}


def test_prop10_quadratic_classification_on_M_and_the_disagreement():
    """(1, +-1) sinks, (-1, +-1) saddles, (1, 0) source, the B = 0 point at p = 1/3 (mu = 0.3334, i.e. ~psi/c, not
    psi = 0.2427: spec B6 [I] confirmed) a saddle. Finding: (-1, 0) is a source of the reconstructed flow (both
    eigenvalues > 0, exponentially small), where Prop. 10(B) lists a saddle."""
    k = _kinds("quadratic")
    mu_b = [mu for (mu, nu) in k if abs(mu) < 1]
    assert len(mu_b) == 1 and abs(mu_b[0] - 0.3334) < 1e-4
    assert k == {(1.0, 1.0): "sink", (1.0, -1.0): "sink", (-1.0, 1.0): "saddle", (-1.0, -1.0): "saddle",
                 (1.0, 0.0): "source", (-1.0, 0.0): "source", (mu_b[0], 0.0): "saddle"}


def test_prop4_linear_4d_flow_unique_sink():
    m = _model("linear", zero_r=True)
    kinds = {y: classify(jacobian_eigenvalues(field4, y, m)) for y in
             [(1.0, 1.0, 0.0, 0.0), (1.0, -1.0, 0.0, 0.0), (-1.0, 1.0, 0.0, 0.0), (-1.0, -1.0, 0.0, 0.0)]}
    assert kinds[(1.0, 1.0, 0.0, 0.0)] == "sink"
    assert all(k in ("saddle", "source") for y, k in kinds.items() if y != (1.0, 1.0, 0.0, 0.0))


def test_M_invariant_linear_and_quadratic_not_relu():
    ts = jnp.linspace(0.0, 20.0, 11)
    y0 = jnp.array([0.36, 0.1, 0.0, 0.0])
    sol = integrate(field4, y0, ts, _model("linear"))
    assert bool(sol.succeeded)
    traj = sol.ys
    assert float(jnp.max(jnp.abs(traj[:, 2:]))) == 0.0
    np.testing.assert_allclose(traj[:, :2], integrate(field2, y0[:2], ts, _model("linear")).ys, atol=1e-7)
    for mu, nu in [(0.36, 0.1), (-0.5, 0.7), (0.9, -0.3)]:  # quadratic: the field is tangent to M
        f = field4(jnp.array([mu, nu, 0.0, 0.0]), _model("quadratic"))
        assert float(jnp.max(jnp.abs(f[2:]))) == 0.0
    # ReLU: dR/dzeta = 2 gamma p (p phi(0) - E[G2_+ 1{G1 > 0}]) != 0 on M when 0 < p < 1 (finding, see meanfield)
    m = _model("relu", zero_r=True)
    assert abs(float(field4(y0, m)[3])) > 1e-3


def test_flow_reaches_the_oracle_from_above_the_transition():
    m = _model("linear")
    traj = integrate(field5, DohmatobOverlaps(0.5, 0.05, 0.0, 0.0, 0.0).stack(), jnp.linspace(0.0, 15.0, 4), m).ys
    assert float(traj[-1, 1]) > 0.999 and abs(float(traj[-1, 0]) - 0.5) < 1e-3  # nu learnt, mu frozen (A ~ 1e-3)


def test_failed_solve_reports_its_status_instead_of_nan():
    """A solve that cannot finish (max_steps too small) comes back with diffrax's failure status, not as NaN rows;
    the same solve with enough steps succeeds. Nothing private of equinox or JAX is touched."""
    import diffrax

    m, y0, ts = _model("linear"), jnp.array([0.5, 0.05, 0.0, 0.0, 0.0]), jnp.linspace(0.0, 15.0, 4)
    bad = integrate(field5, y0, ts, m, max_steps=3)
    assert not bool(bad.succeeded)
    assert bad.result == diffrax.RESULTS.max_steps_reached
    assert bad.ys.shape == (4, 5) and bool(jnp.all(bad.ts == ts))
    good = integrate(field5, y0, ts, m)
    assert bool(good.succeeded) and bool(jnp.all(jnp.isfinite(good.ys)))
    # batched: one status per start; the stationary points report their root finding
    sols = jax.jit(jax.vmap(lambda y: integrate(field5, y, ts, m, max_steps=3)))(jnp.stack([y0, y0]))
    assert np.asarray(sols.succeeded).tolist() == [False, False]
    assert all(p.converged for p in stationary_points_on_M(_model("quadratic")))


def test_model_is_hashable_and_replaceable():
    m = _model("relu")
    assert hash(m) == hash(dataclasses.replace(m))


def test_integrate_joint_matches_separate_solves():
    """Two links' 5-D flows as one system (max-norm step control) agree with one solve per link to the tolerance,
    from starts above and below the transition."""
    from attnlab.dohmatob.flows import integrate_joint

    ts = np.linspace(0.0, 15.0, 16)
    models = [DohmatobModel(100, 20, 1.0, 1 / math.sqrt(2), link) for link in ("linear", "relu")]
    y0s = [jnp.array([[0.5, 0.1, 0.02, 0.01, 0.05], [0.05, -0.1, 0.0, 0.02, 0.0]]),
           jnp.array([[0.9, 0.2, 0.01, 0.01, 0.01]])]
    joint = integrate_joint([lambda y, m=m: field5(y, m) for m in models], y0s, ts)
    assert bool(joint.succeeded)
    joint = joint.ys
    for m, y0, tr in zip(models, y0s, joint):
        assert tr.shape == (y0.shape[0], len(ts), 5)
        alone = jax.vmap(lambda y, m=m: integrate(field5, y, ts, m))(y0).ys
        np.testing.assert_allclose(tr, alone, atol=1e-6)
        assert float(jnp.max(jnp.abs(tr[:, -1] - tr[:, 0]))) > 1e-2  # the trajectories moved


def test_diffrax_is_imported_at_the_first_solve_not_with_the_presets():
    """Loading this paper's presets imports no diffrax (nor equinox, optimistix); the first flow solve does, and it
    succeeds (the control: the same process after a solve has it)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        import attnlab.dohmatob.presets
        before = "diffrax" in sys.modules
        import jax
        from attnlab import runtime
        from attnlab.dohmatob.flows import field2, integrate
        from attnlab.dohmatob.meanfield import DohmatobModel
        with runtime.x64():
            sol = integrate(field2, jax.numpy.array([0.1, 0.1]), jax.numpy.linspace(0.0, 1.0, 3),
                            DohmatobModel(100, 20, 1.0, 0.5, "linear", True))
        print(before, "diffrax" in sys.modules, bool(sol.succeeded))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.stdout.split() == ["False", "True", "True"], res.stdout + res.stderr
