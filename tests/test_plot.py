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
