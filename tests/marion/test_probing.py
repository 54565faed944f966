"""marion-bert-probing (Marion et al., ICLR 2025, Section 2): the template sentences against the spec's counts, labels
and quoted sentences; the JAX BERT encoder, read from a Hugging Face directory, against a float64 NumPy forward pass
(and against transformers' BertModel where torch and transformers happen to be installed); the probes on planted
features; the preset end to end on a small random BERT (``tiny_bert_dir``); the one-line refusal without a model
directory, and reproduce's skip."""

import json
import math
import shutil

import numpy as np
import pytest

from app.common import one_error_line
from attnlab.errors import AttnlabError
from attnlab.marion import probing as tpl
from attnlab.marion import probing_bert as bert
from attnlab.marion import probing_preset as pp
from attnlab.registry import all_presets, resolve_config

NAME = "marion-bert-probing"

# --- the template sentences -------------------------------------------------------------------------------------------


def test_lists_have_the_spec_sizes_balance_and_order():
    for name, size in tpl.LIST_SIZES.items():
        s = tpl.sentences(name)
        assert len(s) == size, name
        assert sum(x.label > 0 for x in s) * 2 == size, name  # exactly balanced
        assert len({x.text for x in s}) == size, name  # no two options give the same sentence
    assert [x.text for x in tpl.sentences("test_a")] == [x.text for x in tpl.sentences("test_b")]  # the duplicate
    for (name, i), text in tpl.SPEC_SENTENCES.items():
        assert tpl.sentences(name)[i].text == text
    a = tpl.sentences("train_a")  # the last slot (the adjective) varies fastest
    assert [x.adjective for x in a[:6]] == [w for w, _ in tpl.ADJ6]
    assert a[1].text == "The city is nice. my dog is mean" and a[6].text == "The city is nice. my dog is very nice"
    assert tpl.sentences("train_b")[-1].text == "The city is dirty. our red delightful cow is extremely giant"


def test_splits_have_the_spec_sizes():
    sizes = {k: len(v) for k, v in tpl.split_sentences().items()}
    assert sizes == tpl.SPLIT_SIZES == {"train": 15552, "test": 4608, "ood_tokens": 3072, "ood_structure": 144,
                                        "ood_both": 96}
    assert len(tpl.split_sentences("drop")["test"]) == 2304


def test_the_label_is_the_adjectives_polarity_and_its_position_is_recorded():
    polarity = dict(tpl.ADJ6 + tpl.ADJ4)
    for name in tpl.LISTS:
        for x in tpl.sentences(name):
            assert x.label == polarity[x.adjective]
            assert x.text.split()[x.adjective_word] == x.adjective
            assert x.text[x.adjective_char:].split()[0] == x.adjective
    # the adjective's position varies: last word (predicative) or before the noun (attributive)
    assert {x.adjective_word for x in tpl.sentences("train_a")} == {7, 8, 9}
    assert {x.adjective_word for x in tpl.sentences("train_b")} == {5, 6}


def test_join_collapses_the_double_space_of_an_empty_option_once():
    assert tpl.join_words(["The city is", "nice.", "my", "", "dog"]) == "The city is nice. my dog"
    assert tpl.join_words(["a", "", "b"], collapse=False) == "a  b"
    assert "  " not in "".join(x.text for name in tpl.LISTS for x in tpl.sentences(name))


# --- the model directory and the encoder -------------------------------------------------------------------------------

HF_NAMES = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias",
            *(f"encoder.layer.{i}.{t}" for i in range(2) for t in (
                "attention.self.query.weight", "attention.self.query.bias", "attention.self.key.weight",
                "attention.self.key.bias", "attention.self.value.weight", "attention.self.value.bias",
                "attention.output.dense.weight", "attention.output.dense.bias", "attention.output.LayerNorm.weight",
                "attention.output.LayerNorm.bias", "intermediate.dense.weight", "intermediate.dense.bias",
                "output.dense.weight", "output.dense.bias", "output.LayerNorm.weight", "output.LayerNorm.bias")),
            "pooler.dense.weight", "pooler.dense.bias"]


@pytest.fixture(scope="module")
def model(tiny_bert_dir):
    return bert.load_model(tiny_bert_dir)


def _texts():
    """Sentences of every frame and of different lengths."""
    return [tpl.sentences(n)[i].text for n, i in (("train_a", 0), ("train_a", -1), ("train_b", 7), ("test_c", 3),
                                                  ("test_d", -1), ("test_e", 0), ("test_f", 5))]


def test_the_tiny_model_is_written_in_the_hugging_face_layout(tiny_bert_dir):
    from safetensors.numpy import load_file

    cfg = json.loads((tiny_bert_dir / "config.json").read_text())
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (32, 2, 2)
    assert cfg["hidden_act"] == "gelu" and cfg["model_type"] == "bert"
    assert sorted(load_file(str(tiny_bert_dir / "model.safetensors"))) == sorted(HF_NAMES)
    vocab = (tiny_bert_dir / "vocab.txt").read_text().split("\n")
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and cfg["vocab_size"] == len(vocab) - 1
    assert bert.missing_files(tiny_bert_dir) == []


def test_tokenizer_lowercases_adds_cls_sep_and_knows_every_template_word(model):
    enc = bert.tokenize(model, ["The city is nice. my dog is nice"])[0]
    assert enc.tokens == ["[CLS]", "the", "city", "is", "nice", ".", "my", "dog", "is", "nice", "[SEP]"]
    unk = model.tokenizer.token_to_id("[UNK]")
    texts = sorted({x.text for name in tpl.LISTS for x in tpl.sentences(name)})
    assert all(unk not in e.ids for e in bert.tokenize(model, texts))


def test_the_published_checkpoints_names_and_tokenizer_json_load_the_same_model(tmp_path, model):
    hub = bert.write_random_model(tmp_path / "hub", tpl.template_words(), hub_names=True)
    from safetensors.numpy import load_file

    names = list(load_file(str(hub / "model.safetensors")))
    assert "bert.embeddings.LayerNorm.gamma" in names and "bert.encoder.layer.1.output.LayerNorm.beta" in names
    other = bert.load_model(hub)
    texts = _texts()
    np.testing.assert_array_equal(bert.cls_features(other, texts)[0], bert.cls_features(model, texts)[0])
    model.tokenizer.save(str(tmp_path / "tokenizer.json"))  # a directory with tokenizer.json instead of vocab.txt
    shutil.copy(hub / "config.json", tmp_path / "config.json")
    shutil.copy(hub / "model.safetensors", tmp_path / "model.safetensors")
    only_json = bert.load_model(tmp_path)
    assert only_json.tokenizer_file == "tokenizer.json"
    assert [e.ids for e in bert.tokenize(only_json, texts)] == [e.ids for e in bert.tokenize(model, texts)]


def test_a_directory_without_a_tensor_or_with_a_wrong_shape_is_one_line(tmp_path, tiny_bert_dir):
    from safetensors.numpy import load_file, save_file

    for f in ("config.json", "vocab.txt"):
        shutil.copy(tiny_bert_dir / f, tmp_path / f)
    t = load_file(str(tiny_bert_dir / "model.safetensors"))
    save_file({k: v for k, v in t.items() if k != "encoder.layer.1.output.dense.bias"}, str(tmp_path / "model.safetensors"))
    with pytest.raises(AttnlabError, match="lacks tensor 'encoder.layer.1.output.dense.bias'"):
        bert.load_model(tmp_path)
    t["encoder.layer.0.intermediate.dense.weight"] = t["encoder.layer.0.intermediate.dense.weight"][:, :5].copy()
    save_file(t, str(tmp_path / "model.safetensors"))
    with pytest.raises(AttnlabError, match="has shape"):
        bert.load_model(tmp_path)
    (tmp_path / "vocab.txt").unlink()
    assert bert.missing_files(tmp_path) == ["vocab.txt or tokenizer.json"]


@pytest.mark.parametrize("precision, bound", [("float32", 1e3 * 2.0**-23), ("float64", 1e3 * 2.0**-52)])
def test_the_batched_forward_pass_matches_the_float64_numpy_reference(tiny_bert_dir, precision, bound):
    """Every layer's [CLS] state of sentences of different lengths, padded into one batch (and a batch size that
    leaves the last batch part empty), against the NumPy forward pass of each unpadded sentence; without the
    attention mask the padded sentences' states are wrong."""
    import jax.numpy as jnp

    from attnlab import runtime

    with runtime.x64():
        m = bert.load_model(tiny_bert_dir, jnp.float32 if precision == "float32" else jnp.float64)
        texts = _texts()
        feats, enc = bert.cls_features(m, texts, batch_size=3)
        assert feats.shape == (len(texts), 3, 32) and feats.dtype == np.dtype(precision)
        assert len({len(e.ids) for e in enc}) > 2
        ref = np.stack([bert.reference_cls_states(m, e.ids) for e in enc])
        rel = np.abs(feats - ref).max() / np.abs(ref).max()
        assert rel < bound, rel
        ids, mask = bert.pad(m, enc, max(len(e.ids) for e in enc))
        wrong = bert.run_batches(m, ids, mask, 8, use_mask=False)
        shorter = [i for i, e in enumerate(enc) if len(e.ids) < ids.shape[1]]
        assert np.abs(wrong[shorter] - ref[shorter]).max() / np.abs(ref).max() > 1e-2
        alone = bert.cls_features(m, texts[:1], batch_size=1)[0]  # no padding at all
        assert np.abs(alone[0] - feats[0]).max() / np.abs(ref).max() < bound
        assert np.all(feats[:, 0] == feats[:1, 0])  # layer 0: the same [CLS] embedding for every sentence


def test_the_numpy_reference_is_the_textbook_encoder_on_one_token(model):
    """A one-token sentence: attention is the identity map on values, so layer l is LN(a + FFN(a)) with
    a = LN(h + W_o (W_v h + b_v) + b_o), computed here by hand from the weights."""
    from scipy.special import erf

    w = {k: v.astype(np.float64) for k, v in model.weights.items()}
    ln = lambda x, p: (x - x.mean()) / np.sqrt(x.var() + 1e-12) * w[p + ".weight"] + w[p + ".bias"]  # noqa: E731
    cls = model.tokenizer.token_to_id("[CLS]")
    h = ln(w["embeddings.word_embeddings.weight"][cls] + w["embeddings.position_embeddings.weight"][0]
           + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
    states = [h]
    for i in range(2):
        p = f"encoder.layer.{i}."
        v = w[p + "attention.self.value.weight"] @ h + w[p + "attention.self.value.bias"]
        a = ln(w[p + "attention.output.dense.weight"] @ v + w[p + "attention.output.dense.bias"] + h,
               p + "attention.output.LayerNorm")
        z = w[p + "intermediate.dense.weight"] @ a + w[p + "intermediate.dense.bias"]
        f = w[p + "output.dense.weight"] @ (z * 0.5 * (1 + erf(z / math.sqrt(2)))) + w[p + "output.dense.bias"]
        h = ln(f + a, p + "output.LayerNorm")
        states.append(h)
    np.testing.assert_allclose(bert.reference_cls_states(model, [cls]), np.stack(states), rtol=0, atol=1e-12)


def test_against_transformers_bert_model_when_installed(tiny_bert_dir, model):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertModel.from_pretrained(str(tiny_bert_dir), add_pooling_layer=False).eval()
    texts = _texts()
    feats, enc = bert.cls_features(model, texts)
    for i, e in enumerate(enc):
        with torch.no_grad():
            out = hf(torch.tensor([e.ids]), output_hidden_states=True)
        theirs = np.stack([h[0, 0].numpy() for h in out.hidden_states])
        assert np.abs(theirs - feats[i]).max() < 1e-4 * np.abs(theirs).max()


def test_bert_base_uncased_is_recognised_by_its_sizes_and_vocabulary(model):
    base = bert.BertConfig(30522, 768, 12, 12, 3072)
    assert base.has_reference_sizes and not bert.BertConfig(30522, 768, 12, 12, 3072 * 2).has_reference_sizes
    assert not model.is_bert_base_uncased and model.describe() == "BERT with 2 layers, width 32, 2 heads, vocabulary 57"

    class Vocabulary:  # bert-base-uncased's ids of the reference tokens
        def token_to_id(self, token):
            return bert.REFERENCE_TOKENS.get(token, 7)

    import dataclasses

    fake = dataclasses.replace(model, config=base, tokenizer=Vocabulary())
    assert fake.is_bert_base_uncased and fake.describe() == "bert-base-uncased"
    assert not dataclasses.replace(fake, lowercase=False).is_bert_base_uncased
    assert not dataclasses.replace(model, config=base).is_bert_base_uncased  # the sizes alone are not enough
    with pytest.raises(AttnlabError, match="hidden_act"):
        bert.BertConfig.from_dict({**base.__dict__, "hidden_act": "relu"})


# --- the probes ------------------------------------------------------------------------------------------------------


def test_probes_recover_a_planted_linear_signal_and_are_at_chance_on_noise():
    """Layer 0 pure noise, layer 1 noise plus y mu with |mu| = 1: the probe's test accuracy is the Bayes accuracy
    Phi(1) = 0.841 up to its sampling error and the fitted direction's excess error (O(d/n)); layer 0 at chance."""
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    n_train, n_test, d = 4000, 4000, 8
    n = n_train + n_test
    labels = np.concatenate([rng.permutation(np.repeat([1, -1], k // 2)) for k in (n_train, n_test)])
    mu = np.zeros(d)
    mu[0] = 1.0
    feats = rng.normal(size=(n, 2, d))
    feats[:, 1] += labels[:, None] * mu
    split_of = np.array(["train"] * n_train + ["test"] * n_test)
    cfg = resolve_config(NAME, overrides={"n_probe_seeds": 2})
    correct, shuffled, not_converged = pp._probes(feats, np.arange(n), labels, split_of, cfg, seed=1)
    test = split_of == "test"
    acc = correct[..., test].mean(axis=-1)  # (seed, layer)
    bayes = norm.cdf(1.0)
    se = math.sqrt(bayes * (1 - bayes) / n_test)
    assert np.all(np.abs(acc[:, 1] - bayes) < 5 * se + 0.01), acc
    assert np.all(np.abs(acc[:, 0] - 0.5) < 5 * 0.5 / math.sqrt(n_test)), acc
    assert np.all(np.abs(shuffled[..., test].mean(axis=-1) - 0.5) < 5 * 0.5 / math.sqrt(n_test))
    assert not_converged == 0


def test_permuted_labels_keep_every_split_balanced():
    labels = np.array([1, -1] * 6)
    split_of = np.array(["train"] * 8 + ["test"] * 4)
    p = pp.permuted_labels(labels, split_of, 0, 0)
    for s in ("train", "test"):
        assert sorted(p[split_of == s]) == sorted(labels[split_of == s])
    assert not np.array_equal(p, pp.permuted_labels(labels, split_of, 0, 1))


# --- the preset -------------------------------------------------------------------------------------------------------


def test_quick_run_on_the_tiny_model(probing_quick_run):
    run = probing_quick_run
    ds = run.data
    assert run.elapsed_s < 60
    assert ds.sizes["layer"] == 3 and ds.sizes["seed"] == 4
    n = {s: int((ds.sentence_split == s).sum()) for s in tpl.SPLITS}
    assert n == {"train": 1024, "test": 1024, "ood_tokens": 1024, "ood_structure": 144, "ood_both": 96}
    test = ds.text.values[(ds.sentence_split == "test").values]
    assert list(test[:512]) == list(test[512:])  # the notebook's duplicate test_b, drawn with test_a
    for s in tpl.SPLITS:  # half of each label in every split
        assert int(ds.label.values[(ds.sentence_split == s).values].sum()) == 0
    adj = ds.adjective_token.values
    assert np.all(adj > 0) and np.all(adj < ds.n_tokens.values - 1)
    by_name = {c.name: c for c in run.checks}
    assert len(by_name) == len(run.checks) == 14
    reference = [c for c in run.checks if c.name.startswith("notebook")]
    assert len(reference) == 7
    for c in reference:
        assert c.status == "not evaluated" and c.reason.startswith("only for bert-base-uncased")
        assert "this model: BERT with 2 layers, width 32" in c.reason and "max_per_list=512" in c.reason
    for c in run.checks:
        if c not in reference:
            assert c.passed and c.control_rejected, (c.name, c.simulation, c.tolerance, c.control_error)
    m = run.metrics
    assert m["bar_initial"] == 0.5 and m["accuracy_train_layer0"] == 0.5
    assert m["best_test_accuracy"] > 0.7 and abs(m["shuffled_test_accuracy"] - 0.5) < 0.05
    assert "not the paper's weights" in run.finding and "\n" not in run.finding


def test_the_pipeline_is_deterministic_given_the_seed(tiny_bert_dir, model):
    import attnlab
    from conventions import dataset_problems

    kw = {"quick": True, "model_dir": str(tiny_bert_dir), "max_per_list": 64, "n_probe_seeds": 2}
    a, b = attnlab.run(NAME, seed=3, **kw), attnlab.run(NAME, seed=3, **kw)
    np.testing.assert_array_equal(a.data.correct.values, b.data.correct.values)
    np.testing.assert_array_equal(a.data.text.values, b.data.text.values)
    c = attnlab.run(NAME, seed=4, test_b="drop", store_features=True, **kw)
    assert not np.array_equal(a.data.text.values[:64], c.data.text.values[:64])  # another draw of the sentences
    assert int((c.data.sentence_split == "test").sum()) == 64 and "test_b" not in set(c.data.sentence_list.values)
    texts = list(c.data.text.values[:5])
    np.testing.assert_allclose(c.data.features.values[:5], bert.cls_features(model, texts)[0], rtol=0, atol=1e-5)
    assert c.data.features.shape == (c.data.sizes["sentence"], 3, 32) and not dataset_problems(c.data)


def test_the_reference_checks_are_evaluated_for_bert_base_uncased_at_the_notebooks_settings(probing_quick_run):
    """A dataset with 13 layers marked as bert-base-uncased's, whose training correctness is the notebook's
    (layer 0 one class, layer 1 0.9764, then all correct): the training-accuracy checks pass, every reference check
    is evaluated. (The layer-1 check's control, layer 2 at 1.0, lies 0.024 away: outside 5 binomial SE with the
    notebook's 15 552 training sentences, inside with the quick run's 1024.)"""
    ds = probing_quick_run.data.copy(deep=True).isel(layer=[0, 1, *([2] * 11)])
    ds = ds.assign_coords(layer=np.arange(13))
    ds.attrs.update(reference_model=True, model="bert-base-uncased")
    train = (ds.sentence_split == "train").values
    n_train = int(train.sum())
    correct = ds.correct.values.copy()
    correct[:, :, train] = 1
    correct[:, 0, train] = (ds.label.values[train] < 0)  # a constant prediction of -1
    wrong = np.flatnonzero(train)[: round((1 - pp.NOTEBOOK_TRAIN_ACCURACY[1]) * n_train)]
    correct[:, 1, wrong] = 0
    ds["correct"] = (("seed", "layer", "sentence"), correct, ds.correct.attrs)
    ds["accuracy"] = (("seed", "layer", "split"), np.stack(
        [correct[..., (ds.sentence_split == s).values].mean(-1) for s in tpl.SPLITS], -1), ds.accuracy.attrs)
    cfg = resolve_config(NAME, overrides={"model_dir": "/nowhere"})
    assert cfg.at_notebook_settings()
    _, checks = pp.summarize(ds, cfg)
    ref = {c.name: c for c in checks if c.name.startswith("notebook")}
    assert len(ref) == 7 and all(c.evaluated for c in ref.values())
    layer1 = ref["notebook: layer-1 probe's training accuracy 0.9764"]
    assert layer1.control_error == pytest.approx(1 - pp.NOTEBOOK_TRAIN_ACCURACY[1])
    assert 5 * math.sqrt(0.9764 * 0.0236 / 15552) < layer1.control_error < layer1.tolerance
    # its control (the layers' accuracy 1.0) lies within its tolerance: the check cannot tell them apart, so it is
    # inconclusive, never passed
    assert layer1.within_tolerance and not layer1.passed and layer1.status == "inconclusive"
    for name in ("notebook: training accuracy 1.0 from layer 2 on (the lowest layer's)",
                 "notebook bar 'Train set' 1.00 (layers 1-12 pooled)"):
        assert ref[name].passed and ref[name].control_rejected, ref[name]
    _, checks = pp.summarize(ds, resolve_config(NAME, quick=True, overrides={"model_dir": "/nowhere"}))
    assert all(not c.evaluated for c in checks if c.name.startswith("notebook"))  # a subsample: not the notebook's


def test_the_figure_draws_the_notebooks_values_for_bert_base(probing_quick_run):
    import matplotlib.pyplot as plt

    from conventions import figure_problems

    fig = all_presets()[NAME].plot(probing_quick_run.data, probing_quick_run.config)["panels"]
    left, right = fig.axes[:2]
    assert [t.get_text() for t in left.get_legend().get_texts()][:1] == ["notebook (bert-base-uncased)"]
    assert not any("notebook, train" in t.get_text() for t in right.get_legend().get_texts())  # 2 layers: no curve
    assert not figure_problems(fig, "panels")
    plt.close("all")


# --- without a model directory ----------------------------------------------------------------------------------------


def test_run_without_a_model_directory_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from attnlab.app.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["run", NAME, "--quick"]) == 2
    line = one_error_line(capsys)
    assert "download bert-base-uncased elsewhere" in line and "--set model_dir=PATH" in line
    assert main(["run", NAME, "--set", f"model_dir={tmp_path / 'nope'}"]) == 2
    assert "does not exist" in one_error_line(capsys)
    (tmp_path / "empty").mkdir()
    assert main(["run", NAME, "--set", f"model_dir={tmp_path / 'empty'}"]) == 2
    assert "lacks config.json, model.safetensors, vocab.txt or tokenizer.json" in one_error_line(capsys)
    assert main(["sweep", NAME, "--quick", "--grid", "C=0.5,1"]) == 2
    assert "--set model_dir=PATH" in one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # nothing written
    import attnlab

    with pytest.raises(AttnlabError, match="model_dir=PATH"):
        attnlab.run(NAME, quick=True)


def test_without_the_probing_extra_the_line_says_how_to_install_it(tmp_path, monkeypatch, capsys, tiny_bert_dir):
    import importlib.util

    from attnlab.app.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a))
    monkeypatch.chdir(tmp_path)
    assert main(["run", NAME, "--quick", "--set", f"model_dir={tiny_bert_dir}"]) == 2
    line = one_error_line(capsys)
    assert "scikit-learn" in line and "pip install 'attnlab[probing]'" in line


def test_reproduce_reports_the_preset_as_skipped_not_run(tmp_path, monkeypatch, capsys):
    """Reproduce (make demo) with no model directory: the preset is skipped with its reason, written as such in the
    report, and neither run nor counted among the checks; the exit status is that of the other presets (none)."""
    from attnlab import registry
    from attnlab.app.cli import main

    only = {NAME: all_presets()[NAME]}
    monkeypatch.setattr(registry, "all_presets", lambda: only)
    out = tmp_path / "results"
    assert main(["reproduce", "marion", "--quick", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    err, out_text = " ".join(captured.err.split()), " ".join(captured.out.split())
    assert f"{NAME}: skipped, not run (needs a local BERT model directory" in err and "Traceback" not in err
    assert "0/0 checks passed" in out_text and "0 presets failed, 1 skipped (not run)" in out_text
    report = (out / "report.md").read_text()
    assert "**SKIPPED** (not run): needs a local BERT model directory" in report
    assert "0 of 0 checks passed" in report and "1 skipped (not run)." in report
    assert "SKIPPED" in (out / "report.html").read_text()
    assert not (out / NAME).exists()


def test_memory_estimate_of_bert_base_fits_a_laptop(tiny_bert_dir):
    from attnlab.app.resources import estimate

    p = all_presets()[NAME]
    full = estimate(p, resolve_config(p))
    assert 1 * 2**30 < full < 8 * 2**30
    tiny = estimate(p, resolve_config(p, quick=True, overrides={"model_dir": str(tiny_bert_dir)}))
    assert 0 < tiny < full / 10
