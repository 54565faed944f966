"""Figures of the Duranthon et al. presets: the optimised population risk against nu and L (Fig. 1), the activation
comparison at fixed and variable L (Fig. 2 / Cor. 4.4), test error and overlaps against alpha (Fig. 3), the
low-SNR diagnostics along lambda, and the minima plain gradient methods reach (App. A.2). Theory (Bayes risk, closed
forms, replica fixed points) in broken lines over the simulations (Monte Carlo optimisation, L-BFGS ERM) as markers,
on the same axes."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator, ScalarFormatter

from attnlab.duranthon.summaries import _mean_se
from attnlab.plot import FEW_POINTS, LABELS, SIMULATION, THEORY, panels, paper_figure, sparse

if TYPE_CHECKING:
    from attnlab.duranthon.configs import ActivationsConfig, LowSNRConfig, PopulationConfig, SampleComplexityConfig

__all__ = ["ACTIVATION_LABELS", "plot_population", "plot_activations", "plot_sample_complexity", "plot_low_snr",
           "plot_gd_landscape"]

ACTIVATION_LABELS = {"softmax": "softmax", "linear": r"linear $1+\chi_\ell$",
                     "centred_linear": r"centred linear $(1+\chi_\ell-\bar\chi)/L$",
                     "erf": r"$1+\mathrm{erf}(c+\chi_\ell)$, $c$ optimised", "softplus": "softplus, normalised"}
ACTIVATION_COLORS = {"softmax": "C0", "linear": "C1", "centred_linear": "C2", "erf": "C3", "softplus": "C4"}
RISK = "optimised excess risk"
TEST_ERROR = r"test error $\mathbb{E}(y-f(X))^2$"
LAMBDA = r"$\lambda_k=\lambda_v$"
BAYES = {**THEORY, "label": "Bayes risk"}


def _act_label(name) -> str:
    return ACTIVATION_LABELS.get(str(name), str(name))


def _act_color(name, i=0) -> str:
    return ACTIVATION_COLORS.get(str(name), f"C{5 + i}")


def _num(x) -> str:
    """A number in mathtext: ``\\infty`` for inf (a float or the attribute string "inf")."""
    x = float(x)
    return r"\infty" if math.isinf(x) else f"{x:g}"


def _log_ticks(ax, values, axis="x"):
    """A log axis ticked at ``values`` with plain labels (no 2x10^0)."""
    a = ax.xaxis if axis == "x" else ax.yaxis
    a.set_major_locator(FixedLocator(sorted(set(float(v) for v in values))))
    a.set_major_formatter(ScalarFormatter())
    a.set_minor_locator(NullLocator())


def _plain_log_y(ax):
    """Plain tick labels (0.3, not 3x10^-1) on a log y axis, with the minor ticks 2, 3, 5 x 10^k labelled where the
    axis spans less than about a decade (2, 5 x 10^k up to two and a half decades); call after drawing."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    lo, hi = ax.get_ylim()
    decades = np.log10(hi / lo) if lo > 0 else np.inf
    shown = (2, 3, 5) if decades < 1.2 else (2, 5) if decades < 2.5 else ()

    def minor(v, _):
        return f"{v:g}" if v > 0 and round(v / 10 ** np.floor(np.log10(v) + 1e-9)) in shown else ""

    ax.yaxis.set_minor_formatter(FuncFormatter(minor) if shown else NullFormatter())


def _simulation(ax, x, y, yerr, color, label=None, marker="o", **kw):
    ax.errorbar(x, y, yerr=yerr, color=color, capsize=2, label=label, **{**SIMULATION, "marker": marker, **kw})


@paper_figure
def plot_population(ds: xr.Dataset, cfg: PopulationConfig):
    """Fig. 1: the optimised population risk (alpha = inf) of each activation (Monte Carlo, markers, 2 SE) against
    nu, one panel per (model, L), and against L, one panel per (model, nu), with the Bayes risk (dashed, black) and
    the optimal linear risk in closed form (dashed, in the linear activation's colour); the theories are evaluated
    at the run's nu and L, so along fewer than five of them they are open diamonds (:func:`attnlab.plot.sparse`)."""
    models, Ls, nus, acts = list(ds.model.values), list(ds.L.values), ds.nu.values, list(ds.activation.values)

    def draw(ax, x, p):
        for a, name in enumerate(acts):
            q = p.sel(activation=name)
            _simulation(ax, x, q.risk.values, 2 * q.risk_se.values, _act_color(name, a), _act_label(name) + " (MC)")
        ax.plot(x, p.bayes_risk.values, **sparse(BAYES, len(x)))
        ax.plot(x, p.linear_closed_form.values, **sparse({**THEORY, "color": _act_color("linear")}, len(x)),
                label="linear, closed form")

    fig, axes = panels(len(Ls), len(models), width=2.9, height=2.5)
    for i, model in enumerate(models):
        for j, L in enumerate(Ls):
            ax = axes[i * len(Ls) + j]
            draw(ax, nus, ds.sel(model=model, L=L))
            ax.set(xscale="log", yscale="log", xlabel=r"signal strength $\nu$", ylabel=RISK,
                   title=f"{model}-SLR, $L={L}$")
            _log_ticks(ax, nus)
            _plain_log_y(ax)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3)
    fig.suptitle(r"optimised population risk, $\alpha=\infty$ (markers: Monte Carlo, 2 SE)")
    figs = {"risk_vs_nu": fig}

    fig2, axes2 = panels(len(nus), len(models), width=2.6, height=2.4)
    for i, model in enumerate(models):
        for m, nu in enumerate(nus):
            ax = axes2[i * len(nus) + m]
            draw(ax, Ls, ds.sel(model=model, nu=nu))
            ax.set(xlabel=r"sequence length $L$", ylabel=RISK, title=f"{model}-SLR, $\\nu={_num(nu)}$",
                   xticks=Ls)
    fig2.legend(*axes2[0].get_legend_handles_labels(), loc="outside lower center", ncol=3)
    fig2.suptitle(r"optimised population risk against $L$, $\alpha=\infty$ (markers: Monte Carlo, 2 SE)")
    figs["risk_vs_L"] = fig2
    return figs


def _length_label(setting: str) -> str:
    """Tick label of a setting's sequence-length law: ``spiked L=2`` -> 2, ``max L~U{1,2,3}`` -> U{1,2,3}."""
    law = setting.split(" ", 1)[1]
    m = re.fullmatch(r"L~U\{(.*)\}", law)
    return f"$\\mathcal{{U}}\\{{{m.group(1)}\\}}$" if m else f"${law.removeprefix('L=')}$"


_CLOSED_FORM = {"linestyle": "none", "marker": "o", "markersize": 4.5, "markerfacecolor": "white",
                "markeredgecolor": "black", "markeredgewidth": 1.0, "zorder": 4}


@paper_figure
def plot_activations(ds: xr.Dataset, cfg: ActivationsConfig):
    """The activation comparison (Fig. 2 / Cor. 4.4): per model, the optimised risk of each activation (bars, 5 SE)
    at L = 1, 2, 3 and L ~ U{1,2,3}, with the Bayes risk (dashed) and the optimal linear risk in closed form
    (dotted, over the linear bar)."""
    acts = list(ds.activation.values)
    models = list(dict.fromkeys(ds.model.values))
    fig, axes = panels(len(models), width=3.9, height=2.9)
    width = 0.84 / len(acts)
    for ax, model in zip(axes, models):
        p = ds.isel(setting=np.flatnonzero(ds.model.values == model))
        x = np.arange(p.sizes["setting"])
        for a, name in enumerate(acts):
            q = p.sel(activation=name)
            xa = x - 0.42 + (a + 0.5) * width
            ax.bar(xa, q.risk.values, width, yerr=5 * q.risk_se.values, color=_act_color(name, a),
                   label=_act_label(name), error_kw={"lw": 0.8, "capsize": 1.5})
            if name == "linear":
                ax.plot(xa, p.linear_closed_form.values, **_CLOSED_FORM)
        for xi, v in zip(x, p.bayes_risk.values):
            ax.plot([xi - 0.45, xi + 0.45], [v, v], **THEORY)
        ax.set_xticks(x, [_length_label(s) for s in p.setting.values])
        nu = p.nu.values[0]
        ax.set(xlabel=r"sequence length $L$", ylabel=RISK,
               title=f"{model}-SLR, $\\nu={_num(nu)}$", ylim=(0, None))
        ax.grid(axis="x", visible=False)
    handles, labels = axes[0].get_legend_handles_labels()
    handles += [Line2D([], [], **THEORY), Line2D([], [], **_CLOSED_FORM)]
    labels += ["Bayes risk", "linear, closed form"]
    fig.legend(handles, labels, loc="outside lower center", ncol=4)
    fig.suptitle(r"optimised activations at $\alpha=\infty$: fixed $L$ and $L\sim\mathcal{U}\{1,2,3\}$ "
                 r"(shared $k$, $v$; error bars 5 SE)")
    return {"activation_table": fig}


def _setting_title(ds) -> str:
    return f"{ds.attrs['model']}-SLR, $\\nu={_num(ds.attrs['nu'])}$, $L={ds.attrs['L']}$"


@paper_figure
def plot_sample_complexity(ds: xr.Dataset, cfg: SampleComplexityConfig):
    """Fig. 3: test error against alpha, the replica prediction (dashed) and L-BFGS ERM (markers, mean and SE over
    seeds) per activation, with the Bayes-optimal curve and the population Bayes risk; and the overlaps m_k, m_v,
    replica (dashed) against ERM (markers). Along fewer than five alphas the replica and Bayes-optimal values are
    open diamonds, not lines (:func:`attnlab.plot.sparse`)."""
    alphas = ds.alpha.values
    acts = list(ds.activation.values)

    def replica(color):
        return sparse({**THEORY, "color": color}, len(alphas))

    fig, axes = panels(2, width=3.4, height=2.8)
    ax = axes[0]
    for a, name in enumerate(acts):
        p, col = ds.sel(activation=name), _act_color(name, a)
        ax.plot(alphas, p.replica_test_error.values, **replica(col))
        m, se = _mean_se(p.sim_test_error.values, 1)
        _simulation(ax, alphas, m, se, col)
    extra = []
    if "bo_test_error" in ds and bool(np.isfinite(ds.bo_test_error.values).any()):
        extra += ax.plot(alphas, ds.bo_test_error.values, **sparse({"color": "black", "linewidth": 1.3}, len(alphas)),
                         label="Bayes-optimal")
    extra.append(ax.axhline(float(ds.bayes_population), color="0.4", ls=":", lw=1.1,
                            label=r"Bayes risk, $\alpha=\infty$"))
    ax.set(xlabel=r"sample ratio $\alpha=N/D$", ylabel=TEST_ERROR, xscale="log", title="test error")
    _log_ticks(ax, alphas)
    ax = axes[1]
    for a, name in enumerate(acts):
        p, col = ds.sel(activation=name), _act_color(name, a)
        for o, mk in (("m_k", "o"), ("m_v", "s")):
            ax.plot(alphas, p.replica_order.sel(order=o).mean("set").values, **replica(col))
            m, se = _mean_se(p.sim_overlaps.sel(overlap=o).values, 1)
            _simulation(ax, alphas, m, se, col, marker=mk)
    ax.set(xlabel=r"sample ratio $\alpha=N/D$", ylabel=r"overlap $m_k$, $m_v$", xscale="log",
           title="overlaps with the teacher")
    _log_ticks(ax, alphas)
    if len(alphas) >= FEW_POINTS:  # an activation's entry: its replica line through its ERM marker
        handles = [Line2D([], [], **{**THEORY, "color": _act_color(n, a)}, marker="o", markersize=4)
                   for a, n in enumerate(acts)]
    else:  # its ERM marker inside its replica diamond
        handles = [(Line2D([], [], **replica(_act_color(n, a))), Line2D([], [], color=_act_color(n, a), **SIMULATION))
                   for a, n in enumerate(acts)]
    labels = [str(n) for n in acts] + [h.get_label() for h in extra] + [f"$m_{o[-1]}$ (right)" for o in ("m_k", "m_v")]
    handles += extra
    handles += [Line2D([], [], color="0.3", **{**SIMULATION, "marker": mk}) for mk in "os"]
    fig.legend(handles, labels, loc="outside lower center", ncol=len(handles) if len(handles) <= 6 else 4)
    lam = (r"$\lambda=\lambda^*(\alpha)$" if ds.attrs.get("lambda_optimal")
           else r"$\lambda$ by grid search" if ds.attrs.get("lambda_grid_search")
           else f"$\\lambda_k=\\lambda_v={ds.attrs['lambda_k']:g}$")
    drawn = "dashed" if len(alphas) >= FEW_POINTS else "open diamonds"
    fig.suptitle(f"{_setting_title(ds)}, {lam}: replica ({drawn}) vs L-BFGS ERM (markers, mean $\\pm$ SE)")
    return {"sample_complexity": fig}


_BRANCH_STYLE = {"informed": "--", "uninformed": ":"}
_BRANCH_MARKER = {"informed": {"marker": "D", "markerfacecolor": "none", "markersize": 7},
                  "uninformed": {"marker": "o", "markersize": 3.5}}
_OVERLAP_COLORS = {"m_k": "C2", "m_v": "C3", "q_k": "C4"}
_JACOBIAN_NAMES = {"implicit": "pointwise", "stein": "Stein"}


def _branch(branch: str, color, n_points: int, **style) -> dict:
    """The style of a replica branch's curve along lambda: its broken line (:data:`_BRANCH_STYLE`) with ``style``;
    along fewer than five lambdas its marker alone (:data:`_BRANCH_MARKER`: open diamond informed, dot uninformed),
    the marker telling the branch as the line did."""
    if n_points >= FEW_POINTS:
        return {"color": color, "linestyle": _BRANCH_STYLE.get(branch, "-."), **style}
    return sparse({"color": color, **_BRANCH_MARKER.get(branch, {"marker": "^"})}, n_points)


@paper_figure
def plot_low_snr(ds: xr.Dataset, cfg: LowSNRConfig):
    """Per alpha, along the lambda path: test error, replica (broken lines: colour the V_hat estimator, style the
    branch) against L-BFGS ERM (markers) from the informed and a random start; the overlaps of the informed branch
    against informed ERM; the non-convex fraction of the proximal problems; the Stein-minus-pointwise z-score of
    V_hat; the solver residuals; the replicon eigenvalue (RS stable below 1). Along fewer than five lambdas every
    curve is markers only (:func:`attnlab.plot.sparse`), a replica branch told by its marker (:func:`_branch`)."""
    lams = ds.lam.values
    n = len(lams)
    jacs, branches = list(ds.jacobian.values), list(ds.branch.values)
    jac_color = {j: f"C{i}" for i, j in enumerate(jacs)}
    figs = {}
    for al in ds.alpha.values:
        p = ds.sel(alpha=al)
        fig, axes = panels(3, 2, width=3.0, height=2.5)
        ax = axes[0]
        for jac in jacs:
            for br in branches:
                q = p.sel(jacobian=jac, branch=br)
                te = q.replica_test_error.where(q.replica_converged).mean("set").values  # converged sets only
                ax.plot(lams, te, **_branch(br, jac_color[jac], n, linewidth=1.3, marker="."))
        for k, (start, col, mk) in enumerate(zip(p.start.values, ("black", "0.55"), "os")):
            m, se = _mean_se(p.sim_test_error.sel(start=start).values, -1)
            _simulation(ax, lams * (1 + 0.05 * (k - 0.5)), m, se, col, marker=mk)
        ax.set(xscale="log", xlabel=LAMBDA, ylabel=TEST_ERROR, title="test error")

        ax = axes[1]
        j0 = jacs[0]
        q = p.sel(jacobian=j0, branch="informed" if "informed" in branches else branches[0])
        for o, mk in (("m_k", "o"), ("m_v", "s"), ("q_k", "^")):
            col = _OVERLAP_COLORS[o]
            ax.plot(lams, q.replica_order.sel(order=o).where(q.replica_converged).mean("set").values,
                    **sparse({**THEORY, "color": col}, n), label=f"${o[0]}_{o[-1]}$")
            m, se = _mean_se(p.sim_overlaps.sel(start="informed", overlap=o).values, -1)
            _simulation(ax, lams, m, se, col, marker=mk)
        ax.set(xscale="log", xlabel=LAMBDA, ylabel="overlap",
               title=f"overlaps, informed ({_JACOBIAN_NAMES.get(j0, j0)} " + r"$\hat V$)")
        ax.legend(loc="best", ncol=3, columnspacing=0.8, handlelength=1.4)

        ax = axes[2]
        ax.plot(lams, q.replica_nonconvex_fraction.mean("set").values,
                **sparse({"color": "black", "linestyle": "-", "marker": "o", "markersize": 3}, n))
        ax.set(xscale="log", xlabel=LAMBDA, ylabel="fraction of samples", title="non-convex proximal problems")

        ax = axes[3]
        for sec, col in (("k", "C3"), ("v", "C4")):
            z = np.abs(q.replica_jump.sel(jump=f"jump_{sec}").values) / q.replica_jump.sel(jump=f"jump_{sec}_se").values
            ax.plot(lams, np.nanmax(z, axis=-1), **sparse({"color": col, "linestyle": "--", "marker": "x"}, n),
                    label=f"$\\hat V_{sec}$")
        ax.axhline(5, color="0.5", lw=0.8, ls=":")
        ax.set(xscale="log", xlabel=LAMBDA, ylabel=r"$|\hat V^{\rm Stein}-\hat V|\,/\,\mathrm{SE}$",
               title=r"Stein minus pointwise $\hat V$ (max over sets)")
        ax.legend(loc="best")

        ax = axes[4]
        for jac in jacs:
            for br in branches:
                r = p.sel(jacobian=jac, branch=br)
                ax.plot(lams, r.replica_residual.max("set").values, **_branch(br, jac_color[jac], n, marker="+"))
        ax.axhline(1e-8, color="0.5", lw=0.8, ls=":")
        ax.set(xscale="log", yscale="log", xlabel=LAMBDA, ylabel=r"residual $\max|F(x)-x|$",
               title="solver residual (tolerance $10^{-8}$)")

        ax = axes[5]
        if "replica_at_eigenvalue" in p:
            for jac in jacs:
                for br in branches:
                    r = p.sel(jacobian=jac, branch=br)
                    ev = r.replica_at_eigenvalue.where(r.replica_converged)  # converged sets only
                    ax.plot(lams, ev.max("set").values, **_branch(br, jac_color[jac], n, marker="d", markersize=3))
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set(xscale="log", yscale="log", xlabel=LAMBDA, ylabel=r"replicon eigenvalue $\rho(T)$",
               title="RS stability (unstable above 1)")
        _plain_log_y(ax)
        for ax in axes:
            _log_ticks(ax, lams)

        handles = [Line2D([], [], **_branch("informed", jac_color[j], n, linewidth=1.3, linestyle="-"),
                          label=f"replica, {_JACOBIAN_NAMES.get(j, j)} $\\hat V$") for j in jacs]
        handles += [Line2D([], [], **_branch(b, "0.4", n, linewidth=1.3), label=f"{b} branch") for b in branches]
        handles += [Line2D([], [], color=c, **{**SIMULATION, "marker": mk}, label=f"ERM, {s} start ($D={int(p.D)}$)")
                    for s, c, mk in zip(p.start.values, ("black", "0.55"), "os")]
        fig.legend(handles=handles, loc="outside lower center", ncol=3)
        fig.suptitle(f"low SNR: {_setting_title(ds)}, $\\alpha={al:g}$, {ds.attrs['activation']} attention")
        figs[f"low_snr_alpha{al:g}"] = fig
    return figs


CLASS_COLORS = {"informed": "C0", "lower": "C2", "higher": "C3", "unconverged": "0.6"}
CLASS_LABELS = {"informed": "informed minimum", "lower": "lower minimum", "higher": "higher minimum",
                "unconverged": "unconverged"}


def _point_title(ds, p) -> str:
    return (rf"$\alpha={float(ds.alpha[p]):g}$, $\nu={float(ds.nu[p]):g}$, "
            rf"$\lambda={float(ds.lam[p]):g}$")


@paper_figure
def plot_gd_landscape(ds: xr.Dataset, cfg):
    """The GD landscape (App. A.2): per point, the end points of GD from random starts in the overlap plane
    (m_k, m_v) coloured by the minimum they reach, the replica fixed point (star); then the fractions of runs per
    class for GD and SGD, the test errors of every end point against the replica prediction, and the cross overlaps
    along GD from a start on M against those from random starts."""
    from attnlab.duranthon.landscape import MINIMUM_CLASSES

    P = ds.sizes["point"]
    figs = {}
    fig, axes = panels(P, 1, width=2.8, height=2.6)
    for p, ax in enumerate(axes):
        end = ds.end_overlaps.isel(point=p).sel(algorithm="gd")
        cls = ds.end_class.isel(point=p).sel(algorithm="gd").values
        for i, name in enumerate(MINIMUM_CLASSES):
            sel = cls == i
            if sel.any():
                ax.plot(end.sel(overlap="m_k").values[sel], end.sel(overlap="m_v").values[sel], "o", ms=3.5,
                        alpha=0.7, color=CLASS_COLORS[name], label=CLASS_LABELS[name])
        o = ds.replica_order.isel(point=p)
        ax.plot([float(o.sel(order="m_k"))], [float(o.sel(order="m_v"))], "*", ms=11, color="black",
                label=f"replica (replicon {float(ds.replica_at[p]):.2f})")
        ax.set(xlabel=r"$m_k=k\cdot k^*/D$", ylabel=r"$m_v=v\cdot v^*/D$", title=_point_title(ds, p))
        ax.legend(fontsize=6.5)
    fig.suptitle("end points of full-batch GD from random starts, by the minimum reached")
    figs["minima"] = fig

    fig, axes = panels(3, 1, width=3.1, height=2.7)
    x = np.arange(P)
    ticks = [rf"$\lambda={float(v):g}$" for v in ds.lam.values]
    ax = axes[0]
    for a, algorithm in enumerate(("gd", "sgd")):
        bottom = np.zeros(P)
        for i, name in enumerate(MINIMUM_CLASSES):
            f = np.array([np.mean(ds.end_class.isel(point=p).sel(algorithm=algorithm).values == i) for p in range(P)])
            ax.bar(x + (a - 0.5) * 0.38, f, 0.36, bottom=bottom, color=CLASS_COLORS[name],
                   hatch="//" if algorithm == "sgd" else None, label=CLASS_LABELS[name] if a == 0 else None)
            bottom += f
    ax.set(xticks=x, xticklabels=ticks, ylabel="fraction of runs", xlabel="point (left bar GD, hatched SGD)")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=4)
    ax = axes[1]
    rng = np.random.default_rng(0)
    for p in range(P):
        err = ds.end_test_error.isel(point=p).sel(algorithm="gd").values.ravel()
        cls = ds.end_class.isel(point=p).sel(algorithm="gd").values.ravel()
        for i, name in enumerate(MINIMUM_CLASSES):
            sel = cls == i
            ax.plot(p + 0.25 * rng.uniform(-1, 1, sel.sum()), err[sel], "o", ms=2.5, alpha=0.6,
                    color=CLASS_COLORS[name])
        ax.plot([p - 0.35, p + 0.35], [float(ds.replica_test_error[p])] * 2, **THEORY,
                label="replica" if p == 0 else None)
    ax.set(xticks=x, xticklabels=ticks, ylabel=TEST_ERROR, xlabel="point", title="test errors of GD end points")
    ax.legend(fontsize=6.5)
    ax = axes[2]
    t = ds.time.values
    cross = ["m_kv", "m_vk", "q_kv"]
    for p in range(P):
        on_m = np.abs(ds.on_m_overlaps.isel(point=p).sel(overlap=cross)).max("overlap").mean("informed_set")
        rand = np.abs(ds.gd_overlaps.isel(point=p).sel(overlap=cross)).max("overlap").mean(("set", "start"))
        line, = ax.plot(t, on_m, label=rf"from M, $\lambda={float(ds.lam[p]):g}$")
        ax.plot(t, rand, ":", color=line.get_color())
    ax.set(xlabel=LABELS["time"], ylabel=r"largest $|$cross overlap$|$", title="GD from M (solid), random (dotted)",
           xscale="symlog")
    ax.legend(fontsize=6.5)
    fig.suptitle(rf"plain gradient methods on the empirical risk, $D={cfg.D}$")
    figs["fractions"] = fig
    return figs
