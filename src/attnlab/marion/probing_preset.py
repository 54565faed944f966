r"""The preset ``marion-bert-probing``: linear probes of BERT's [CLS] state at every layer, on template sentences whose
label is the polarity of one sentiment adjective at a varying position (Marion, Berthier, Biau, Boyer, ICLR 2025,
Section 2); config, run, summary, finding. The sentences are in :mod:`attnlab.marion.probing`, the encoder in
:mod:`attnlab.marion.probing_bert`, the figure in :mod:`attnlab.marion.probing_figures`.

**Experiment.** The frozen ``bert-base-uncased`` encoder (12 layers, width 768) reads every sentence; the feature of
layer ``l = 0..12`` is the [CLS] hidden state ``h^{(l)}_1`` (``l = 0``: the embedding output). For each layer a
logistic-regression probe (scikit-learn, solver saga, ``max_iter = 1000``, L2 penalty with ``C = 1``, tol
``1e-4``, an intercept, unscaled features, labels +-1) is fit on the 15 552 training sentences and evaluated on
every split (:data:`attnlab.marion.probing.SPLITS`). The notebook's bar chart pools the 0/1 correctness of the probes
of layers 1..12 per split ("Train set", "Test set", "Test OOD tokens", "Test OOD structure", "Test OOD structure +
tokens"), next to the layer-0 probe on the training set ("Initial embeddings").

**Weights.** Nothing is downloaded: ``model_dir`` names a local Hugging Face directory (``config.json``,
``model.safetensors``, ``vocab.txt`` or ``tokenizer.json``). Without it, :func:`prerequisite` says in one line how to
provide one, ``attnlab run`` exits with status 2 and ``attnlab reproduce`` reports the preset as skipped. Any BERT
encoder in that layout runs (the tests use a 2-layer one of width 32); the notebook's numbers are compared only for a
model with bert-base-uncased's sizes and vocabulary (:attr:`attnlab.marion.probing_bert.BertModel.is_bert_base_uncased`)
at the notebook's full lists and probe settings.

**Repeats.** ``n_probe_seeds`` probe fits per layer (saga's ``random_state``; the notebook leaves it unseeded), and as
many probes fit with the labels permuted within each split. Standard errors: over the fits, and over the distinct
sentences of a split (a bar's per-sentence mean over layers and fits; the duplicated test list counts once).

**Checks** (each with a negative control):

* the template generator: the five split sizes against the spec's (exact; control: the test split without the
  duplicate test_b); the label balance of the eight lists (exact; control: "mean" read as positive); the spec's
  first and last sentences (exact; control: the join without collapsing the double spaces of empty options);
* the batched JAX forward pass (padded, float32 by default) against the float64 NumPy forward pass of each unpadded
  sentence, on ``n_forward_check`` sentences of different lengths, all layers (round-off bound, 1000 eps relative to
  ``max |h|``); control: the JAX pass without the attention mask;
* the layer-0 [CLS] state is one vector for every sentence (same token, position and segment; round-off bound);
  control: the last layer's spread;
* the layer-0 probe's training accuracy is 1/2 (a constant feature on balanced labels; exact); control: the best
  layer's training accuracy;
* with the labels permuted at random within each split (sentences and labels independent), the probes fit on the
  permuted training labels are at chance on the permuted test labels (1/2 in expectation: whatever the predictions,
  a uniformly permuted balanced labelling agrees with each of them with probability 1/2; 5 SE over the
  permutations); control: the probes fit on the true labels, on the true test labels;
* (bert-base-uncased, full lists, the notebook's probe settings) the notebook's layer-1 training accuracy 0.9764 and
  training accuracy 1.0 from layer 2 on, and its five bars 1.00, 0.95, 0.64, 0.75, 0.69: 5 SE (fits and sentences)
  plus half the printed unit; controls: the layer-2 or layer-0 accuracies, the permuted-label probes, and for the
  OOD bars the in-distribution test bar. Elsewhere they are not evaluated, with the reason.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Literal

import jax
import numpy as np
import pydantic
import xarray as xr

from attnlab.config import ExperimentConfig
from attnlab.errors import AttnlabError
from attnlab.marion import probing as tpl
from attnlab.registry import Check

__all__ = ["CITATION", "NOTEBOOK_BARS", "NOTEBOOK_TRAIN_ACCURACY", "BertProbingConfig", "prerequisite", "run",
           "summarize", "finding", "memory_bytes", "bars"]

CITATION = "Marion, Berthier, Biau, Boyer, ICLR 2025"

NOTEBOOK_TRAIN_ACCURACY = (0.5, 0.9764017489711934, *([1.0] * 11))
"""The notebook's printed training accuracy of the probe of each layer 0..12 (bert-base-uncased)."""

BARS = ("initial", "train", "test", "ood_tokens", "ood_structure", "ood_both")
"""The bars of the notebook's figure: the layer-0 probe on the training set, then layers 1..L pooled per split."""

BAR_NAMES = {"initial": "Initial embeddings", **tpl.SPLIT_NAMES}

NOTEBOOK_BARS = {"initial": 0.50, "train": 1.00, "test": 0.95, "ood_tokens": 0.64, "ood_structure": 0.75,
                 "ood_both": 0.69}
"""The bar labels of the notebook's figure (two decimals)."""

NOTEBOOK_PROBE = {"C": 1.0, "max_iter": 1000, "tol": 1e-4, "standardize": False, "max_per_list": 0,
                  "test_b": "duplicate"}
"""The notebook's settings: the reference checks apply to runs with these values."""

_EXTRAS = (("tokenizers", "tokenizers"), ("safetensors", "safetensors"), ("scikit-learn", "sklearn"))


class BertProbingConfig(ExperimentConfig):
    """Config of the BERT probing experiment (field names are the ``--set`` keys)."""

    model_dir: str | None = pydantic.Field(None, description="local Hugging Face BERT directory (config.json, "
                                           "model.safetensors, vocab.txt or tokenizer.json), e.g. bert-base-uncased "
                                           "downloaded elsewhere; required")
    max_per_list: int = pydantic.Field(0, ge=0, description="sentences drawn per list, half of each label, without "
                                       "replacement (0: every sentence)")
    test_b: Literal["duplicate", "drop"] = pydantic.Field("duplicate", description="the test split holds test_a "
                                                          "twice (the notebook) or once")
    n_probe_seeds: int = pydantic.Field(3, ge=1, description="probe fits per layer (saga random_state), and as many "
                                        "fits on permuted labels")
    C: float = pydantic.Field(1.0, gt=0, description="inverse L2 penalty of the logistic regression")
    max_iter: int = pydantic.Field(1000, ge=1, description="saga epochs at most")
    tol: float = pydantic.Field(1e-4, gt=0, description="saga stopping tolerance")
    standardize: bool = pydantic.Field(False, description="standardise each feature on the training set (the "
                                       "notebook does not)")
    batch_size: int = pydantic.Field(128, ge=1, description="sentences per batch of the forward pass")
    precision: Literal["float32", "float64"] = pydantic.Field("float32", description="float type of the forward pass")
    n_forward_check: int = pydantic.Field(8, ge=2, description="sentences (of different lengths) whose batched "
                                          "forward pass is checked against the float64 reference")
    store_features: bool = pydantic.Field(False, description="store the [CLS] features (sentence, layer, hidden) in "
                                          "the dataset")

    @pydantic.field_validator("max_per_list")
    @classmethod
    def _even(cls, v: int) -> int:
        if v % 2:
            raise ValueError(f"max_per_list must be even (half of each label), got {v}")
        return v

    def at_notebook_settings(self) -> bool:
        return all(getattr(self, k) == v for k, v in NOTEBOOK_PROBE.items())


def prerequisite(cfg: BertProbingConfig) -> str | None:
    """Why the preset cannot run with ``cfg`` here, in one line (the ``probing`` extra missing, no model directory,
    or one without the needed files); None when it can."""
    missing = [name for name, module in _EXTRAS if importlib.util.find_spec(module) is None]
    if missing:
        return f"needs {', '.join(missing)}, not installed: pip install 'attnlab[probing]'"
    how = ("download bert-base-uncased elsewhere (config.json, model.safetensors, vocab.txt) and pass "
           "--set model_dir=PATH")
    if cfg.model_dir is None:
        return f"needs a local BERT model directory and none was given: {how}"
    from attnlab.marion.probing_bert import missing_files

    d = Path(cfg.model_dir).expanduser()
    if not d.is_dir():
        return f"model directory {d} does not exist: {how}"
    lacks = missing_files(d)
    if lacks:
        return f"model directory {d} lacks {', '.join(lacks)}: {how}"
    return None


def memory_bytes(cfg: BertProbingConfig) -> float:
    """Upper bound of the bytes a run takes: the weights (NumPy and JAX copies), the features of the distinct
    sentences, one batch's activations and the probes' float64 copies of one layer; bert-base-uncased's sizes unless
    ``model_dir`` holds a readable config.json."""
    sizes = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072,
             "max_position_embeddings": 512}
    if cfg.model_dir is not None:
        try:
            found = json.loads((Path(cfg.model_dir).expanduser() / "config.json").read_text())
            sizes.update({k: int(found[k]) for k in sizes if isinstance(found.get(k), int)})
        except (OSError, ValueError, TypeError):
            pass
    V, H, L, I, P = (float(sizes[k]) for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                                                "intermediate_size", "max_position_embeddings"))
    params = (V + P + 2) * H + L * (4 * H * H + 2 * H * I + 9 * H + I)
    n_distinct = sum(n if not cfg.max_per_list else min(n, cfg.max_per_list)
                     for name, n in tpl.LIST_SIZES.items() if name != "test_b")
    word = 8.0 if cfg.precision == "float64" else 4.0
    features = n_distinct * (L + 1) * H * word
    batch = float(cfg.batch_size) * 32.0 * (4 * H + I + 12 * 32.0) * word * 3
    probes = 3.0 * 8.0 * n_distinct * H
    return 2.0 * (2 * 4.0 * params + params * word + features + batch + probes)


def _sample(rng, sentences: list, k: int) -> np.ndarray:
    """Indices of ``k`` sentences of a list, half of each label, without replacement, in the list's order (all when
    ``k`` is 0 or the list is smaller)."""
    n = len(sentences)
    if not k or k >= n:
        return np.arange(n)
    labels = np.array([s.label for s in sentences])
    pos, neg = np.flatnonzero(labels > 0), np.flatnonzero(labels < 0)
    pick = np.concatenate([rng.choice(pos, k // 2, replace=False), rng.choice(neg, k - k // 2, replace=False)])
    return np.sort(pick)


def _generator_data() -> dict:
    """What the generator checks read: list sizes and positive fractions (also with "mean" read as positive), split
    sizes (also without the duplicate test_b), mismatches with the spec's quoted sentences (also without the
    double-space collapse)."""
    lists = {name: tpl.sentences(name) for name in tpl.LISTS}
    size = {name: len(s) for name, s in lists.items()}
    frac = {name: float(np.mean([x.label > 0 for x in s])) for name, s in lists.items()}
    flipped = {name: float(np.mean([x.label > 0 or x.adjective == "mean" for x in s])) for name, s in lists.items()}
    split = {k: sum(size[n] for n in v) for k, v in tpl.SPLITS.items()}
    dropped = {k: sum(size[n] for n in v) for k, v in tpl.split_lists("drop").items()}
    mism = sum(lists[n][i].text != t for (n, i), t in tpl.SPEC_SENTENCES.items())
    mism_raw = sum(tpl.sentences(n, collapse=False)[i].text != t for (n, i), t in tpl.SPEC_SENTENCES.items())
    return {"lists": lists, "size": size, "frac": frac, "flipped": flipped, "split": split, "dropped": dropped,
            "mismatches": mism, "mismatches_uncollapsed": mism_raw}


def permuted_labels(labels, split_of, seed: int, r: int) -> np.ndarray:
    """The labels permuted at random within each split (permutation ``r``): sentences and labels made independent,
    each split still balanced."""
    rng = np.random.default_rng([seed, r, 1])
    out = np.array(labels, copy=True)
    for split in np.unique(split_of):
        rows = np.flatnonzero(split_of == split)
        out[rows] = out[rng.permutation(rows)]
    return out


def _probes(feats, inverse, labels, split_of, cfg: BertProbingConfig, seed: int, progress=None):
    """Per fit r and layer l, the 0/1 correctness on every sentence of the probe fit on the training sentences'
    layer-l features and labels; and, for permutation r of the labels within each split (:func:`permuted_labels`),
    that of the probe fit on the permuted training labels against the permuted labels. Also the number of fits that
    stopped at ``max_iter``."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    R, n_layers = cfg.n_probe_seeds, feats.shape[1]
    n = inverse.size
    correct = np.zeros((R, n_layers, n), dtype=np.int8)
    shuffled = np.zeros((R, n_layers, n), dtype=np.int8)
    is_train = split_of == "train"
    train_rows = inverse[is_train]
    perms = [permuted_labels(labels, split_of, seed, r) for r in range(R)]
    not_converged = 0
    done, total = 0, 2 * R * n_layers
    for layer in range(n_layers):
        X = np.asarray(feats[:, layer, :], dtype=np.float64)
        if cfg.standardize:
            X = StandardScaler().fit(X[train_rows]).transform(X)
        for r in range(R):
            state = int(np.random.default_rng([seed, r, 0]).integers(2**31 - 1))
            for target, y in ((correct, labels), (shuffled, perms[r])):
                clf = LogisticRegression(solver="saga", max_iter=cfg.max_iter, C=cfg.C, tol=cfg.tol,
                                         random_state=state)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    clf.fit(X[train_rows], y[is_train])
                not_converged += int(np.max(clf.n_iter_) >= cfg.max_iter)
                target[r, layer] = (clf.predict(X)[inverse] == y)
                done += 1
                if progress is not None:
                    progress(done, total)
    return correct, shuffled, not_converged


def run(cfg: BertProbingConfig, key, progress=None) -> xr.Dataset:
    """Generate the sentences, read the model, compute the [CLS] features of every layer (batched, one compiled
    program), check the forward pass on a few sentences against the float64 reference, fit the probes.

    ``progress(done, total)``: 1 for the sentences and the model, 4 for the features, 1 for the check, 4 for the
    probes."""
    import jax.numpy as jnp

    from attnlab.marion import probing_bert as bert

    reason = prerequisite(cfg)
    if reason is not None:
        raise AttnlabError(f"marion-bert-probing: {reason}")

    stages = 10.0

    def report(x):
        if progress is not None:
            progress(x, stages)

    report(0)
    seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    gen = _generator_data()
    picks = {}
    for name in tpl.LISTS:
        if name == "test_b":
            continue
        picks[name] = _sample(rng, gen["lists"][name], cfg.max_per_list)
    picks["test_b"] = picks["test_a"]  # the notebook's test_b is test_a: the same draw keeps it a copy
    rows = [(split, name, gen["lists"][name][i]) for split, lists in tpl.split_lists(cfg.test_b).items()
            for name in lists for i in picks[name]]
    texts = [s.text for _, _, s in rows]
    distinct = list(dict.fromkeys(texts))
    index = {t: i for i, t in enumerate(distinct)}
    inverse = np.array([index[t] for t in texts])
    labels = np.array([s.label for _, _, s in rows])
    split_of = np.array([split for split, _, _ in rows])
    list_of = np.array([name for _, name, _ in rows])

    dtype = jnp.float64 if cfg.precision == "float64" else jnp.float32
    model = bert.load_model(cfg.model_dir, dtype)
    report(1)
    feats, enc = bert.cls_features(model, distinct, cfg.batch_size, progress=lambda d, t: report(1 + 4 * d / t))
    n_tokens = np.array([len(e.ids) for e in enc])
    first = {}
    for _, _, s in rows:
        first.setdefault(s.text, s)
    adj_token = np.array([next((t for t, (a, _) in enumerate(e.offsets) if t > 0 and a == first[text].adjective_char
                                and e.ids[t] != model.pad_id), -1) for text, e in zip(distinct, enc)])

    # the forward-pass check: sentences of different lengths, the batched states against the float64 reference
    order = np.argsort(n_tokens, kind="stable")
    check = order[np.unique(np.round(np.linspace(0, len(distinct) - 1, min(cfg.n_forward_check, len(distinct))))
                            .astype(int))]
    ref = np.stack([bert.reference_cls_states(model, enc[i].ids) for i in check])
    ids, mask = bert.pad(model, [enc[i] for i in check], int(n_tokens.max()))
    nomask = bert.run_batches(model, ids, mask, cfg.batch_size, use_mask=False).astype(np.float64)
    err = np.max(np.abs(feats[check].astype(np.float64) - ref), axis=-1)
    err_nomask = np.max(np.abs(nomask - ref), axis=-1)
    scale = np.max(np.abs(ref), axis=-1)
    spread = np.max(np.abs(feats - feats[:1]), axis=(0, 2)).astype(np.float64)
    size = np.max(np.abs(feats), axis=(0, 2)).astype(np.float64)
    report(6)

    correct, shuffled, not_converged = _probes(feats, inverse, labels, split_of, cfg, seed,
                                               progress=lambda d, t: report(6 + 4 * d / t))
    L = model.config.num_hidden_layers
    splits = list(tpl.SPLITS)
    acc = np.stack([correct[..., split_of == s].mean(axis=-1) for s in splits], axis=-1)
    acc_sh = np.stack([shuffled[..., split_of == s].mean(axis=-1) for s in splits], axis=-1)
    lists = list(tpl.LISTS)
    one = {"units": "1"}
    data = {
        "text": (("sentence",), np.array(texts), {**one, "long_name": "template sentence"}),
        "label": (("sentence",), labels.astype(np.int8), {**one, "long_name": "label y (adjective polarity)"}),
        "sentence_split": (("sentence",), split_of, {**one, "long_name": "split of the sentence"}),
        "sentence_list": (("sentence",), list_of, {**one, "long_name": "template list of the sentence"}),
        "distinct": (("sentence",), inverse, {**one, "long_name": "index of the sentence's distinct text"}),
        "adjective_word": (("sentence",), np.array([s.adjective_word for _, _, s in rows]),
                           {**one, "long_name": "whitespace-word index of the adjective"}),
        "adjective_token": (("sentence",), adj_token[inverse], {**one, "long_name": "token index of the "
                                                                "adjective's first word piece ([CLS] = 0)"}),
        "n_tokens": (("sentence",), n_tokens[inverse], {**one, "long_name": "tokens with [CLS] and [SEP]"}),
        "correct": (("seed", "layer", "sentence"), correct, {**one, "long_name": "probe of the layer correct (0/1)"}),
        "shuffled_correct": (("seed", "layer", "sentence"), shuffled, {
            **one, "long_name": "probe fit on labels permuted within each split correct on the permuted label (0/1)"}),
        "accuracy": (("seed", "layer", "split"), acc, {**one, "long_name": "probe accuracy"}),
        "shuffled_accuracy": (("seed", "layer", "split"), acc_sh, {**one, "long_name": "accuracy of the probe fit on "
                                                                   "permuted labels, on permuted labels"}),
        "cls_spread": (("layer",), spread, {**one, "long_name": "max over sentences and units of |h_i - h_1| at [CLS]"}),
        "cls_scale": (("layer",), size, {**one, "long_name": "max over sentences and units of |h| at [CLS]"}),
        "forward_error": (("check_sentence", "layer"), err, {
            **one, "long_name": "max |batched JAX - float64 reference| over units, [CLS]"}),
        "forward_error_nomask": (("check_sentence", "layer"), err_nomask, {
            **one, "long_name": "the same without the attention mask (control)"}),
        "forward_scale": (("check_sentence", "layer"), scale, {**one, "long_name": "max |h| of the reference"}),
        "forward_text": (("check_sentence",), np.array([distinct[i] for i in check]),
                         {**one, "long_name": "sentence of the forward-pass check"}),
        "list_size": (("list",), np.array([gen["size"][n] for n in lists]), {**one, "long_name": "sentences generated"}),
        "list_size_spec": (("list",), np.array([tpl.LIST_SIZES[n] for n in lists]), {**one, "long_name": "spec's size"}),
        "list_positive_fraction": (("list",), np.array([gen["frac"][n] for n in lists]),
                                   {**one, "long_name": "fraction of positive labels"}),
        "list_positive_fraction_flipped": (("list",), np.array([gen["flipped"][n] for n in lists]), {
            **one, "long_name": "the same with 'mean' read as positive (control)"}),
        "split_size": (("split",), np.array([gen["split"][s] for s in splits]), {**one, "long_name": "sentences "
                                                                                  "generated (test_b duplicated)"}),
        "split_size_spec": (("split",), np.array([tpl.SPLIT_SIZES[s] for s in splits]), {**one, "long_name":
                                                                                         "spec's size"}),
        "split_size_dropped": (("split",), np.array([gen["dropped"][s] for s in splits]), {
            **one, "long_name": "sentences without the duplicate test_b (control)"}),
        "spec_sentence_mismatches": ((), gen["mismatches"], {**one, "long_name": "spec's quoted sentences not "
                                                             "generated", "n_quoted": len(tpl.SPEC_SENTENCES)}),
        "spec_sentence_mismatches_uncollapsed": ((), gen["mismatches_uncollapsed"], {
            **one, "long_name": "the same without the double-space collapse (control)"}),
        "probes_not_converged": ((), not_converged, {**one, "long_name": "probe fits stopped at max_iter"}),
    }
    if cfg.store_features:
        data["features"] = (("sentence", "layer", "hidden"), feats[inverse], {**one, "long_name": "[CLS] state"})
    mc = model.config
    coords = {"sentence": np.arange(len(rows)), "layer": np.arange(L + 1), "seed": np.arange(cfg.n_probe_seeds),
              "split": splits, "list": lists, "check_sentence": np.arange(len(check))}
    if cfg.store_features:
        coords["hidden"] = np.arange(mc.hidden_size)
    ds = xr.Dataset(data, coords=coords, attrs={
        "model": model.describe(), "reference_model": bool(model.is_bert_base_uncased), "model_dir": str(model.model_dir),
        "model_fingerprint": model.fingerprint, "tokenizer": model.tokenizer_file, "lowercase": model.lowercase,
        "hidden_size": mc.hidden_size, "num_hidden_layers": L, "num_attention_heads": mc.num_attention_heads,
        "vocab_size": mc.vocab_size, "intermediate_size": mc.intermediate_size, "precision": cfg.precision,
        "eps": float(np.finfo(np.dtype(cfg.precision)).eps), "probe_seed": seed, "n_distinct": len(distinct)})
    for name, long_name in (("sentence", "sentence of the evaluated splits"),
                            ("layer", "hidden state l (0: embedding output)"), ("seed", "probe fit"),
                            ("split", "evaluation split"), ("list", "template list"),
                            ("check_sentence", "sentence of the forward-pass check"), ("hidden", "unit of [CLS]")):
        if name in ds.coords:
            ds[name].attrs.update(units="1", long_name=long_name)
    report(stages)
    return ds


# --- summary --------------------------------------------------------------------------------------------------------

def _pooled(correct: xr.DataArray, ds: xr.Dataset, split: str, layers) -> tuple[float, float, float, np.ndarray]:
    """Mean 0/1 correctness over ``layers`` and the sentences of ``split``; its SE over fits and over the distinct
    sentences (per-sentence mean over layers and fits); the per-fit means."""
    sel = (ds.sentence_split == split).values
    c = correct.isel(sentence=sel).sel(layer=layers).values.astype(float)  # (seed, layer, n)
    per_seed = c.mean(axis=(1, 2))
    per_sentence = c.mean(axis=(0, 1))
    _, first = np.unique(ds.distinct.values[sel], return_index=True)
    distinct = per_sentence[first]
    se_sent = float(np.std(distinct, ddof=1) / np.sqrt(distinct.size)) if distinct.size > 1 else math.nan
    se_seed = float(np.std(per_seed, ddof=1) / np.sqrt(per_seed.size)) if per_seed.size > 1 else 0.0
    return float(per_seed.mean()), se_seed, se_sent, per_seed


def bars(ds: xr.Dataset) -> dict[str, tuple[float, float, float]]:
    """The notebook's six bars: ``{bar: (mean, SE over fits, SE over distinct sentences)}``."""
    L = int(ds.layer.values.max())
    deep = list(range(1, L + 1))
    out = {"initial": _pooled(ds.correct, ds, "train", [0])[:3]}
    for split in tpl.SPLITS:
        out[split] = _pooled(ds.correct, ds, split, deep)[:3]
    return out


def _reference_reason(ds: xr.Dataset, cfg: BertProbingConfig) -> str | None:
    """Why the notebook's numbers do not apply to this run (None when they do)."""
    what = []
    if not ds.attrs.get("reference_model"):
        what.append(f"this model: {ds.attrs.get('model')}")
    if not cfg.at_notebook_settings():
        what.append("settings differ from the notebook's (" + ", ".join(
            f"{k}={getattr(cfg, k)}" for k, v in NOTEBOOK_PROBE.items() if getattr(cfg, k) != v) + ")")
    if not what:
        return None
    return ("only for bert-base-uncased with the notebook's full lists and probe settings (" + "; ".join(what) + ")")


def summarize(ds: xr.Dataset, cfg: BertProbingConfig):
    """Metrics (per-layer accuracies per split, the six bars with their SEs, model sizes) and the checks, each with
    its negative control."""
    L = int(ds.layer.values.max())
    deep = list(range(1, L + 1))
    R = ds.sizes["seed"]
    acc = ds.accuracy.mean("seed")
    metrics: dict[str, float] = {"num_hidden_layers": float(L), "hidden_size": float(ds.attrs["hidden_size"]),
                                 "reference_model": float(bool(ds.attrs.get("reference_model"))),
                                 "n_sentences": float(ds.sizes["sentence"]), "n_distinct": float(ds.attrs["n_distinct"]),
                                 "n_probe_seeds": float(R), "probes_not_converged": float(ds.probes_not_converged)}
    for split in tpl.SPLITS:
        metrics[f"n_{split}"] = float((ds.sentence_split == split).sum())
        for layer in range(L + 1):
            metrics[f"accuracy_{split}_layer{layer}"] = float(acc.sel(split=split, layer=layer))
    b = bars(ds)
    for name, (m, se_seed, se_sent) in b.items():
        metrics[f"bar_{name}"] = m
        metrics[f"bar_{name}_se_fits"] = se_seed
        metrics[f"bar_{name}_se_sentences"] = se_sent
    held = acc.sel(split="test", layer=deep)
    metrics["best_test_layer"] = float(deep[int(np.argmax(held.values))])
    metrics["best_test_accuracy"] = float(held.max())
    sh_test, sh_se_seed, _, _ = _pooled(ds.shuffled_correct, ds, "test", deep)
    metrics["shuffled_test_accuracy"] = sh_test
    for name, v in NOTEBOOK_BARS.items():
        metrics[f"notebook_bar_{name}"] = v

    checks = []
    dev = np.abs(ds.split_size - ds.split_size_spec).values
    checks.append(Check.where_finite(
        "template generator: largest |split size - spec's| over the 5 splits (15552/4608/3072/144/96)",
        theory=0.0, simulation=float(dev.max()), tolerance=0.5, basis="exact: integer counts (half a sentence)",
        control="the test split without the notebook's duplicate test_b",
        control_simulation=float(np.abs(ds.split_size_dropped - ds.split_size_spec).max())))
    frac = ds.list_positive_fraction.values
    flipped = ds.list_positive_fraction_flipped.values
    n_min = int(ds.list_size.min())
    checks.append(Check.where_finite(
        "template generator: positive fraction of the 8 lists, the farthest from 1/2",
        theory=0.5, simulation=float(frac[np.argmax(np.abs(frac - 0.5))]), tolerance=0.5 / n_min,
        basis=f"exact: half a sentence of the smallest list ({n_min})",
        control="labels with the negative adjective 'mean' read as positive",
        control_simulation=float(flipped[np.argmax(np.abs(flipped - 0.5))])))
    checks.append(Check.where_finite(
        f"template generator: the spec's {int(ds.spec_sentence_mismatches.attrs['n_quoted'])} quoted first/last "
        "sentences not generated", theory=0.0, simulation=float(ds.spec_sentence_mismatches), tolerance=0.5,
        basis="exact: a count (half a sentence)",
        control="the join without collapsing the double spaces of empty options",
        control_simulation=float(ds.spec_sentence_mismatches_uncollapsed)))

    eps = float(ds.attrs["eps"])
    rel = float((ds.forward_error / ds.forward_scale).max())
    checks.append(Check.where_finite(
        f"batched JAX forward pass ({ds.attrs['precision']}, padded) vs float64 NumPy reference (unpadded): max "
        f"|h - h_ref| / max |h_ref| over {ds.sizes['check_sentence']} sentences and {L + 1} layers",
        theory=0.0, simulation=rel, tolerance=1000.0 * eps,
        basis=f"round-off bound: 1000 eps of {ds.attrs['precision']}",
        control="the JAX pass without the attention mask (padding attended to)",
        control_simulation=float((ds.forward_error_nomask / ds.forward_scale).max())))
    scale = ds.cls_scale.values
    checks.append(Check.where_finite(
        "layer-0 [CLS] state is the same for every sentence: max |h_i - h_1| / max |h|",
        theory=0.0, simulation=float(ds.cls_spread.values[0] / scale[0]), tolerance=8.0 * eps,
        basis=f"round-off bound: 8 eps of {ds.attrs['precision']}",
        control=f"the same at the last layer ({L})", control_simulation=float(ds.cls_spread.values[-1] / scale[-1])))
    train_acc = acc.sel(split="train").values
    n_train = int(metrics["n_train"])
    best = int(np.argmax(train_acc[1:])) + 1
    checks.append(Check.where_finite(
        "layer-0 probe's training accuracy = 1/2 (constant feature, balanced labels)",
        theory=0.5, simulation=float(train_acc[0]), tolerance=0.5 / n_train,
        basis=f"exact: half a sentence of {n_train}",
        control=f"the best layer's ({best}) training accuracy", control_simulation=float(train_acc[best])))
    name = f"labels permuted within each split: probes' test accuracy, layers 1-{L} pooled, = 1/2 (chance)"
    true_test, _, _, _ = _pooled(ds.correct, ds, "test", deep)
    if R < 2:
        checks.append(Check.not_evaluated(name, "one permutation: the standard error needs two", theory=0.5))
    else:
        checks.append(Check.where_finite(
            name, theory=0.5, simulation=sh_test, tolerance=5.0 * sh_se_seed,
            basis=f"5 SE over {R} label permutations",
            control="the probes fit on the true labels", control_simulation=true_test))

    reason = _reference_reason(ds, cfg)
    ref_checks = []
    p1 = NOTEBOOK_TRAIN_ACCURACY[1]
    if L >= 2:
        per_fit = ds.accuracy.sel(split="train").values  # (seed, layer)
        se = lambda layer, p: math.hypot(  # noqa: E731
            float(np.std(per_fit[:, layer], ddof=1) / np.sqrt(R)) if R > 1 else 0.0, math.sqrt(p * (1 - p) / n_train))
        ref_checks.append(lambda: Check.where_finite(
            "notebook: layer-1 probe's training accuracy 0.9764", theory=p1, simulation=float(train_acc[1]),
            tolerance=5.0 * se(1, p1), basis="5 SE (fits; binomial over the training sentences)",
            control="the layer-2 probe's training accuracy", control_simulation=float(train_acc[2])))
        p = 1.0 - 1.0 / n_train  # the binomial SE at p = 1 is 0: at least one sentence's worth
        worst = 2 + int(np.argmin(train_acc[2:]))
        ref_checks.append(lambda: Check.where_finite(
            "notebook: training accuracy 1.0 from layer 2 on (the lowest layer's)", theory=1.0,
            simulation=float(train_acc[worst]), tolerance=5.0 * se(worst, p),
            basis="5 SE (fits; binomial over the training sentences, p at least 1 - 1/n)",
            control=f"the layer-0 probe's training accuracy (lowest: layer {worst})",
            control_simulation=float(train_acc[0])))
    controls = {"train": ("the layer-0 bar (Initial embeddings)", b["initial"][0]),
                "test": ("the probes with labels permuted within each split, same split", sh_test)}
    for bar in ("train", "test", "ood_tokens", "ood_structure", "ood_both"):
        m, se_seed, se_sent = b[bar]
        ctl_name, ctl_value = controls.get(bar, ("the in-distribution test bar", b["test"][0]))
        ref_checks.append(lambda bar=bar, m=m, se_seed=se_seed, se_sent=se_sent, ctl_name=ctl_name,
                          ctl_value=ctl_value: Check.where_finite(
            f"notebook bar '{BAR_NAMES[bar]}' {NOTEBOOK_BARS[bar]:.2f} (layers 1-{L} pooled)",
            theory=NOTEBOOK_BARS[bar], simulation=m, tolerance=5.0 * math.hypot(se_seed, se_sent) + 0.005,
            basis="5 SE (fits; distinct sentences) plus half the printed unit", control=ctl_name,
            control_simulation=ctl_value))
    names = ["notebook: layer-1 probe's training accuracy 0.9764",
             "notebook: training accuracy 1.0 from layer 2 on (the lowest layer's)",
             *(f"notebook bar '{BAR_NAMES[bar]}' {NOTEBOOK_BARS[bar]:.2f} (layers 1-12 pooled)"
               for bar in ("train", "test", "ood_tokens", "ood_structure", "ood_both"))]
    if reason is None and L == 12:
        checks += [make() for make in ref_checks]
    else:
        checks += [Check.not_evaluated(n, reason or "only for bert-base-uncased (12 layers)") for n in names]
    return metrics, checks


def finding(metrics, cfg: BertProbingConfig) -> str:
    bar = [metrics[f"bar_{b}"] for b in BARS]
    nb = [NOTEBOOK_BARS[b] for b in BARS]
    model = "bert-base-uncased" if metrics["reference_model"] else (
        f"a BERT of {int(metrics['num_hidden_layers'])} layers, width {int(metrics['hidden_size'])} (not the "
        "paper's weights)")
    return (f"{model}, [CLS] probes on {int(metrics['n_train'])} training sentences: initial/train/test/OOD tokens/"
            f"OOD structure/both {'/'.join(f'{x:.2f}' for x in bar)} (notebook, bert-base-uncased: "
            f"{'/'.join(f'{x:.2f}' for x in nb)}); best held-out layer {int(metrics['best_test_layer'])} "
            f"({metrics['best_test_accuracy']:.2f}); probes on permuted labels {metrics['shuffled_test_accuracy']:.2f}")
