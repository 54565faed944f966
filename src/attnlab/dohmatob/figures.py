"""The figures of the Dohmatob presets: Figure 2 (held-out risk of RGD against the step, one panel per link, the
mean-field theory in broken lines on the same axes) with the overlaps beside the flow, the phase portrait of the
2-D flow on M with its classified stationary points, and the learnability phase diagram."""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D

from attnlab.plot import LABELS, SIMULATION, THEORY, colorbar, panels, paper_figure

__all__ = ["plot_rgd", "plot_flow", "plot_phase"]


MU = r"$\mu$"
EXCESS = r"$\mathbb{E}(f(X)-y)^2-\varepsilon^2$"
FLOW = {**THEORY, "linestyle": "-.", "color": "0.45", "linewidth": 1.1}  # the second theory curve: the flow
START_COLORS = ("C0", "C1")


def _start_label(start, cfg) -> str:
    return "random start" if start == "random" else f"start $\\mu_0={cfg.mu0:g}$"


def _model_title(cfg) -> str:
    return f"$d={cfg.d}$, $L={cfg.L}$, $\\beta={cfg.beta:g}$, $\\gamma={cfg.gamma:.3g}$"


def _limits(values, pad=0.08, min_span=0.3, bound=1.06):
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    lo, hi = (float(values.min()), float(values.max())) if values.size else (-1.0, 1.0)
    span = max(hi - lo, min_span)
    mid = 0.5 * (lo + hi)
    return max(mid - span / 2 - pad * span, -bound), min(mid + span / 2 + pad * span, bound)


@paper_figure
def plot_rgd(ds, cfg):
    """Figure 2: per link, the held-out excess risk of RGD (median over repeats, markers, 95% band) from each start,
    its training risk, and the mean-field risk R_bar at the iterate (theory, dashed) and along the mean-field flow
    from the same start (dash-dotted); and a second figure, mu and nu against the step with the flow."""
    links, starts, steps = list(ds.link.values), list(ds.start.values), ds.step.values
    fig, axes = panels(len(links), width=3.2, height=2.8)
    for ax, link in zip(axes, links):
        for start, col in zip(starts, START_COLORS):
            x = ds.sel(link=link, start=start)
            test = np.maximum(x.test_excess_risk.values, 1e-4)  # a log axis: clip the estimates' noise below 0
            lo, hi = np.percentile(test, (2.5, 97.5), axis=1)
            ax.fill_between(steps, lo, hi, color=col, alpha=0.2, linewidth=0)
            ax.plot(steps, np.median(test, axis=1), color=col, **SIMULATION)
            ax.plot(steps, np.median(x.train_excess_risk.values, axis=1), ":", color=col, lw=1)
            ax.plot(steps, np.median(x.mean_field_risk.values, axis=1), **THEORY)
            ax.plot(steps, np.median(x.flow_mean_field_risk.values, axis=1), **FLOW)
        ax.set(yscale="log", xlabel=LABELS["step"], ylabel=EXCESS, title=f"{link} link")
    handles = [Line2D([], [], color=c, **SIMULATION, label=f"held-out, {_start_label(s, cfg)}")
               for s, c in zip(starts, START_COLORS)]
    handles += [Line2D([], [], color="0.3", ls=":", lw=1, label="training risk"),
                Line2D([], [], **THEORY, label=r"mean field $\bar R$ at the iterate"),
                Line2D([], [], **FLOW, label=r"$\bar R$ along the mean-field flow")]
    fig.legend(handles=handles, loc="outside lower center", ncol=3 if len(links) > 1 else 2)
    sep = ": " if len(links) > 2 else "\n"
    fig.suptitle(f"RGD on the empirical risk ($n={cfg.n_train}$, step ${cfg.step_size:g}$){sep}{_model_title(cfg)}")

    # mu above nu, one column per link (one link: side by side)
    fig2, axes2 = panels(len(links), 2, width=3.0, height=2.3) if len(links) > 1 else panels(2, width=3.0, height=2.5)
    for j, link in enumerate(links):
        for row, (name, label) in enumerate((("mu", MU), ("nu", LABELS["nu"]))):
            ax = axes2[row * len(links) + j]
            values = []
            for start, col in zip(starts, START_COLORS):
                x = ds.sel(link=link, start=start)
                sim = x[name].values
                lo, hi = np.percentile(sim, (2.5, 97.5), axis=1)
                ax.fill_between(steps, lo, hi, color=col, alpha=0.2, linewidth=0)
                ax.plot(steps, np.median(sim, axis=1), color=col, **SIMULATION, label=_start_label(start, cfg))
                ax.plot(steps, np.median(x[f"flow_{name}"].values, axis=1), **THEORY,
                        label="mean-field flow" if start == starts[0] else None)
                values += [lo, hi, x[f"flow_{name}"].values.ravel()]
            if name == "mu":
                ax.axhline(ds.attrs["transition_mu"], color="0.45", lw=0.8, ls=":", label=r"$\mu=\psi/c$")
                values.append([ds.attrs["transition_mu"]])
            ax.set(xlabel=LABELS["step"], ylabel=label, ylim=_limits(np.concatenate(values)),
                   title=f"{link} link")
    h, lab = axes2[0].get_legend_handles_labels()
    order = [lab.index(x) for x in [*(_start_label(s, cfg) for s in starts), "mean-field flow", r"$\mu=\psi/c$"]]
    fig2.legend([h[i] for i in order], [lab[i] for i in order], loc="outside lower center", ncol=len(order))
    fig2.suptitle(f"overlaps of RGD (median, 95% band) and the mean-field flow{sep}{_model_title(cfg)}")
    return {"panels": fig, "overlaps": fig2}


_KIND_STYLE = {"sink": ("o", "C2"), "source": ("s", "C3"), "saddle": ("X", "C1"), "degenerate": ("D", "C7")}


@paper_figure
def plot_flow(ds, cfg):
    """Phase portrait of the 2-D mean-field flow on M per link: the closed-form field's streamlines (grey, wider where
    faster), trajectories integrated from a grid of starts (an arrow at the end), the stationary points marked by
    the kind their Jacobian gives, and the transition mu = psi / c."""
    links = list(ds.link.values)
    fig, axes = panels(len(links), width=2.8, height=2.8)
    for ax, link in zip(axes, links):
        x = ds.sel(link=link)
        if "field_mu" in x:
            u, v = x.field_mu.values, x.field_nu.values
            speed = np.hypot(u, v)
            rel = np.sqrt(speed / (speed.max() or 1.0))  # the speed spans decades: its square root sets the width
            stream = ax.streamplot(x.grid_mu.values, x.grid_nu.values, u, v, color="0.6", density=1.0,
                                   linewidth=0.3 + 0.9 * rel, arrowsize=0.8, zorder=1)
            stream.lines.set_rasterized(True)  # thousands of segments of varying width: an image in the PDF
        for s in range(x.sizes["start"]):
            mu, nu = x.mu.values[s], x.nu.values[s]
            ok = np.isfinite(mu) & np.isfinite(nu)
            mu, nu = mu[ok], nu[ok]
            if mu.size == 0:
                continue
            ax.plot(mu, nu, color="C0", lw=0.9, alpha=0.9, zorder=2)
            ax.plot(mu[0], nu[0], ".", color="C0", ms=3)
            if mu.size > 1 and np.hypot(mu[-1] - mu[0], nu[-1] - nu[0]) > 0.05:
                ax.annotate("", xy=(mu[-1], nu[-1]), xytext=(mu[-2], nu[-2]),
                            arrowprops={"arrowstyle": "-|>", "color": "C0", "lw": 0.8, "mutation_scale": 8})
        ax.axvline(ds.attrs["transition_mu"], color="0.3", lw=0.7, ls=":")
        sel = ds.sp_link.values == link
        for mu, nu, kind in zip(ds.sp_mu.values[sel], ds.sp_nu.values[sel], ds.sp_kind.values[sel]):
            mk, col = _KIND_STYLE[kind]
            ax.plot(mu, nu, mk, color=col, ms=7, mec="k", mew=0.6, clip_on=False, zorder=3)
        ax.set(xlabel=MU, ylabel=LABELS["nu"], xlim=(-1.08, 1.08), ylim=(-1.08, 1.08), aspect="equal",
               title=f"{link} link")
    kinds = [k for k in _KIND_STYLE if k in set(ds.sp_kind.values)]
    handles = [Line2D([], [], linestyle="none", marker=_KIND_STYLE[k][0], color=_KIND_STYLE[k][1], mec="k",
                      mew=0.6, ms=6, label=k) for k in kinds]
    handles += [Line2D([], [], color="0.45", lw=0.6, label="streamlines of the field"),
                Line2D([], [], color="C0", lw=0.9, label="flow from a grid start"),
                Line2D([], [], color="0.3", lw=0.7, ls=":", label=r"$\mu=\psi/c$")]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles))
    fig.suptitle(f"mean-field flow on $\\mathcal{{M}}$ ($\\eta=\\zeta=\\rho=0$): {_model_title(cfg)}")
    return {"phase_portrait": fig}


@paper_figure
def plot_phase(ds, cfg):
    """Left: the mean-field oracle risk over sigma_bar(1) in (alpha, gamma) at dimension d, the boundary
    c = sqrt(1 - gamma^2) = psi(alpha, beta) (theory, dashed), and the Monte Carlo points at d_mc, marked learnt
    or not. Right: the oracle risk over sigma_bar(1) against the margin c - psi, Monte Carlo (markers, 5 SE bars)
    on the mean-field curve (1 - p)^2 (dashed)."""
    fig, axes = panels(2, width=3.6, height=3.0)
    ax = axes[0]
    im = ax.pcolormesh(ds.alpha.values, ds.gamma.values, ds.mf_oracle_risk.values / ds.sigma_bar_1.values[:, None],
                       shading="auto", cmap="Blues", vmin=0, vmax=1, rasterized=True)
    colorbar(fig, im, ax, r"oracle risk $/\,\bar\sigma_\gamma(1)$")
    ax.plot(ds.alpha.values, ds.gamma_boundary.values, **THEORY, label=r"$\sqrt{1-\gamma^2}=\psi(\alpha,\beta)$")
    learn = ds.mc_oracle_risk.values < 0.5 * ds.sigma_bar_1_mc.values[:, None]
    A, G = np.meshgrid(ds.alpha_mc.values, ds.gamma_mc.values)
    ax.plot(A[learn], G[learn], "o", color="white", mec="k", ms=6, linestyle="none",
            label=f"Monte Carlo ($d={cfg.d_mc}$): learnt")
    ax.plot(A[~learn], G[~learn], "X", color="C3", mec="k", mew=0.5, ms=7, linestyle="none", label="not learnt")
    ax.set(xlabel=r"$\alpha=\log(L-1)/d$", ylabel=r"$\gamma$", xlim=(0, cfg.alpha_max), ylim=(0, 1),
           title=f"mean field at $d={cfg.d}$, $\\beta={cfg.beta:g}$")
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower left", ncol=3)
    ax = axes[1]
    sb = ds.sigma_bar_1_mc.values[:, None]
    markers = "osD^vP"
    for i, g in enumerate(ds.gamma_mc.values):
        ax.errorbar(ds.margin_mc.values[i], ds.mc_oracle_risk.values[i] / sb[i, 0],
                    yerr=5 * ds.mc_oracle_risk_se.values[i] / sb[i, 0], color=f"C{i}", capsize=1.5,
                    label=f"$\\gamma={g:g}$", **{**SIMULATION, "marker": markers[i % len(markers)]})
    ax.plot(ds.margin.values, ds.mf_oracle_risk_ratio_curve.values, **THEORY, label=r"mean field $(1-p)^2$")
    ax.axvline(0, color="0.4", lw=0.6, ls=":")
    ax.set(xlabel=r"margin $c-\psi$, $c=\sqrt{1-\gamma^2}$", ylabel=r"oracle risk $/\,\bar\sigma_\gamma(1)$",
           title=f"Monte Carlo at $d={cfg.d_mc}$ (bars: 5 SE)")
    ax.legend(loc="upper right")
    fig.suptitle(f"phase diagram of the {cfg.link} link: learnable iff $\\sqrt{{1-\\gamma^2}}>\\psi$")
    return {"phase_diagram": fig}
