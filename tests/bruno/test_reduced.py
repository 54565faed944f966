"""Reduced models of the three phases against the simulation, and the spec's numbers to check (section 3)."""

import math

import jax
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import iv

from attnlab.bruno import initial, reduced
from attnlab.bruno.integrate import make_model, simulate
from attnlab.bruno.observables import angle_histogram, fourier_chi2

V_ALIGN = np.diag([1.0, 0.5, 0.25])


def test_alignment_closed_form_solves_limit_ode(key):
    """normalize(e^{tV} x0) solves the beta = infinity characteristic x' = P_x V x (Q = K = Id, Lemma A.13)."""
    V = np.array([[1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.25]])
    x0 = np.asarray(initial.uniform_sphere(key, 1, 3))[0]
    sol = solve_ivp(lambda _, x: V @ x - (x @ V @ x) * x, (0, 3), x0, rtol=1e-12, atol=1e-13, t_eval=[3.0])
    np.testing.assert_allclose(reduced.alignment_closed_form(x0[None], V, 3.0)[0], sol.y[:, -1], atol=1e-9)


def test_alignment_phase_against_closed_form(key):
    """Mean angle between simulated tokens and the closed form at t = 0.5, N = 1200, beta = 30.

    Bound: t |V| (5 sqrt((d-1)/N) + (d-1)/(2 beta)): the softmax mean over the ~N/beta tokens in a kernel width has
    tangent noise of standard deviation ~ N^{-1/2} per direction, and the vMF mean length is 1 - (d-1)/(2 beta).
    Found (spec item 2 [I] says O(beta^{-1/2})): at early times the error does not decrease with beta (N = 3000,
    t = 0.5: 0.0056, 0.0054, 0.0052, 0.0048 rad for beta = 15, 30, 60, 120): it is dominated by the N^{-1/2} noise;
    at t = 4 it decreases slowly with beta (0.136, 0.096, 0.071, 0.051 rad, about beta^{-1/2}) as clusters form.
    """
    n, beta, t = 1200, 30.0, 0.5
    x0 = initial.uniform_sphere(key, n, 3)
    xs, _, _ = simulate(x0, make_model(3, V=V_ALIGN, beta=beta), [t], 0.01, scheme="heun")
    cf = reduced.alignment_closed_form(np.asarray(x0), V_ALIGN, t)
    err = np.mean(np.arccos(np.clip(np.sum(cf * xs[-1], axis=-1), -1, 1)))
    bound = t * 1.0 * (5 * math.sqrt(2 / n) + 2 / (2 * beta))
    assert err < bound
    # and the simulation is much closer to the closed form than the initial tokens are
    moved = np.mean(np.arccos(np.clip(np.sum(cf * np.asarray(x0), axis=-1), -1, 1)))
    assert err < 0.2 * moved


def test_heat_kernel_convention():
    """On S^1, e^{tau Delta} delta_m is the wrapped normal of variance 2 tau (spec 2.2 convention trap [I], confirmed):
    p(theta; v = 2 tau) solves d_tau p = p''."""
    th = np.linspace(0, 2 * np.pi, 401)
    tau, h = 0.05, 1e-5

    def p(t):
        return reduced.wrapped_normal_density(th, [1.0], None, 2 * t)

    d_tau = (p(tau + h) - p(tau - h)) / (2 * h)
    g = th[1] - th[0]
    pp = p(tau)
    d2 = (np.roll(pp, -1)[1:-1] - 2 * pp[1:-1] + np.roll(pp, 1)[1:-1]) / g**2
    assert np.max(np.abs(d_tau[1:-1] - d2)) < 1e-3 * np.max(np.abs(d2))


def test_spec_numbers():
    # forward heat: variance v0 + 2t/beta, 0.04 per unit t at beta = 50 (spec item 3)
    assert reduced.heat_variances(0.1, 1.0, 50.0, -1) - 0.1 == pytest.approx(0.04)
    # backward heat, beta = 10, sigma0 = 0.2: t = 0.2 with v = sigma0^2 (our convention), 0.4 if tau = sigma0^2
    assert reduced.backward_collapse_times(0.2**2, 10.0) == pytest.approx(0.2)
    assert reduced.backward_collapse_times(2 * 0.2**2, 10.0) == pytest.approx(0.4)
    # dominant Fourier mode k* = 3 at beta = 5 (spec item 7) and the tabulated I_k(5)
    assert reduced.dominant_mode(5.0) == 3
    np.testing.assert_allclose([iv(k, 5.0) for k in range(1, 6)], [24.3, 17.5, 10.3, 5.11, 2.16], rtol=6e-3)
    # particles per kernel width (spec 1.6): about 500 (Fig. 2) and 1100 (Fig. 3) on the collapsed circle
    assert reduced.particles_per_width(10_000, 10.0, 2) == pytest.approx(503, rel=1e-2)
    assert reduced.particles_per_width(50_000, 50.0, 2) == pytest.approx(1125, rel=1e-2)
    # pairing time scale e^{beta (1 - cos)}: the exact two-point merge time over its Laplace asymptotics -> 1
    ratios = [reduced.two_point_merge_time(1.0, 0.3, b) * 2 * b * math.sin(1.0) ** 2 / math.exp(b * (1 - math.cos(1)))
              for b in (20.0, 40.0, 80.0)]
    assert abs(ratios[2] - 1) < abs(ratios[1] - 1) < abs(ratios[0] - 1) < 0.2


def test_meanfield_pde_tends_to_heat():
    """L1(finite-beta mean-field PDE, heat mixture of Eq. (7)) is O(1 / (beta v)): halves when beta doubles."""
    grid = 2 * np.pi * np.arange(256) / 256
    means, w, v0 = [0.0, 2.0, 4.0], [0.5, 0.3, 0.2], 0.1
    d0 = reduced.wrapped_normal_density(grid, means, w, v0)
    l1 = []
    for beta in (20.0, 40.0):
        t = beta * 0.05  # same heat time s = t / beta = 0.05
        pde = reduced.meanfield_s1(d0, [t], beta, -1)[0]
        heat = reduced.wrapped_normal_density(grid, means, w, reduced.heat_variances(v0, t, beta, -1))
        assert pde.sum() * 2 * np.pi / 256 == pytest.approx(1.0, abs=1e-12)  # mass conserved
        l1.append(np.abs(pde - heat).sum() * 2 * np.pi / 256)
    assert 1.6 < l1[0] / l1[1] < 2.4


def test_forward_heat_particles_against_exact_meanfield(key):
    """Forward heat at moderate N (1200 tokens, beta = 20, V = -Id, t = 0.5): the histogram is within 5 SE (i.i.d.
    multinomial sampling) of the exact finite-beta mean-field PDE; the heat mixture within that plus L1(PDE, heat).
    Found: the deterministic repulsive flow spreads tokens more evenly than i.i.d. draws, so the particle L1 is often
    below the i.i.d. mean."""
    n, beta, t = 1200, 20.0, 0.5
    means, w, v0 = [1.0, 2.5, 4.5], [0.4, 0.35, 0.25], 0.1
    x0 = initial.wrapped_normal_mixture(key, n, means, w, v0)
    xs, _, _ = simulate(x0, make_model(2, V=-np.eye(2), beta=beta), [t], 0.05 / beta)
    hist, edges = angle_histogram(xs[-1], 32)
    fine = np.linspace(0, 2 * np.pi, 32 * 16 + 1)
    grid = 2 * np.pi * np.arange(512) / 512
    pde = reduced.meanfield_s1(reduced.wrapped_normal_density(grid, means, w, v0), [t], beta, -1)[0]
    f = np.interp(fine, np.append(grid, 2 * np.pi), np.append(pde, pde[0]))
    cum = np.concatenate([[0], np.cumsum((f[1:] + f[:-1]) / 2 * np.diff(fine))])
    pde_bins = np.diff(cum[::16])
    heat_bins = reduced.wrapped_normal_bin_masses(edges, means, w, reduced.heat_variances(v0, t, beta, -1))
    draws = np.random.default_rng(1).multinomial(n, pde_bins / pde_bins.sum(), size=400) / n
    l1_iid = np.abs(draws - pde_bins).sum(axis=1)
    assert np.abs(hist - pde_bins).sum() <= l1_iid.mean() + 5 * l1_iid.std()
    bias = np.abs(pde_bins - heat_bins).sum()
    assert np.abs(hist - heat_bins).sum() <= l1_iid.mean() + 5 * l1_iid.std() + bias
    # the first Fourier moments: chi^2_k against the PDE, frozen tokens far off
    centres = 0.5 * (edges[1:] + edges[:-1])
    stat, k, _ = fourier_chi2(hist, pde_bins, centres, n)
    assert stat <= k + 5 * math.sqrt(2 * k)
    hist0 = angle_histogram(x0, 32)[0]
    assert fourier_chi2(hist0, pde_bins, centres, n)[0] > k + 5 * math.sqrt(2 * k)


def test_alignment_keeps_azimuth_in_fig2_setting(key):
    """V = diag(1, 1, -1), Q = K = Id: the closed form moves tokens along meridians (azimuth unchanged) [I, confirmed]."""
    x0 = np.asarray(initial.latitude_uniform_azimuth_mixture(jax.random.fold_in(key, 5), 200, [1.0, 3.0], None, 0.04))
    y = reduced.alignment_closed_form(x0, np.diag([1.0, 1.0, -1.0]), 2.0)
    dphi = np.angle(np.exp(1j * (np.arctan2(y[:, 1], y[:, 0]) - np.arctan2(x0[:, 1], x0[:, 0]))))
    assert np.max(np.abs(dphi)) < 1e-12


def test_heat_kernel_s2_and_spectral_solver():
    """S^2 heat: the zonal kernel agrees with the sampler's density of <x, m> (times 2 pi, area element du dphi) and
    has mass 1 on the Gauss-Legendre grid (exact for degree <= lmax; the tail e^{-l(l+1) tau} beyond l = 40 is
    < e^{-80}); forward heat maps the mixture at heat times tau to the mixture at tau + 0.03 (the semigroup, to
    rounding); backward heat maps it to tau - 0.03 within the dropped tail bound
    sum_{l > l_cut} (2l + 1) / (4 pi) e^{-l (l + 1) min tau'} (|P_l| <= 1, weights summing to 1)."""
    c = np.linspace(-1, 1, 101)
    np.testing.assert_allclose(2 * np.pi * reduced.heat_kernel_s2(c, 0.05), initial.heat_kernel_s2_cos_density(c, 0.05),
                               atol=1e-12)
    lmax = 40
    pts, _, _, w = reduced.s2_grid(lmax)
    assert abs(w.sum() - 4 * np.pi) < 1e-12
    means, weights, taus = np.array([[0, 0, 1.0], [1.0, 1.0, 0.0]]), [0.6, 0.4], np.array([0.05, 0.08])
    f0 = reduced.heat_mixture_s2(pts, means, weights, taus)
    assert abs(np.sum(w * f0) - 1) < 1e-12
    fwd = reduced.heat_solve_s2(f0, 0.03, lmax)
    assert np.max(np.abs(fwd - reduced.heat_mixture_s2(pts, means, weights, taus + 0.03))) < 1e-12 * np.max(f0)
    max_gain = 1e8
    bwd = reduced.heat_solve_s2(f0, -0.03, lmax, max_gain=max_gain)
    ells = np.arange(lmax + 1)
    lcut = ells[np.exp(0.03 * ells * (ells + 1)) <= max_gain].max()
    tail_l = np.arange(lcut + 1, 400)
    tail = np.sum((2 * tail_l + 1) / (4 * np.pi) * np.exp(-tail_l * (tail_l + 1) * (taus.min() - 0.03)))
    exact = reduced.heat_mixture_s2(pts, means, weights, taus - 0.03)
    assert np.max(np.abs(bwd - exact)) < tail + max_gain * 1e-15 * np.max(f0)
    np.testing.assert_allclose(reduced.heat_times([0.05], 2.0, 10.0, -1), [0.25])  # forward: tau grows as t / beta
    with pytest.raises(ValueError, match="s2_grid"):
        reduced.heat_solve_s2(f0[:, :-1], 0.01, lmax)
