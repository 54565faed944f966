"""The shared figure style: a data curve of fewer than FEW_POINTS points is drawn as markers only (sparse), in the
helper and in a preset's figure drawn from a synthetic dataset."""

import matplotlib.pyplot as plt
import numpy as np
import pytest
import xarray as xr

from attnlab.plot import FEW_POINTS, SIMULATION, THEORY, sparse


@pytest.mark.parametrize("style", [THEORY, {**SIMULATION, "linestyle": "-"}, {"color": "C0", "ls": ":"},
                                   {"marker": "s", "linestyle": "--", "markerfacecolor": "none"}])
def test_a_curve_of_five_points_or_more_keeps_its_style(style):
    for n in (FEW_POINTS, FEW_POINTS + 1, 100):
        assert sparse(style, n) == style


@pytest.mark.parametrize("n", [1, 2, FEW_POINTS - 1])
def test_a_curve_of_fewer_than_five_points_has_markers_and_no_line(n):
    theory = sparse(THEORY, n)  # no marker of its own: an open diamond, the colour kept
    assert theory["linestyle"] == "none" and theory["marker"] == "D" and theory["markerfacecolor"] == "none"
    assert theory["color"] == THEORY["color"]
    simulation = sparse({**SIMULATION, "linestyle": "-"}, n)  # its own marker kept
    assert simulation == SIMULATION
    alias = sparse({"color": "C3", "ls": ":", "ms": 3, "mfc": "white"}, n)  # matplotlib's aliases are not doubled
    assert "ls" not in alias and alias["linestyle"] == "none" and alias["marker"] == "D"
    assert "markersize" not in alias and "markerfacecolor" not in alias
    fig, ax = plt.subplots()
    for style in (theory, simulation, alias):
        (line,) = ax.plot(np.arange(n), np.arange(n), **style)
        assert line.get_linestyle() == "None" and line.get_marker() not in (None, "", "None", "none")
    plt.close(fig)


def _population(nus) -> xr.Dataset:
    """A synthetic duranthon-population dataset: one model, one L, two activations along ``nus``."""
    nus = np.asarray(nus, float)
    acts = ["softmax", "linear"]
    risk = np.tile((1 / (1 + nus))[None, None, :, None], (1, 1, 1, len(acts)))
    dims = ("model", "L", "nu", "activation")
    return xr.Dataset(
        {"risk": (dims, risk), "risk_se": (dims, 0.01 * risk),
         "bayes_risk": (dims[:3], 0.9 * risk[..., 0]), "linear_closed_form": (dims[:3], 1.1 * risk[..., 0])},
        coords={"model": ["spiked"], "L": [2], "nu": nus, "activation": acts})


@pytest.mark.parametrize("nus, joined", [((2.0, 5.0), False), ((1.0, 2.0, 5.0, 10.0, 20.0), True)])
def test_the_population_figures_theory_is_joined_from_five_signal_strengths(nus, joined):
    """duranthon-population's risk_vs_nu: the Bayes risk and the linear closed form, evaluated at the run's nu, are
    dashed lines along five nu or more, open diamonds along fewer; the Monte Carlo points are markers either way."""
    from attnlab.duranthon.figures import plot_population

    figs = plot_population(_population(nus), None)
    try:
        ax = figs["risk_vs_nu"].axes[0]
        theory = [line for line in ax.get_lines() if line.get_label() in ("Bayes risk", "linear, closed form")]
        assert len(theory) == 2 and all(len(line.get_xdata()) == len(nus) for line in theory)
        for line in theory:
            if joined:
                assert line.get_linestyle() == "--" and line.get_marker() in (None, "", "None", "none")
            else:
                assert line.get_linestyle() == "None" and line.get_marker() == "D"
        simulation = [c.lines[0] for c in ax.containers]  # the error bars' data lines
        assert simulation and all(line.get_linestyle() == "None" and line.get_marker() == "o" for line in simulation)
    finally:
        for fig in figs.values():
            plt.close(fig)


def _blocks(png: bytes, k: int = 8):
    """The image's 8 x 8-pixel block means (RGB): a crop's sub-pixel shift moves them little, a missing artist much."""
    import io

    from PIL import Image

    a = np.asarray(Image.open(io.BytesIO(png))).astype(float)
    h, w = a.shape[0] // k * k, a.shape[1] // k * k
    return a[:h, :w, :3].reshape(h // k, k, w // k, k, 3).mean(axis=(1, 3))


BLOCK_BOUND = 64
"""The largest block-mean difference (of 255) taken for the same picture: the crop's sub-pixel shift moves block means
by about 32 at text edges; a missing 3-point curve, by about 180."""


def _figure(outside=False, curve=True):
    from attnlab.plot import panels, paper_figure

    @paper_figure
    def draw():
        fig, (ax, bx) = panels(2)
        (line,) = ax.plot(np.linspace(0, 1, 50), np.linspace(0, 1, 50) ** 2, lw=3, label=r"$\kappa^2$")
        line.set_visible(curve)
        ax.set(xlabel=r"$\kappa$", ylabel=r"risk $\mathcal{R}$", title="(a)")
        ax.legend()
        bx.imshow(np.arange(20.0).reshape(4, 5))
        if outside:  # an artist beyond the figure's right edge, which the tight box must take in
            fig.text(1.15, 0.5, "beyond the edge")
        return fig

    return draw()


@pytest.mark.parametrize("outside", [False, True])
def test_render_figure_writes_what_savefig_tight_writes_with_half_the_draws(outside):
    """The PNG has the size of ``savefig(bbox_inches="tight")``'s and the same pixels up to antialiasing at the
    sub-pixel shift of the crop; the PDF's page has the tight box's size; the figure's canvas, dpi and layout engine
    are those it had; the figure is drawn twice, where savefig would draw it four times (an artist beyond the edge:
    savefig writes the PNG)."""
    import io

    from PIL import Image

    from attnlab.plot import render_figure, style

    fig = _figure(outside)
    canvas, dpi, engine = fig.canvas, fig.dpi, fig.get_layout_engine()
    draws = []
    fig.canvas.mpl_connect("draw_event", lambda event: draws.append(event))
    files = render_figure(fig)
    assert (fig.canvas, fig.dpi, fig.get_layout_engine()) == (canvas, dpi, engine)
    assert files["png"].startswith(b"\x89PNG") and files["pdf"].startswith(b"%PDF")
    reference, ref_draws, ref_fig = {}, [], _figure(outside)
    ref_fig.canvas.mpl_connect("draw_event", lambda event: ref_draws.append(event))
    for ext in ("png", "pdf"):
        buf = io.BytesIO()
        with style():
            ref_fig.savefig(buf, format=ext, bbox_inches="tight")
        reference[ext] = buf.getvalue()
    assert len(draws) <= (4 if outside else 2) and len(ref_draws) == 4, (len(draws), len(ref_draws))
    new, old = _blocks(files["png"]), _blocks(reference["png"])
    assert new.shape == old.shape
    assert np.abs(new - old).max() < BLOCK_BOUND, np.abs(new - old).max()
    assert Image.open(io.BytesIO(files["png"])).info["dpi"][0] == pytest.approx(150, abs=0.1)
    page = [float(x) for x in files["pdf"].split(b"/MediaBox [")[1].split(b"]")[0].split()]
    ref_page = [float(x) for x in reference["pdf"].split(b"/MediaBox [")[1].split(b"]")[0].split()]
    np.testing.assert_allclose(page, ref_page, atol=3.0)  # points; Agg's and the PDF's text metrics differ slightly
    plt.close("all")


def test_a_missing_artist_changes_the_png_beyond_the_antialiasing_bound():
    """The control of the pixel comparison above: the same figure without its curve differs by more than the
    bound."""
    from attnlab.plot import render_figure

    ref, new = (_blocks(render_figure(_figure(curve=curve))["png"]) for curve in (True, False))
    assert new.shape == ref.shape and np.abs(new - ref).max() > BLOCK_BOUND
    plt.close("all")


def test_render_figure_leaves_a_figure_without_layout_engine_without_one():
    from matplotlib.figure import Figure

    from attnlab.plot import render_figure

    fig = Figure(layout="none")
    fig.add_subplot().plot([0, 1], [1, 0])
    assert fig.get_layout_engine() is None
    files = render_figure(fig)
    assert fig.get_layout_engine() is None and files["png"].startswith(b"\x89PNG")
