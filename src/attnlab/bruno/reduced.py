r"""Reduced models of the three phases (Bruno, Pasqualotto, Agazzi, arXiv 2509.25040).

* **Alignment** (Thm 3.2, Lemmas A.13/A.15): for Q = K = Id the beta -> infinity characteristics are exactly
  x(t) = normalize(e^{tV} x_0). In general y(t) = normalize(e^{tM} y_0), M = V K^T Q, up to the time change
  f(t) = int_0^t ds / |B^T x(s)|, B = Q^T K.
* **Heat** (Prop 3.9, Eq. (7)): on the collapsed circle, in time s = t / beta, the law solves d_s mu = -gamma
  mu'' (gamma = +1 backward for V = +Id, -1 forward for V = -Id). A mixture of wrapped normals of variances v_j stays a
  mixture with the same means and weights and variances v_j - 2 gamma t / beta (heat time tau_j = v_j / 2).
  The backward solution exists until the first collapse, t = beta v_min / 2 = beta tau_min.
* **Heat on S^2**: on a collapsed S^2 (E_max = R^3, e.g. Q = K = Id, V = -Id) the same limit gives
  e^{tau Delta} with Delta the Laplace-Beltrami operator and heat time tau_j(t) = tau_j - gamma t / beta
  (``heat_times``; on S^1 the same rule reads v_j - 2 gamma t / beta for variances v = 2 tau). The heat kernel is the
  zonal series k_tau(<x, m>) = sum_l (2l + 1) / (4 pi) e^{-l (l + 1) tau} P_l(<x, m>) (addition theorem,
  Delta Y_lm = -l (l + 1) Y_lm), and ``heat_solve_s2`` propagates any density given on a Gauss-Legendre grid by
  multiplying its spherical-harmonic coefficients by e^{-l (l + 1) tau} (tau < 0: backward heat, truncated where the
  amplification would exceed 1e8).
* **Pairing** (Prop 3.11): with time change dt = e^{beta (1 - <y_i, y_j>)} ds, the closest pair (i, j) follows
  dy_i/ds = P_{y_i} y_j, dy_j/ds = P_{y_j} y_i and the others stay put; two points at angle theta_0 therefore close
  as d theta/ds = -2 sin theta, and the merge time is ~ e^{beta (1 - cos theta_min)}.
* **Equiangular ODE** (Q = K = V = Id, all pairwise inner products rho):
  SA: rho' = 2 e^{beta rho} (1 - rho)(1 + (n - 1) rho) / (e^beta + (n - 1) e^{beta rho});
  USA (1/n): rho' = (2/n) e^{beta rho} (1 - rho)(1 + (n - 1) rho).
* **Linearised mode growth on S^1** (the ICLR 2025 predecessor): mode k grows at a rate proportional to
  k^2 I_k(beta); the dominant mode k* = argmax_k k^2 I_k(beta).
"""

from __future__ import annotations

import numpy as np

# scipy's integrate, linalg and special are imported by the functions that use them, not with the paper

__all__ = [
    "alignment_closed_form",
    "emax_basis",
    "wrapped_normal_density",
    "wrapped_normal_cdf",
    "wrapped_normal_bin_masses",
    "heat_variances",
    "backward_collapse_times",
    "heat_times",
    "heat_kernel_s2",
    "heat_mixture_s2",
    "s2_grid",
    "heat_solve_s2",
    "pairing_time",
    "two_point_angle",
    "equiangular_rhs",
    "equiangular_rho",
    "dominant_mode",
    "meanfield_s1",
    "two_point_merge_time",
    "particles_per_width",
]


def alignment_closed_form(x0, V, t):
    """normalize(e^{tV} x0) for rows x0 (N, d): the Q = K = Id alignment-phase limit at time t."""
    from scipy.linalg import expm

    y = np.asarray(x0) @ expm(t * np.asarray(V, dtype=float)).T
    return y / np.linalg.norm(y, axis=-1, keepdims=True)


def emax_basis(Q, K, V, tol: float = 1e-9):
    """Orthonormal basis (d, k) of E_max, the real span of the eigenvectors of M = V K^T Q for the eigenvalues of
    largest real part (assumed semisimple; a complex pair contributes its real and imaginary parts)."""
    M = np.asarray(V, float) @ np.asarray(K, float).T @ np.asarray(Q, float)
    w, vecs = np.linalg.eig(M)
    top = np.abs(w.real - w.real.max()) <= tol * max(1.0, np.abs(w).max())
    span = np.concatenate([vecs[:, top].real, vecs[:, top].imag], axis=1)
    u, s, _ = np.linalg.svd(span, full_matrices=False)
    return u[:, s > 1e-8 * s.max()]


def _wn_parts(means, weights, variances):
    means = np.atleast_1d(np.asarray(means, float))
    weights = np.ones_like(means) / means.size if weights is None else np.atleast_1d(np.asarray(weights, float))
    variances = np.broadcast_to(np.asarray(variances, float), means.shape)
    return means, weights, variances


def _kmax(v):
    return int(np.ceil(np.sqrt(2 * 40 / max(float(np.min(v)), 1e-8)))) + 2


def wrapped_normal_density(theta, means, weights=None, variances=0.04):
    """Density on [0, 2 pi) of sum_j w_j WN(m_j, v_j): (1/2pi)(1 + 2 sum_k e^{-k^2 v/2} cos k(theta - m))."""
    means, weights, variances = _wn_parts(means, weights, variances)
    theta = np.asarray(theta, float)[..., None]
    ks = np.arange(1, _kmax(variances) + 1)
    out = 0.0
    for m, w, v in zip(means, weights, variances):
        series = np.exp(-(ks**2) * v / 2) * np.cos(ks * (theta - m))
        out = out + w * (1 + 2 * series.sum(-1)) / (2 * np.pi)
    return out


def wrapped_normal_cdf(theta, means, weights=None, variances=0.04):
    """int_0^theta of :func:`wrapped_normal_density` (theta in [0, 2 pi])."""
    means, weights, variances = _wn_parts(means, weights, variances)
    theta = np.asarray(theta, float)[..., None]
    ks = np.arange(1, _kmax(variances) + 1)
    out = 0.0
    for m, w, v in zip(means, weights, variances):
        series = np.exp(-(ks**2) * v / 2) * (np.sin(ks * (theta - m)) + np.sin(ks * m)) / ks
        out = out + w * (theta[..., 0] / (2 * np.pi) + series.sum(-1) / np.pi)
    return out


def wrapped_normal_bin_masses(edges, means, weights=None, variances=0.04):
    """Probability of each bin [edges[b], edges[b + 1]) under the mixture (edges within [0, 2 pi])."""
    return np.diff(wrapped_normal_cdf(np.asarray(edges, float), means, weights, variances))


def heat_variances(v0, t, beta: float, gamma: int):
    """Wrapped-normal variances at time t of the heat phase: v0 - 2 gamma t / beta (gamma = -1 forward, +1 backward)."""
    return np.asarray(v0, float) - 2.0 * gamma * np.asarray(t, float) / beta


def backward_collapse_times(v0, beta: float):
    """Backward heat (gamma = +1): component j collapses at t_j = beta v_j / 2 = beta tau_j."""
    return beta * np.asarray(v0, float) / 2


def heat_times(tau0, t, beta: float, gamma: int):
    """Heat times at time t of the heat phase on S^2 (or S^{d-1}): tau0 - gamma t / beta (gamma = -1 forward)."""
    return np.asarray(tau0, float) - gamma * np.asarray(t, float) / beta


def _lmax_heat(tau: float) -> int:
    return int(np.ceil(np.sqrt(40.0 / max(float(tau), 1e-8)))) + 2  # e^{-l (l + 1) tau} < e^{-40} beyond


def heat_kernel_s2(cos_angle, tau: float, lmax: int | None = None):
    """Density w.r.t. area on S^2 (total mass 1) of e^{tau Delta} delta_m at points x with <x, m> = cos_angle:
    sum_{l <= lmax} (2l + 1) / (4 pi) e^{-l (l + 1) tau} P_l(cos_angle) (Legendre recurrence)."""
    if not tau > 0:
        raise ValueError(f"the heat kernel needs tau > 0 (got {tau})")
    lmax = _lmax_heat(tau) if lmax is None else lmax
    c = np.asarray(cos_angle, float)
    p_prev, p = np.ones_like(c), c
    out = (1.0 + 3.0 * np.exp(-2 * tau) * c) / (4 * np.pi)
    for ell in range(1, lmax):
        p_prev, p = p, ((2 * ell + 1) * c * p - ell * p_prev) / (ell + 1)
        out = out + (2 * ell + 3) / (4 * np.pi) * np.exp(-(ell + 1) * (ell + 2) * tau) * p
    return out


def heat_mixture_s2(x, means, weights=None, taus=0.02):
    """Density at points x (..., 3) of sum_j w_j e^{tau_j Delta} delta_{m_j} (means (M, 3), heat times tau_j)."""
    means = np.asarray(means, float).reshape(-1, 3)
    means = means / np.linalg.norm(means, axis=1, keepdims=True)
    weights = np.full(len(means), 1 / len(means)) if weights is None else np.asarray(weights, float)
    taus = np.broadcast_to(np.asarray(taus, float), (len(means),))
    x = np.asarray(x, float)
    return sum(w * heat_kernel_s2(x @ m, tau) for m, w, tau in zip(means, weights, taus))


def s2_grid(lmax: int):
    """Gauss-Legendre grid exact for spherical harmonics of degree <= lmax: polar angles theta_i with cos theta_i the
    lmax + 1 Gauss-Legendre nodes, 2 lmax + 2 equispaced azimuths. Returns (points (n_theta, n_phi, 3), theta, phi,
    area weights (n_theta, n_phi), summing to 4 pi)."""
    c, w = np.polynomial.legendre.leggauss(lmax + 1)
    theta = np.arccos(c)
    phi = 2 * np.pi * np.arange(2 * lmax + 2) / (2 * lmax + 2)
    st = np.sin(theta)[:, None]
    pts = np.stack([st * np.cos(phi), st * np.sin(phi), np.broadcast_to(c[:, None], (c.size, phi.size))], axis=-1)
    return pts, theta, phi, np.outer(w, np.full(phi.size, 2 * np.pi / phi.size))


def heat_solve_s2(values, tau: float, lmax: int, max_gain: float = 1e8):
    """e^{tau Delta} applied to a function given on ``s2_grid(lmax)`` (values (lmax + 1, 2 lmax + 2)).

    Spherical-harmonic analysis a_lm = sum w f conj(Y_lm) (exact for degree <= lmax), a_lm <- e^{-l (l + 1) tau}
    a_lm, synthesis on the same grid. Forward (tau >= 0) is exact up to the band limit. Backward heat (tau < 0) is
    ill-posed: degree l is amplified by e^{|tau| l (l + 1)}, so degrees with amplification above ``max_gain`` are
    dropped (relative rounding errors of 1e-16 then grow to at most 1e-8); for data analytic enough (a heat-kernel
    mixture whose heat times all exceed |tau|) the dropped tail is sum_{l > l_cut} (2l + 1)/(4 pi) e^{-l (l+1) tau'}.
    """
    from scipy.special import sph_harm_y

    _, theta, phi, w = s2_grid(lmax)
    f = np.asarray(values, float)
    if f.shape != w.shape:
        raise ValueError(f"values must live on s2_grid({lmax}) (shape {w.shape}, got {f.shape})")
    ells = np.arange(lmax + 1)
    gains = np.exp(-ells * (ells + 1) * tau)
    lcut = int(np.max(ells[gains <= max_gain]))
    # f(theta, phi) = sum_m e^{i m phi} F_m(theta); Y_lm(theta, phi) = Theta_lm(theta) e^{i m phi} (Theta real)
    n_phi = phi.size
    fm = np.fft.fft(f, axis=1) * (2 * np.pi / n_phi)  # int f e^{-i m phi} dphi for m = 0, 1, ..., -1
    wt = w[:, 0] / (2 * np.pi / n_phi)  # Gauss-Legendre weights in cos theta
    out_m = np.zeros_like(fm)
    for m in range(-lcut, lcut + 1):
        ls = np.arange(abs(m), lcut + 1)
        big_theta = sph_harm_y(ls[:, None], m, theta[None, :], 0.0).real  # (n_l, n_theta)
        a = big_theta @ (wt * fm[:, m])  # a_lm
        out_m[:, m] = (gains[ls] * a) @ big_theta
    return np.fft.ifft(out_m, axis=1).real * n_phi


def pairing_time(ci, cj, beta: float):
    """Time scale e^{beta (1 - <c_i, c_j>)} of the merge of the closest pair of cluster centres."""
    return float(np.exp(beta * (1.0 - float(np.dot(ci, cj)))))


def two_point_angle(theta0, t, beta: float):
    """Angle between two SA particles (Q = K = V = Id, N = 2) at times t, solving exactly
    theta' = -2 sin(theta) e^{beta cos theta} / (e^beta + e^{beta cos theta})."""
    from scipy.integrate import solve_ivp

    def rhs(_, th):
        return -2 * np.sin(th) / (1 + np.exp(beta * (1 - np.cos(th))))

    sol = solve_ivp(rhs, (0, float(np.max(t))), [theta0], t_eval=np.atleast_1d(t), rtol=1e-11, atol=1e-13,
                    method="DOP853")
    return sol.y[0]


def equiangular_rhs(rho, beta: float, n: int, normalization: str = "sa"):
    """rho' for n equiangular tokens (Q = K = V = Id), SA or USA (1/n) normalisation."""
    base = 2 * (1 - rho) * (1 + (n - 1) * rho)
    if normalization == "sa":
        return base / (np.exp(beta * (1 - rho)) + (n - 1))
    return base * np.exp(beta * rho) / n


def equiangular_rho(rho0: float, t, beta: float, n: int, normalization: str = "sa"):
    """Solve the equiangular ODE to times t (rtol 1e-11)."""
    from scipy.integrate import solve_ivp

    sol = solve_ivp(lambda _, r: equiangular_rhs(r, beta, n, normalization), (0, float(np.max(t))), [rho0],
                    t_eval=np.atleast_1d(t), rtol=1e-11, atol=1e-13, method="DOP853")
    return sol.y[0]


def dominant_mode(beta: float, kmax: int = 50) -> int:
    """k* = argmax_k k^2 I_k(beta) (I_k the modified Bessel function), the first mode to grow on S^1."""
    from scipy.special import ive

    ks = np.arange(1, kmax + 1)
    return int(ks[np.argmax(ks**2 * ive(ks, beta))])


def meanfield_s1(density0, t, beta: float, gamma: int = -1, dt: float | None = None):
    r"""The exact finite-beta mean-field PDE on S^1 for Q = K = Id, V = gamma Id (SA), solved spectrally.

    On S^1 the SA velocity is an exact derivative: with c = K_beta * mu, K_beta(u) = e^{beta cos u},

        theta' = gamma P_x m_beta(x) = (gamma / beta) d_theta log c(theta),   (d_theta e^{beta cos(phi - theta)} =
        beta sin(phi - theta) e^{beta cos(phi - theta)}), so  d_t mu = -(gamma / beta) d_theta(mu c' / c).

    As beta -> infinity c ~ mu and this is the heat equation d_t mu = -(gamma / beta) mu'' (the heat phase); at finite
    beta the smoothing by K_beta (width beta^{-1/2}) gives a relative correction O(1 / (beta v)) for structures of
    variance v. ``density0`` holds the density on M equispaced points theta_k = 2 pi k / M; classical RK4 in time with
    a step below the spectral stability bound; returns the densities at the times ``t`` (len(t), M).
    """
    from scipy.special import ive

    mu = np.asarray(density0, float).copy()
    m = mu.size
    ks = np.fft.rfftfreq(m, 1.0 / m)
    kern = ive(ks, beta)  # Fourier coefficients of e^{beta cos u} / (2 pi e^beta), up to a common factor
    ik = 1j * ks
    if dt is None:
        dt = 2.0 / (abs(gamma) / beta * (m / 2) ** 2)

    def rhs(mu):
        mh = np.fft.rfft(mu)
        c = np.fft.irfft(mh * kern, m)
        dc = np.fft.irfft(mh * kern * ik, m)
        return -(gamma / beta) * np.fft.irfft(ik * np.fft.rfft(mu * dc / c), m)

    out, now = [], 0.0
    for target in np.atleast_1d(t):
        n = int(np.ceil((target - now) / dt - 1e-12))
        h = (target - now) / n if n else 0.0
        for _ in range(n):
            k1 = rhs(mu)
            k2 = rhs(mu + h / 2 * k1)
            k3 = rhs(mu + h / 2 * k2)
            k4 = rhs(mu + h * k3)
            mu = mu + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        now = target
        out.append(mu.copy())
    return np.stack(out)


def two_point_merge_time(theta0: float, theta_end: float, beta: float) -> float:
    """Time for two equal-mass SA clusters (points) at angle theta0 to come within theta_end (Q = K = V = Id):
    int_{theta_end}^{theta0} (1 + e^{beta (1 - cos theta)}) / (2 sin theta) d theta. Its beta -> infinity form
    ~ e^{beta (1 - cos theta0)} / (2 beta sin^2 theta0) is the pairing-phase time scale of Prop 3.11 with its
    prefactor (the bare e^{beta (1 - <c_i, c_j>)} omits 1 / (2 beta sin^2 theta0))."""
    from scipy.integrate import quad

    val, _ = quad(lambda th: (1 + np.exp(beta * (1 - np.cos(th)))) / (2 * np.sin(th)), theta_end, theta0,
                  epsabs=0, epsrel=1e-10, limit=200)
    return float(val)


def particles_per_width(n: int, beta: float, k: int) -> float:
    """Tokens per kernel width on the collapsed sphere S^{k-1}: n beta^{-(k-1)/2} / |S^{k-1}|."""
    from scipy.special import gamma as gamma_fn

    area = 2 * np.pi ** (k / 2) / gamma_fn(k / 2)
    return float(n * beta ** (-(k - 1) / 2) / area)
