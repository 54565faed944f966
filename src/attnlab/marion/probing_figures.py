"""The figure of ``marion-bert-probing`` (Marion et al., ICLR 2025, Section 2): the notebook's bar chart of pooled probe
accuracies (initial embeddings, train, test, OOD tokens, OOD structure, both) with the notebook's values, and the
per-layer accuracy of the probes on every split, with the permuted-label probes and chance."""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnlab.marion import probing as tpl
from attnlab.marion.probing_preset import BARS, NOTEBOOK_BARS, NOTEBOOK_TRAIN_ACCURACY, bars
from attnlab.plot import SIMULATION, THEORY, panels, paper_figure

__all__ = ["plot"]

_TICKS = {"initial": "Initial\nembeddings", "train": "Train\nset", "test": "Test\nset",
          "ood_tokens": "Test OOD\ntokens", "ood_structure": "Test OOD\nstructure",
          "ood_both": "Test OOD\nstructure\n+ tokens"}
_COLOURS = {"train": "C0", "test": "C1", "ood_tokens": "C2", "ood_structure": "C3", "ood_both": "C4"}


@paper_figure
def plot(ds: xr.Dataset, cfg):
    """Two panels. Left: the six bars of the notebook (mean over probe fits; error bars 1.96 SE, fits and distinct
    sentences combined; two-decimal labels), the notebook's values (bert-base-uncased) as diamonds, chance at 1/2.
    Right: the accuracy of each layer's probe on each split (mean over fits, band 1.96 SE over fits), the probes fit
    on permuted labels on the test split, chance, and for bert-base-uncased the notebook's training accuracies."""
    fig, axes = panels(2, width=4.2, height=3.1, gridspec_kw={"width_ratios": [1.3, 1.0]})
    L = int(ds.layer.values.max())

    ax = axes[0]
    b = bars(ds)
    x = np.arange(len(BARS))
    means = np.array([b[k][0] for k in BARS])
    se = np.array([np.hypot(b[k][1], np.nan_to_num(b[k][2])) for k in BARS])
    colours = ["0.6", *(_COLOURS[k] for k in BARS[1:])]
    ax.bar(x, means, yerr=1.96 * se, color=colours, capsize=2, width=0.7, label="here (95%: fits, sentences)")
    for xi, m in zip(x, means):  # the bar's value, two decimals as the notebook's labels, inside its base
        ax.text(xi, 0.03, f"{m:.2f}", ha="center", va="bottom", fontsize=7, color="white")
    ax.plot(x, [NOTEBOOK_BARS[k] for k in BARS], color="black", **{**SIMULATION, "marker": "D", "markersize": 3.5},
            label="notebook (bert-base-uncased)")
    ax.axhline(0.5, **{**THEORY, "linewidth": 0.9}, label="chance")
    ax.set_xticks(x, [_TICKS[k] for k in BARS], fontsize=6)
    ax.set(ylim=(0.0, 1.5), xlabel=f"evaluation set (probes of layers 1 to {L} pooled)",
           ylabel="probe accuracy", title="pooled probe accuracy")
    ax.set_yticks(np.linspace(0.0, 1.0, 5))
    ax.legend(loc="upper left", ncol=2, columnspacing=0.8, fontsize=6.5)

    ax = axes[1]
    layers = ds.layer.values
    R = ds.sizes["seed"]
    for split in tpl.SPLITS:
        a = ds.accuracy.sel(split=split).values  # (seed, layer)
        m = a.mean(axis=0)
        s = a.std(axis=0, ddof=1) / np.sqrt(R) if R > 1 else np.zeros_like(m)
        ax.plot(layers, m, color=_COLOURS[split], marker="o", markersize=3, label=tpl.SPLIT_NAMES[split])
        ax.fill_between(layers, m - 1.96 * s, m + 1.96 * s, color=_COLOURS[split], alpha=0.15, linewidth=0)
    sh = ds.shuffled_accuracy.sel(split="test").values.mean(axis=0)
    ax.plot(layers, sh, color="0.45", ls=":", marker="x", markersize=3, label="permuted labels, test")
    ax.axhline(0.5, **{**THEORY, "linewidth": 0.9}, label="chance")
    if ds.attrs.get("reference_model") and L == len(NOTEBOOK_TRAIN_ACCURACY) - 1:
        ax.plot(layers, NOTEBOOK_TRAIN_ACCURACY, color="black", **{**SIMULATION, "marker": "D", "markersize": 3},
                label="notebook, train")
    ax.set(ylim=(0.3, 1.05), xlabel=r"layer $\ell$ (0: embeddings)", ylabel="probe accuracy",
           title="accuracy per layer (mean over fits, 95%)")
    ax.set_xticks(layers if L <= 12 else layers[:: max(1, L // 12)])
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), ncol=1, fontsize=6.5)
    fig.suptitle(f"Linear probes of the [CLS] state per layer, {ds.attrs.get('model')}\n"
                 f"{int((ds.sentence_split == 'train').sum())} training sentences, logistic regression (saga), "
                 f"{R} fits per layer")
    return {"panels": fig}
