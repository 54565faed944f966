"""The C kernel of the first-token sampler (attnlab.sakai.native) against the laws it must have and the JAX path."""

import math
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from scipy import stats

from attnlab.sakai import native
from attnlab.sakai import sampler as exact
from kernels import needs

_needs_kernel = needs(native)


@pytest.mark.parametrize("kind, seed", [("normal", 11), ("normal4", 13)])
def test_ziggurat_normals_have_the_normal_law(kind, seed):
    """One million ziggurat normals, scalar and 4-lane (AVX2, the vectorised heads and ReLU Gram): KS against
    N(0, 1) at level 0.001, mean and variance within 5 SE, and the mass beyond the ziggurat's base R = 3.4426 (drawn
    by the separate tail algorithm; in the 4-lane form the tail and the wedges run in the scalar continuation of a
    rejected lane) within 5 SE of 2 Phi(-R); for 4 lanes, no correlation between the lanes of one vector."""
    N = 1_000_000
    z = native.draws(seed, kind, N)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.var() - 1) < 5 * math.sqrt(2 / N)
    p_tail = 2 * stats.norm.sf(3.442619855899)
    assert abs(np.mean(np.abs(z) > 3.442619855899) - p_tail) < 5 * math.sqrt(p_tail / N)
    assert np.array_equal(z, native.draws(seed, kind, N))  # a seed fixes the numbers
    if kind == "normal4":
        lanes = z.reshape(-1, 4)
        for i, j in ((0, 1), (1, 2), (2, 3), (0, 3)):
            assert abs(np.mean(lanes[:, i] * lanes[:, j])) < 5 / math.sqrt(lanes.shape[0])


@pytest.mark.parametrize("kind, df", [("chi2", df) for df in (1.0, 2.0, 3.0, 7.0, 64.0, 256.0)]
                         + [("chi2_4", df) for df in (2.0, 3.0, 8.0, 64.0, 256.0)])
def test_chi_squares_have_the_chi_square_law(kind, df):
    """chi^2_df/df by Marsaglia-Tsang's gamma method: scalar (with the a < 1 boost at df = 1) and 4-lane (the first
    candidate in the lanes, a lane failing the squeeze finished in scalar code; df >= 2, the smallest the heads use
    it for): KS against scipy's chi^2_df at level 0.001 and the mean within 5 SE."""
    N = 400_000
    c = native.draws(12 if kind == "chi2" else 14, kind, N, df) * df
    assert stats.kstest(c, "chi2", args=(df,)).pvalue > 1e-3
    assert abs(c.mean() - df) < 5 * math.sqrt(2 * df / N)


@pytest.mark.parametrize("n", [1, 5, 33, 200])
def test_relu_gram_by_sign_pattern_has_the_law_of_the_direct_sum(n):
    """The ReLU Gram drawn by sign pattern (chi^2 for the single-positive columns, two columns per vector for the
    pairs, masked vectors for the rest) against its definition sum_c relu(z_c) relu(z_c)^T, z_c iid N(0, I_4): every
    entry's mean within 5 SE of n/2 (diagonal) and n/(2 pi) (off-diagonal), the diagonal variance n (3/2 - 1/4)
    within 5 SE, two diagonal entries uncorrelated, and two-sample KS (level 0.001) of G_00, G_10 and G_32 against
    the direct sum drawn with numpy. n = 1 and 5 leave most patterns empty and odd pair counts common."""
    N = 100_000
    G = native.relu_gram(15, n, N)
    assert np.array_equal(G, np.swapaxes(G, 1, 2))
    rng = np.random.default_rng(16)
    R = np.zeros((N, 4, 4))
    for lo in range(0, N, 10_000):
        x = np.maximum(rng.standard_normal((10_000, n, 4)), 0.0)
        R[lo:lo + 10_000] = np.einsum("mci,mcj->mij", x, x)
    off_var = n * (1 / 4 - 1 / (4 * math.pi**2))  # Var relu(z) relu(z') = E relu^2 E relu^2 - (E relu)^4
    for i in range(4):
        for j in range(i + 1):
            mean, var = (n / 2, n * (3 / 2 - 1 / 4)) if i == j else (n / (2 * math.pi), off_var)
            assert abs(G[:, i, j].mean() - mean) < 5 * math.sqrt(var / N), (i, j)
    assert abs(G[:, 0, 0].var() - n * 1.25) < 5 * np.std((G[:, 0, 0] - n / 2) ** 2) / math.sqrt(N)
    assert abs(np.corrcoef(G[:, 0, 0], G[:, 1, 1])[0, 1]) < 5 / math.sqrt(N)
    for i, j in ((0, 0), (1, 0), (3, 2)):
        assert stats.ks_2samp(G[:, i, j], R[:, i, j]).pvalue > 1e-3, (i, j)


# (n, d, H) rows of one sweep per (s, activation): each group is one compiled JAX program (the rows' H through
# active_heads, max(H) heads drawn), against the same sweep in C
LAW_GROUPS = {
    (4, "clip"): [
        (256, 256, 16),           # 4 heads per vector (H >= 3, s = 4), chi^2_256 in the lanes
        (math.inf, math.inf, 9),  # vector heads in the limit, H not a multiple of 4
        (64, 2, 8),               # vector heads at head width 2 (Gamma(1) in the lanes)
        (64, 3, 5),               # and 3 (Gamma(3/2)); H = 5
        (16, 16, 2),              # Figure 1 at its smallest width (scalar heads, H < 3)
        (256, 64, 4),             # low rank
        (4, 4, 3),                # n = s, the smallest Wishart width
        (math.inf, math.inf, 1),  # the limit law
        (2, 2, 2),                # n < s with clip inputs: explicit X
    ],
    (4, "relu"): [
        (256, 256, 2),            # the ReLU Gram by sign pattern, 16 columns per pattern on average
        (math.inf, math.inf, 2),  # the ReLU limit (non-diagonal input Gram)
        (16, 16, 2),              # explicit ReLU inputs (Figure 5 at its smallest width)
        (64, 64, 1),
        (3, 3, 2),                # n < s: a singular Gram (zero pivots)
    ],
    (7, "clip"): [(9, 9, 3)],     # s = 7: the generic token loop
}


@pytest.mark.slow
@pytest.mark.parametrize("s, activation", list(LAW_GROUPS))
def test_native_and_jax_paths_draw_the_same_law(s, activation):
    """For each row: two-sample KS of y and of v (native against the JAX path, 100,000 networks each) at level 0.001,
    and E v within 5 combined SE."""
    N = 100_000
    rows = LAW_GROUPS[(s, activation)]
    kw = dict(widths=[r[0] for r in rows], head_widths=[r[1] for r in rows], n_heads=max(r[2] for r in rows),
              active_heads=[r[2] for r in rows], n_tokens=s, activation=activation, n_samples=N)
    y, v = (np.asarray(a)[0] for a in exact.sample_first_token_sweep(jax.random.key(1), method="native", **kw))
    yx, vx = (np.asarray(a)[0] for a in exact.sample_first_token_sweep(jax.random.key(2), method="jax", **kw))
    for w, row in enumerate(rows):
        assert stats.ks_2samp(y[w], yx[w]).pvalue > 1e-3, row
        assert stats.ks_2samp(v[w], vx[w]).pvalue > 1e-3, row
        se = math.sqrt(v[w].var() / N + vx[w].var() / N)
        assert abs(v[w].mean() - vx[w].mean()) < 5 * se, row


@pytest.mark.parametrize("n, activation", [(8, "clip"), (64, "relu")])
def test_native_score_probe_has_the_law_of_the_jax_path(n, activation):
    """The score probe G_00 of the C kernel against the JAX program (two-sample KS at level 0.001, 100,000 each):
    the Wishart path and explicit (ReLU) inputs (explicit clip inputs share the input factor with the first-token
    sampler, tested above at n = 2 < s); the 1/n-scaled score is G_00/sqrt(n)."""
    kw = dict(widths=(n,), activation=activation, n_samples=100_000)
    g, gl = (np.asarray(a)[0] for a in exact.sample_scores_sweep(jax.random.key(3), method="native", **kw))
    gx, _ = (np.asarray(a)[0] for a in exact.sample_scores_sweep(jax.random.key(4), method="jax", **kw))
    assert stats.ks_2samp(g, gx).pvalue > 1e-3
    np.testing.assert_allclose(gl, g / math.sqrt(n))
    again = np.asarray(exact.sample_scores(jax.random.key(3), n=n, activation=activation, n_samples=1000,
                                           method="native")[0])
    np.testing.assert_array_equal(again, g[:1000])  # a key fixes the numbers


@pytest.mark.parametrize("n, d, H, activation", [(8, 8, 2, "clip"), (8, 4, 3, "clip"), (6, 6, 1, "relu"),
                                                (3, 3, 2, "relu")])
def test_native_brute_force_has_the_law_of_the_jax_reference(n, d, H, activation):
    """The C brute force (every weight Y[0, 0] depends on, plain loops) against the JAX reference network and the
    exact sampler: two-sample KS at level 0.001 (20,000 networks each), full and low rank, clip and ReLU, n < s;
    a key fixes the numbers."""
    from attnlab.sakai.reference import sample_reference, sample_reference_first

    N = 20_000
    kw = dict(n=n, n_heads=H, activation=activation, head_width=d, n_samples=N)
    y = np.asarray(sample_reference_first(jax.random.key(1), method="native", **kw))
    r = np.asarray(sample_reference(jax.random.key(2), batch_size=1024, **kw))[:, 0, 0]
    e, _ = exact.sample_first_token(jax.random.key(3), **kw)
    assert stats.ks_2samp(y, r).pvalue > 1e-3
    assert stats.ks_2samp(y, np.asarray(e)).pvalue > 1e-3
    assert np.array_equal(y, np.asarray(sample_reference_first(jax.random.key(1), method="native", **kw)))
    x = np.asarray(sample_reference_first(jax.random.key(2), method="jax", **kw))
    np.testing.assert_array_equal(x, r)  # "jax" is the JAX reference's statistic


def test_active_heads_seeds_and_determinism():
    """A sweep with several H: each width uses its own number of heads (the law of a plain draw with that H, from
    other streams; the plain draws' law is tested against the JAX path above); the seeds are independent rows; the
    same key gives the same numbers, another key others."""
    kw = dict(widths=(8, 8), n_heads=3, active_heads=(1, 3), n_samples=40_000, n_seeds=2, method="native")
    y, v = (np.asarray(a) for a in exact.sample_first_token_sweep(jax.random.key(5), **kw))
    assert y.shape == (2, 2, 40_000)
    plain = {H: np.asarray(exact.sample_first_token(jax.random.key(20 + H), n=8, n_heads=H, n_samples=40_000,
                                                    method="native")[1]) for H in (1, 3)}
    for w, H in enumerate((1, 3)):
        assert stats.ks_2samp(v[0, w], plain[H]).pvalue > 1e-3
    assert stats.ks_2samp(plain[1], plain[3]).pvalue < 1e-6  # ...and the two H are told apart
    assert not np.array_equal(y[0], y[1])
    again = np.asarray(exact.sample_first_token_sweep(jax.random.key(5), **kw)[0])
    other = np.asarray(exact.sample_first_token_sweep(jax.random.key(6), **kw)[0])
    assert np.array_equal(y, again) and not np.array_equal(y, other)


def test_same_numbers_for_any_thread_count(tmp_path):
    """Each network (and bootstrap replicate) has its own random stream: 1 and 3 OpenMP threads give bit-identical
    draws."""
    code = ("import numpy as np, sys, math; from attnlab.sakai import native as nt\n"
            "y, v = nt.first_token(7, 3, 5000, n=32, d=32, n_heads=5, n_tokens=4)\n"
            "r, _ = nt.first_token(7, 4, 500, n=24, d=24, n_heads=2, n_tokens=4, inputs='relu')\n"
            "ks, w1 = nt.bootstrap_ks_w1(7, y[:2000], v[:2000], 50)\n"
            "np.save(sys.argv[1], np.concatenate([y, v, r, ks, w1]))\n")
    out = []
    for threads in (1, 3):
        path = tmp_path / f"t{threads}.npy"
        subprocess.run([sys.executable, "-c", code, str(path)], check=True,
                       env={**os.environ, "OMP_NUM_THREADS": str(threads)})
        out.append(np.load(path))
    np.testing.assert_array_equal(out[0], out[1])


def test_method_selection_and_bad_input():
    """native refuses what it cannot draw (more than 16 tokens); bad method names and sizes are rejected; auto falls
    back to the JAX path there."""
    with pytest.raises(ValueError, match="method='native' needs"):
        exact.sample_first_token_sweep(jax.random.key(0), widths=(32,), n_heads=1, n_tokens=17, n_samples=10,
                                       method="native")
    with pytest.raises(ValueError, match="unknown method"):
        exact.sample_first_token_sweep(jax.random.key(0), widths=(16,), n_heads=2, n_samples=10, method="gpu")
    with pytest.raises(ValueError, match="unknown method"):
        exact.sample_scores_sweep(jax.random.key(0), widths=(16,), n_samples=10, method="gpu")
    with pytest.raises(ValueError, match="method='native' needs"):
        exact.sample_scores(jax.random.key(0), n=32, n_tokens=17, n_samples=10, method="native")
    from attnlab.sakai.reference import sample_reference_first

    with pytest.raises(ValueError, match="method='native' needs"):
        sample_reference_first(jax.random.key(0), n=4, n_heads=1, activation="identity", n_samples=10,
                               method="native")
    with pytest.raises(ValueError, match="unknown method"):
        sample_reference_first(jax.random.key(0), n=4, n_heads=1, n_samples=10, method="gpu")
    with pytest.raises(ValueError, match="native brute-force sampler needs"):
        native.brute_first(0, 0, 10, n=4, d=4, n_heads=1, n_tokens=4, activation="identity")
    for bad in (math.inf, math.nan, 2.5, 0):  # one-line errors, never a crash or a generic conversion error
        with pytest.raises(ValueError, match="native score sampler needs"):
            native.scores(0, 0, 10, n=bad, n_tokens=1)
        with pytest.raises(ValueError, match="relu_gram needs"):
            native.relu_gram(0, bad, 10)
        with pytest.raises(ValueError, match="native brute-force sampler needs"):
            native.brute_first(0, 0, 10, n=bad, d=4, n_heads=1, n_tokens=4)
    with pytest.raises(ValueError, match="integers n_tokens, n_heads"):
        native.first_token(0, 0, 10, n=8, d=8, n_heads=0, n_tokens=4)
    with pytest.raises(ValueError, match="two non-empty samples"):
        native.bootstrap_ks_w1(0, [], [1.0, 2.0], 5)
    # explicit identity inputs (n < s) have no C path: auto takes the JAX one, native says why
    g, _ = exact.sample_scores(jax.random.key(0), n=2, n_tokens=4, activation="identity", n_samples=10)
    assert np.asarray(g).shape == (10,)
    with pytest.raises(ValueError, match="no explicit identity inputs"):
        exact.sample_first_token_sweep(jax.random.key(0), widths=(2,), n_heads=1, activation="identity",
                                       n_samples=10, method="native")
    with pytest.raises(ValueError, match="native score sampler needs"):
        native.scores(0, 0, 10, n=3, n_tokens=4)
    y, _ = exact.sample_first_token_sweep(jax.random.key(0), widths=(32,), n_heads=1, n_tokens=17, n_samples=10)
    assert np.asarray(y).shape == (1, 1, 10)  # auto: the JAX path
    with pytest.raises(ValueError, match="n >= s"):
        native.first_token(0, 0, 10, n=3, d=3, n_heads=1, n_tokens=4)
    with pytest.raises(ValueError, match="needs n >= s"):
        native.first_token(0, 0, 10, n=3.5, d=3.5, n_heads=1, n_tokens=4, inputs="relu")
    with pytest.raises(ValueError, match="bad draw"):
        native.draws(0, "chi2", 10, df=0.0)
    with pytest.raises(ValueError, match="bad draw"):
        native.draws(0, "chi2_4", 10, df=1.5)
    with pytest.raises(ValueError, match="integer n >= 1"):
        native.relu_gram(0, 0, 10)
    with pytest.raises(ValueError, match="unknown draw kind"):
        native.draws(0, "uniform", 10)


def test_kde_rows_match_the_direct_kernel_sums():
    """The grid-recurrence KDE against the direct sums of distances.kde (scipy's gaussian_kde with Scott's factor):
    relative 1e-11 where the density is above the official 1e-12 floor, absolute 1e-13 everywhere; heavy-tailed and
    Gaussian rows, samples beyond the grid's ends, a grid of 7 points; a non-uniform grid is refused."""
    import jax.numpy as jnp

    from attnlab.sakai import distances

    rng = np.random.default_rng(3)
    rows = np.stack([0.63 * rng.standard_normal(20_000), rng.standard_t(3, 20_000), rng.exponential(size=20_000)])
    for grid in (np.linspace(rows.min(), rows.max(), 500), np.linspace(-1.0, 2.0, 7)):
        got = native.kde_rows(rows, grid)
        want = np.stack([np.asarray(distances.kde(jnp.asarray(r), jnp.asarray(grid))) for r in rows])
        above = want > distances.KDE_FLOOR
        assert np.max(np.abs(got[above] / want[above] - 1)) < 1e-11
        assert np.max(np.abs(got - want)) < 1e-13
    with pytest.raises(ValueError, match="uniform grid"):
        native.kde_rows(rows, np.array([0.0, 1.0, 3.0]))


def test_bootstrap_has_the_law_of_the_jax_bootstrap():
    """Poisson(1) bootstrap of (KS, W1) by the C kernel against distances.bootstrap_ks_w1 (400 replicates each): the
    replicates' means within 5 SE, and the ratio of their spreads within 5 SE of 1 (the sd of 400 draws has a relative
    SE of about 1/sqrt(2 * 399) = 3.5%, so a ratio of two has about 5%: bounds 0.75 and 1/0.75); a seed fixes the
    replicates."""
    import jax.numpy as jnp

    from attnlab.sakai import distances

    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(5000), 1.05 * rng.standard_normal(5000) + 0.02
    nat = np.stack(native.bootstrap_ks_w1(9, x, y, 400))
    ref = np.asarray(distances.bootstrap_ks_w1(jax.random.key(9), jnp.asarray(x), jnp.asarray(y), 400))
    for a, b in zip(nat, ref):
        assert abs(a.mean() - b.mean()) < 5 * math.sqrt(a.var() / a.size + b.var() / b.size)
        assert 0.75 < a.std() / b.std() < 1 / 0.75
    assert np.array_equal(nat, np.stack(native.bootstrap_ks_w1(9, x, y, 400)))


def test_bootstrap_replicate_without_weight_on_a_sample_is_nan():
    """A one-point sample gets weight 0 in a replicate with probability 1/e: that replicate has no empirical law for
    it, so both statistics are NaN (as in the JAX bootstrap), never a KS of 0."""
    ks, w1 = native.bootstrap_ks_w1(3, [0.3], np.linspace(0, 1, 5), 400)
    empty = np.isnan(ks)
    assert np.array_equal(empty, np.isnan(w1))
    assert abs(empty.mean() - math.exp(-1)) < 5 * math.sqrt(math.exp(-1) * (1 - math.exp(-1)) / 400)
    assert np.all(ks[~empty] > 0)


def test_ks_w1_rows_match_the_pooled_argsort():
    """KS and W1 by merging the sorted rows in C against distances.ks_w1_rows (stable argsort of the pooled pair):
    KS identical, W1 to a relative 1e-12, with ties between the samples and samples of different sizes."""
    from attnlab.sakai import distances

    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((3, 3000)), 1.1 * rng.standard_normal((3, 2000))
    x[0, :50] = y[0, :50]  # ties across the samples
    x[1, :40] = 0.5  # ties within and across
    y[1, :30] = 0.5
    got, want = native.ks_w1_rows(x, y), distances.ks_w1_rows(x, y)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
