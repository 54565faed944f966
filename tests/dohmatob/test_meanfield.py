"""Dohmatob's mean-field theory against Monte Carlo, quadrature and finite differences (spec B3-B5)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

from attnlab.dohmatob.meanfield import (
    DohmatobModel,
    bvn_cdf_h0,
    corollary1_risk,
    dual_kernel,
    kernel_terms,
    localisation_derivative,
    localisation_probability,
    mc_risk_batch,
    mean_field_risk,
    owens_t_any,
    relu_cross_moment,
    rem_constants,
)
from attnlab.slr.overlaps import DohmatobOverlaps

G = 1 / math.sqrt(2)
FIG2 = DohmatobModel(100, 20, 1.0, G)


def test_rem_constants_figure2():
    """Spec B3 [V-num]: alpha = 0.02944, beta_crit = psi = r = 0.2427 = sqrt(2 ln 19)/sqrt(d) (frozen phase)."""
    rem = rem_constants(100, 20, 1.0)
    assert round(rem.alpha, 5) == 0.02944
    assert round(rem.beta_crit, 4) == 0.2427
    assert round(rem.psi, 4) == 0.2427 and round(rem.r, 4) == 0.2427
    assert abs(rem.psi - math.sqrt(2 * math.log(19)) / 10) < 1e-15
    assert abs(FIG2.transition_mu - 0.3432) < 1e-4  # psi / c (spec B7: 0.343)


def test_rem_constants_high_temperature_branch_is_continuous():
    hot = rem_constants(100, 20, 0.1)  # beta < beta_crit
    assert hot.r == 0.1 and abs(hot.phi - (hot.alpha + 0.005)) < 1e-15
    bc = rem_constants(100, 20, 1.0).beta_crit
    lo, hi = rem_constants(100, 20, bc * (1 - 1e-9)), rem_constants(100, 20, bc * (1 + 1e-9))
    assert abs(lo.psi - hi.psi) < 1e-8 and abs(lo.psi - bc) < 1e-8  # psi = beta_crit at the transition


def test_A_is_the_derivative_of_p():
    mus = jnp.linspace(-0.2, 0.6, 9)
    np.testing.assert_allclose(jax.vmap(jax.grad(lambda m: localisation_probability(m, FIG2)))(mus),
                               localisation_derivative(mus, FIG2), rtol=1e-12, atol=1e-300)
    assert float(localisation_probability(FIG2.transition_mu, FIG2)) == pytest.approx(0.5)


def test_general_link_formula_reduces_to_corollary1():
    m = DohmatobModel(100, 20, 1.0, 0.6)  # r = beta_crit != 0: the rho terms are exercised
    pts = np.random.default_rng(0).uniform(-0.6, 0.6, (20, 4))
    for mu, nu, zeta, rho in pts:
        o = DohmatobOverlaps(mu=mu, nu=nu, eta=0.0, zeta=zeta, rho=rho)
        assert float(mean_field_risk(o, m)) == pytest.approx(float(corollary1_risk(o, m)), rel=1e-12, abs=1e-12)


# Spec B4 table (d = 100, L = 20, beta = 1, gamma = 1/sqrt(2), exact softmax, 2e5 samples) [V-num]
B4 = [  # mu, nu, zeta, Cor. 1, spec MC
    (1.0, 1.0, 0.0, 0.0000, 0.0000),
    (0.9, 0.8, 0.0, 0.2000, 0.1994),
    (0.5, 0.9, 0.0, 0.1000, 0.1335),
    (0.3, 0.5, 0.0, 0.4785, 0.7738),
    (0.2, 0.9, 0.0, 0.5000, 0.9085),
    (0.6, 0.6, 0.05, 0.5250, 0.5280),
]


@pytest.fixture(scope="module")
def b4_mc():
    o = DohmatobOverlaps(mu=jnp.array([r[0] for r in B4]), nu=jnp.array([r[1] for r in B4]), eta=0.0,
                         zeta=jnp.array([r[2] for r in B4]), rho=0.0)
    mean, se = mc_risk_batch(jax.random.key(0), o, FIG2, 60_000)
    return np.asarray(mean), np.asarray(se)


def test_corollary1_column_of_b4(b4_mc):
    for mu, nu, zeta, cor1, _ in B4:
        o = DohmatobOverlaps(mu=mu, nu=nu, eta=0.0, zeta=zeta, rho=0.0)
        assert float(corollary1_risk(o, FIG2)) == pytest.approx(cor1, abs=6e-5)


def test_our_monte_carlo_reproduces_the_spec_column(b4_mc):
    """Independent MC of the exact model vs the spec authors' (2e5 samples; their SE taken as ours / sqrt(2))."""
    mean, se = b4_mc
    for (mu, nu, zeta, _, spec), m_, s in zip(B4, mean, se):
        assert abs(m_ - spec) <= 5 * s * math.sqrt(1.5) + 5e-5, (mu, nu, zeta, m_, spec)


def test_corollary1_matches_monte_carlo_where_the_token_is_located(b4_mc):
    """Rows with c mu - psi >= 5 gamma / sqrt(d) (mu >= 0.84 here, and the zeta = 0.05 row at mu = 0.6 within 5 SE)."""
    mean, se = b4_mc
    for i in (0, 1, 5):
        mu, nu, zeta, cor1, _ = B4[i]
        o = DohmatobOverlaps(mu=mu, nu=nu, eta=0.0, zeta=zeta, rho=0.0)
        assert abs(float(corollary1_risk(o, FIG2)) - mean[i]) <= 5 * se[i] + 1e-12, B4[i]


def test_mean_field_gap_below_and_near_the_transition_is_reported(b4_mc):
    """Not hidden: O(1) gaps for mu < psi/c, and a 30-sigma gap at mu = 0.5 although p(0.5) = 0.99998 (the secret
    token's logit fluctuates by gamma beta sqrt(d) = 7 around a margin (c mu - psi) beta d = 11)."""
    mean, se = b4_mc
    gap = mean - np.array([r[3] for r in B4])
    assert float(localisation_probability(0.5, FIG2)) > 0.9999
    assert gap[2] > 10 * se[2] and 0.02 < gap[2] < 0.05
    assert gap[3] > 0.25 and gap[4] > 0.35


@pytest.mark.parametrize("link", ["quadratic", "relu"])
def test_general_link_mean_field_vs_monte_carlo_located(link):
    m = DohmatobModel(100, 20, 1.0, G, link)
    pts = [DohmatobOverlaps(1.0, 0.7, 0.0, 0.0, 0.0), DohmatobOverlaps(0.95, 0.3, 0.0, 0.01, 0.0),
           DohmatobOverlaps(0.9, -0.5, 0.0, -0.02, 0.0)]
    batch = DohmatobOverlaps(*(jnp.array(x) for x in zip(*pts)))
    mean, se = mc_risk_batch(jax.random.key(1), batch, m, 30_000)
    for o, mc, s in zip(pts, np.asarray(mean), np.asarray(se)):
        assert abs(float(mean_field_risk(o, m)) - mc) <= 5 * s, (link, o)


# ---------------------------------------------------------------------------------------------------------------
# dual kernels against quadrature


SQRT_2PI = math.sqrt(2 * math.pi)


def _quad_terms(nu, a, b, g, sigma):
    """E S1^2, E S1 S2, E S2^2 by adaptive quadrature (conditioning G2 on G1)."""
    s = math.sqrt(max(1 - nu**2, 0.0))
    phi = lambda z: math.exp(-0.5 * z * z) / SQRT_2PI  # noqa: E731 (scipy.stats.norm.pdf: the same, 50x slower)
    S1 = lambda x: sigma(g * x + a) - sigma(b)  # noqa: E731

    def inner(x):  # E[S2(nu x + s Z)]
        if s == 0:
            return sigma(g * nu * x) - sigma(b)
        return scipy.integrate.quad(lambda z: (sigma(g * (nu * x + s * z)) - sigma(b)) * phi(z), -12, 12,
                                    points=[-nu * x / s] if s > 0 else None, epsabs=1e-13, limit=200)[0]

    kinks = [-a / g, 0.0]
    H1 = scipy.integrate.quad(lambda x: S1(x) ** 2 * phi(x), -12, 12, points=kinks, epsabs=1e-13, limit=200)[0]
    H2 = scipy.integrate.quad(lambda x: S1(x) * inner(x) * phi(x), -12, 12, points=kinks, epsabs=1e-12, limit=200)[0]
    H0 = scipy.integrate.quad(lambda x: (sigma(g * x) - sigma(b)) ** 2 * phi(x), -12, 12, points=[0.0],
                              epsabs=1e-13, limit=200)[0]
    return H1, H2, H0


LINK_NP = {"linear": lambda t: t, "quadratic": lambda t: t * t, "relu": lambda t: max(t, 0.0)}


@pytest.mark.parametrize("link", ["linear", "quadratic", "relu"])
@pytest.mark.parametrize("nu,a,b", [(0.3, 0.0, 0.0), (-0.7, 0.4, 0.0), (0.9, -0.5, 0.8), (1.0, 0.3, -0.2),
                                    (-1.0, 0.6, 0.5)])
def test_kernel_closed_forms_against_quadrature(link, nu, a, b):
    g = 0.7
    ref = _quad_terms(nu, a, b, g, LINK_NP[link])
    got = [float(x) for x in kernel_terms(nu, a, b, g, link)]
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("nu,a,b", [(0.3, 0.0, 0.0), (-0.7, 0.4, 0.2), (0.9, -0.5, 0.8)])
def test_gauss_hermite_generic_link(nu, a, b):
    """A callable link goes through bivariate Gauss-Hermite: exact for polynomials, checked on tanh by quadrature."""
    g = 0.7
    poly = lambda t: t * t  # noqa: E731
    np.testing.assert_allclose([float(x) for x in kernel_terms(nu, a, b, g, poly)],
                               [float(x) for x in kernel_terms(nu, a, b, g, "quadratic")], rtol=1e-11)
    ref = _quad_terms(nu, a, b, g, math.tanh)
    np.testing.assert_allclose([float(x) for x in kernel_terms(nu, a, b, g, jnp.tanh)], ref, rtol=1e-9, atol=1e-10)


def test_dual_kernels_match_prop11():
    g = 0.6
    for nu in (-1.0, -0.4, 0.0, 0.5, 1.0):
        assert float(dual_kernel(nu, g, "linear")) == pytest.approx(g**2 * nu, abs=1e-15)
        assert float(dual_kernel(nu, g, "quadratic")) == pytest.approx(g**4 * (1 + 2 * nu**2), rel=1e-14)
        arc = g**2 * (math.sqrt(1 - nu**2) + nu * math.acos(-nu)) / (2 * math.pi)
        assert float(dual_kernel(nu, g, "relu")) == pytest.approx(arc, rel=1e-12, abs=1e-15)


def test_bivariate_pieces_against_scipy():
    for h in (-1.3, 0.0, 0.7, 2.5):
        for nu in (-0.95, -0.3, 0.0, 0.6, 0.999):
            ref = scipy.stats.multivariate_normal(mean=[0, 0], cov=[[1, nu], [nu, 1]]).cdf([h, 0.0])
            assert float(bvn_cdf_h0(h, nu)) == pytest.approx(ref, abs=2e-7)  # scipy's cdf is accurate to ~1e-7
    for h in (0.0, 0.4, 1.7):
        for a in (-7.0, -1.5, 0.3, 1.0, 3.0, 40.0):
            assert float(owens_t_any(h, a)) == pytest.approx(scipy.special.owens_t(h, a), abs=1e-14)


def test_relu_cross_moment_derivatives_by_finite_differences():
    dI = jax.grad(relu_cross_moment, argnums=(0, 1))
    e = 1e-6
    for h in (-0.8, 0.0, 0.9):
        for nu in (-0.6, 0.2, 0.8):
            gh, gn = (float(x) for x in dI(h, nu))
            assert gh == pytest.approx((float(relu_cross_moment(h + e, nu)) - float(relu_cross_moment(h - e, nu))) / (2 * e),
                                       abs=1e-7)
            assert gn == pytest.approx((float(relu_cross_moment(h, nu + e)) - float(relu_cross_moment(h, nu - e))) / (2 * e),
                                       abs=1e-7)
        # one-sided at nu = +-1 (Price's theorem keeps the derivative finite there)
        for nu, sgn in ((1.0, -1), (-1.0, 1)):
            fd = (float(relu_cross_moment(h, nu + sgn * e)) - float(relu_cross_moment(h, nu))) / (sgn * e)
            assert float(dI(h, nu)[1]) == pytest.approx(fd, abs=2e-3)


def test_mc_risk_batches_is_mc_risk_batch_per_model():
    """Several models in one compiled call: the same numbers as one call per model with the same keys."""
    from attnlab.dohmatob.meanfield import mc_risk_batches

    ms = [DohmatobModel(64, 6, 1.0, 0.7, link) for link in ("linear", "relu")]
    os_ = [DohmatobOverlaps(*jnp.array([[0.9, 0.8, 0.0, 0.1, 0.1], [0.3, 0.2, 0.1, 0.0, 0.0]]).T),
           DohmatobOverlaps.on_M(jnp.ones(1), jnp.ones(1))]
    keys = [jax.random.key(3), jax.random.key(4)]
    for (mean, se), k, o, m in zip(mc_risk_batches(keys, os_, ms, 2000), keys, os_, ms):
        m1, s1 = mc_risk_batch(k, o, m, 2000)
        np.testing.assert_allclose(mean, m1, rtol=1e-12)
        np.testing.assert_allclose(se, s1, rtol=1e-12)
        assert mean.shape == (o.mu.shape[0],)


def test_mc_risk_batches_to_se_draws_each_point_as_far_as_its_target():
    """Target 0: every one of the n draws, the same numbers as :func:`mc_risk` over the point's key with the same
    chunks; target inf: two chunks; a target between: the first chunk count whose SE reaches it, an SE the full draw
    would not have needed."""
    from attnlab.dohmatob.meanfield import mc_risk, mc_risk_batches_to_se

    ms = [DohmatobModel(64, 6, 1.0, 0.7, link) for link in ("linear", "relu")]
    os_ = [DohmatobOverlaps(*jnp.array([[0.9, 0.8, 0.0, 0.1, 0.1], [0.3, 0.2, 0.1, 0.0, 0.0]]).T),
           DohmatobOverlaps.on_M(jnp.array([1.0, 0.5]), jnp.array([1.0, 0.2]))]
    keys = [jax.random.key(3), jax.random.key(4)]
    n, chunk = 8000, 1000
    out = mc_risk_batches_to_se(keys, os_, ms, [[0.0, np.inf], [0.0, 0.0]], n, chunk=chunk)
    for (mean, se, count), key, o, m in zip(out, keys, os_, ms):
        pk = jax.random.split(key, 2)
        one, one_se = mc_risk(pk[0], DohmatobOverlaps(*(jnp.broadcast_to(x, (2,))[0] for x in o)), m, n, chunk=chunk)
        assert int(count[0]) == n
        np.testing.assert_allclose([mean[0], se[0]], [one, one_se], rtol=1e-10)
    assert int(out[0][2][1]) == 2 * chunk
    full_se = float(out[1][1][1])
    (_, se, count), = mc_risk_batches_to_se([keys[1]], [os_[1]], [ms[1]], [[0.0, 2 * full_se]], n, chunk=chunk)
    assert 2 * chunk <= int(count[1]) < n and float(se[1]) <= 2 * full_se


def test_mc_risk_gammas_draws_what_mc_risk_batch_draws_for_each_gamma():
    """One program for several gammas (gamma traced): the same means and SEs as one mc_risk_batch per gamma with the
    same keys, to round-off; a gamma outside (0, 1) is refused as the model refuses it."""
    from attnlab.dohmatob.meanfield import mc_risk_gammas

    gammas, keys = [0.3, 0.8, 0.97], jnp.stack([jax.random.key(i) for i in range(3)])
    o = DohmatobOverlaps.on_M(1.0, 1.0)
    for link, L in (("linear", 5), ("relu", 21)):
        mean, se = mc_risk_gammas(keys, o, gammas, 64, L, 1.0, link, 3000)
        for k, g, m1, s1 in zip(keys, gammas, np.asarray(mean), np.asarray(se)):
            ref, ref_se = mc_risk_batch(k, DohmatobOverlaps.on_M(jnp.ones(1), jnp.ones(1)),
                                        DohmatobModel(64, L, 1.0, g, link), 3000)
            np.testing.assert_allclose([m1, s1], [float(ref[0]), float(ref_se[0])], rtol=1e-12)
    with pytest.raises(ValueError):
        mc_risk_gammas(keys, o, [0.3, 1.0, 0.5], 64, 5, 1.0, "linear", 100)


def test_one_overlap_order_mc_risk_and_mc_risk_batch_agree():
    """The named overlaps mean the same in both estimators: mc_risk at one point and mc_risk_batch at the same point
    agree within 5 SE, while swapping eta and zeta (the two orders that once coexisted) moves the risk by far more."""
    from attnlab.dohmatob.meanfield import mc_risk

    m = DohmatobModel(64, 8, 1.0, G)
    o = DohmatobOverlaps(mu=0.9, nu=0.6, eta=0.0, zeta=0.15, rho=0.1)
    swapped = o._replace(eta=o.zeta, zeta=o.eta)
    one, one_se = mc_risk(jax.random.key(5), o, m, 20_000)
    batch, batch_se = mc_risk_batch(jax.random.key(6), DohmatobOverlaps(*(jnp.array([x, y]) for x, y in zip(o, swapped))),
                                    m, 20_000)
    assert abs(float(one) - float(batch[0])) <= 5 * math.hypot(float(one_se), float(batch_se[0]))
    assert abs(float(batch[0]) - float(batch[1])) > 20 * math.hypot(float(batch_se[0]), float(batch_se[1]))
    assert float(mean_field_risk(o, m)) == pytest.approx(float(mean_field_risk(o.to_marion().to_dohmatob(), m)))


# ---------------------------------------------------------------------------------------------------------------
# the closed form's round-off bound, against the same formula in extended precision


def _risk_on_M_longdouble(mu, nu, m):
    """``R_bar`` on M (a = b = 0) in NumPy's long double (64-bit mantissa on x86) from the same float64 inputs."""
    ld = np.longdouble
    x = (ld(m.c) * ld(mu) - ld(float(m.psi))) * ld(m.beta) * ld(m.d)
    p = 1 / (1 + np.exp(-x))
    g, nu = ld(m.gamma), ld(nu)
    if m.link == "linear":
        H1, H2 = g**2, g**2 * nu
    elif m.link == "quadratic":
        H1, H2 = 3 * g**4, g**4 * (1 + 2 * nu**2)
    else:  # relu: E relu(gG)^2 = g^2 / 2, E relu(gG1) relu(gG2) = g^2 (sqrt(1 - nu^2) + nu arccos(-nu)) / (2 pi)
        H1, H2 = g**2 / 2, g**2 * (np.sqrt(max(1 - nu**2, ld(0))) + nu * np.arccos(-nu)) / (2 * np.pi)
    return p**2 * H1 - 2 * p * H2 + H1


@pytest.mark.parametrize("link", ["linear", "quadratic", "relu"])
def test_the_round_off_bound_covers_the_closed_forms_float64_error(link):
    """|R_bar(float64) - R_bar(long double)| <= the bound, at the stationary points on M (where R_bar vanishes by
    algebra at the located ones) and at random points of M; the bound stays far below the risks a check compares
    (the mirror points' O(1) risks), so that it does not blind the Monte Carlo comparison."""
    from attnlab.dohmatob.meanfield import mean_field_risk_roundoff

    m = DohmatobModel(100, 20, 1.0, G, link)
    rng = np.random.default_rng(0)
    pts = [(1.0, 1.0), (1.0, -1.0), (-1.0, 1.0), (1.0, 0.0)] + [tuple(rng.uniform(-1, 1, 2)) for _ in range(40)]
    for mu, nu in pts:
        o = DohmatobOverlaps.on_M(mu, nu)
        err = abs(float(mean_field_risk(o, m)) - float(_risk_on_M_longdouble(mu, nu, m)))
        bound = float(mean_field_risk_roundoff(o, m))
        assert err <= bound, (link, mu, nu, err, bound)
        assert bound < 1e-13, (link, mu, nu, bound)
    assert float(mean_field_risk(DohmatobOverlaps.on_M(-1.0, -1.0), m)) > 1e3 * 1e-13
