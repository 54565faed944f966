r"""A BERT encoder in JAX, read from a Hugging Face model directory, for the [CLS] features of the probing experiment
of Marion, Berthier, Biau, Boyer (ICLR 2025), Section 2 (the bare ``bert-base-uncased`` encoder, no head, in
evaluation mode: dropout off).

**Model directory.** ``config.json`` (``vocab_size``, ``hidden_size``, ``num_hidden_layers``,
``num_attention_heads``, ``intermediate_size``, ``max_position_embeddings``, ``type_vocab_size``,
``layer_norm_eps``, ``hidden_act = "gelu"``), ``model.safetensors`` with the standard BERT tensor names
(``embeddings.word_embeddings.weight``, ``encoder.layer.{l}.attention.self.query.weight``, ...; the ``bert.``
prefix and the legacy LayerNorm names ``gamma``/``beta`` of the published checkpoint are accepted), and ``vocab.txt``
(WordPiece, read by the ``tokenizers`` library's BertWordPieceTokenizer, lower-cased unless ``tokenizer_config.json``
says ``do_lower_case: false``) or ``tokenizer.json``. Nothing is downloaded.

**Forward pass** (post-LN BERT; token ids ``w_1..w_T`` with ``w_1 = [CLS]``, segment 0, attention mask ``m``):

.. math::

    h^{(0)}_t = \mathrm{LN}(E_{w_t} + P_t + S_0), \qquad
    a = \mathrm{LN}\big(h + \mathrm{MHA}(h; m)\big), \qquad
    h^{(\ell)} = \mathrm{LN}\big(a + W_2\,\mathrm{GELU}(W_1 a + b_1) + b_2\big),

with ``MHA`` the multi-head self-attention (``n_h`` heads of width ``d_h = d / n_h``; scores
``q_t . k_s / sqrt(d_h)`` plus ``min float`` where ``m_s = 0``, softmax over ``s``, then the output projection),
``GELU(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2`` (the erf form, as BERT) and ``LN`` the LayerNorm of
``layer_norm_eps``. The feature of layer ``l = 0..L`` is ``h^{(l)}_1``, the [CLS] state. Products are computed at
full precision (``Precision.HIGHEST``: no reduced-precision passes on accelerators).

:func:`cls_features` pads every sentence to one length and runs fixed-size batches through one compiled program
(``lax.scan`` over the stacked layers): one compilation per model whatever the number of sentences. The mask makes
padding invisible to the real tokens, so a padded batch gives each sentence's unpadded states up to round-off;
:func:`reference_cls_states` is the float64 NumPy forward pass of one unpadded sentence that checks it.
:func:`write_random_model` writes a randomly initialised BERT in the same layout (the tests' small model).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.errors import AttnlabError

__all__ = ["BertConfig", "BertModel", "REFERENCE_SIZES", "missing_files", "load_model", "cls_features", "cls_states",
           "tokenize", "reference_cls_states", "write_random_model", "tensor_names"]

REFERENCE_SIZES = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                   "intermediate_size": 3072}
"""The sizes of bert-base-uncased."""

REFERENCE_TOKENS = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103, "the": 1996}
"""Token ids of bert-base-uncased's vocabulary: a directory with its sizes and these ids is taken to hold its
weights (:attr:`BertModel.is_bert_base_uncased`)."""

_LAYER_TENSORS = {
    "q_w": "attention.self.query.weight", "q_b": "attention.self.query.bias",
    "k_w": "attention.self.key.weight", "k_b": "attention.self.key.bias",
    "v_w": "attention.self.value.weight", "v_b": "attention.self.value.bias",
    "o_w": "attention.output.dense.weight", "o_b": "attention.output.dense.bias",
    "ln1_g": "attention.output.LayerNorm.weight", "ln1_b": "attention.output.LayerNorm.bias",
    "i_w": "intermediate.dense.weight", "i_b": "intermediate.dense.bias",
    "f_w": "output.dense.weight", "f_b": "output.dense.bias",
    "ln2_g": "output.LayerNorm.weight", "ln2_b": "output.LayerNorm.bias",
}
_EMBEDDING_TENSORS = {"word": "embeddings.word_embeddings.weight", "position": "embeddings.position_embeddings.weight",
                      "type": "embeddings.token_type_embeddings.weight", "ln_g": "embeddings.LayerNorm.weight",
                      "ln_b": "embeddings.LayerNorm.bias"}


@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT encoder, as its ``config.json`` gives them."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BertConfig:
        try:
            cfg = cls(**{k: d[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                           "intermediate_size")},
                      **{k: d[k] for k in ("max_position_embeddings", "type_vocab_size", "layer_norm_eps",
                                           "hidden_act") if k in d})
        except KeyError as e:
            raise AttnlabError(f"config.json lacks {e.args[0]!r}: not a BERT config") from None
        if cfg.hidden_act != "gelu":
            raise AttnlabError(f"config.json: hidden_act {cfg.hidden_act!r} is not BERT's erf GELU ('gelu')")
        if cfg.hidden_size % cfg.num_attention_heads:
            raise AttnlabError(f"config.json: hidden_size {cfg.hidden_size} is not a multiple of "
                               f"num_attention_heads {cfg.num_attention_heads}")
        return cfg

    @property
    def has_reference_sizes(self) -> bool:
        """Whether the sizes are bert-base-uncased's (:data:`REFERENCE_SIZES`)."""
        return all(getattr(self, k) == v for k, v in REFERENCE_SIZES.items())

    def describe(self) -> str:
        return (f"BERT with {self.num_hidden_layers} layers, width {self.hidden_size}, "
                f"{self.num_attention_heads} heads, vocabulary {self.vocab_size}")


def tensor_names(cfg: BertConfig) -> list[str]:
    """The tensor names (without the ``bert.`` prefix) that the encoder reads from ``model.safetensors``."""
    return [*_EMBEDDING_TENSORS.values(),
            *(f"encoder.layer.{i}.{t}" for i in range(cfg.num_hidden_layers) for t in _LAYER_TENSORS.values())]


def missing_files(model_dir: str | Path) -> list[str]:
    """The files a model directory lacks (``config.json``, ``model.safetensors``, ``vocab.txt`` or
    ``tokenizer.json``); empty when it has them all."""
    d = Path(model_dir).expanduser()
    missing = [f for f in ("config.json", "model.safetensors") if not (d / f).is_file()]
    if not (d / "vocab.txt").is_file() and not (d / "tokenizer.json").is_file():
        missing.append("vocab.txt or tokenizer.json")
    return missing


@dataclass
class BertModel:
    """A loaded encoder: its config, the weights (``weights``: NumPy, float32 as stored, names normalised; ``params``:
    the stacked JAX arrays in ``dtype``), the tokenizer and the directory's fingerprint (SHA-256 of its config,
    vocabulary and weight files)."""

    config: BertConfig
    weights: dict[str, np.ndarray]
    params: dict[str, Any]
    tokenizer: Any
    pad_id: int
    dtype: Any
    model_dir: str
    fingerprint: str
    tokenizer_file: str
    lowercase: bool

    @property
    def is_bert_base_uncased(self) -> bool:
        """Whether this is bert-base-uncased: its sizes (:data:`REFERENCE_SIZES`), a lower-casing tokenizer and its
        vocabulary's ids of a few tokens (:data:`REFERENCE_TOKENS`). A fine-tuned copy passes too; random weights in
        another vocabulary do not."""
        return (self.config.has_reference_sizes and self.lowercase
                and all(self.tokenizer.token_to_id(t) == i for t, i in REFERENCE_TOKENS.items()))

    def describe(self) -> str:
        if self.is_bert_base_uncased:
            return "bert-base-uncased"
        return self.config.describe()


def _normalise(name: str) -> str:
    name = name.removeprefix("bert.")
    if ".LayerNorm." in name:
        name = name.replace(".LayerNorm.gamma", ".LayerNorm.weight").replace(".LayerNorm.beta", ".LayerNorm.bias")
    return name


def _fingerprint(d: Path) -> str:
    h = hashlib.sha256()
    for name in ("config.json", "vocab.txt", "tokenizer.json", "model.safetensors"):
        path = d / name
        if path.is_file():
            h.update(name.encode())
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    h.update(block)
    return h.hexdigest()[:16]


def _load_tokenizer(d: Path):
    lowercase = True
    tc = d / "tokenizer_config.json"
    if tc.is_file():
        try:
            lowercase = bool(json.loads(tc.read_text()).get("do_lower_case", True))
        except (OSError, json.JSONDecodeError):
            pass
    if (d / "vocab.txt").is_file():
        from tokenizers import BertWordPieceTokenizer

        return BertWordPieceTokenizer(str(d / "vocab.txt"), lowercase=lowercase), "vocab.txt", lowercase
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(d / "tokenizer.json")), "tokenizer.json", lowercase


def load_model(model_dir: str | Path, dtype=jnp.float32) -> BertModel:
    """Read the encoder in ``model_dir`` (see the module docstring); one-line :class:`AttnlabError` on a missing
    file, tensor or a shape that does not match ``config.json``."""
    from safetensors.numpy import load_file

    d = Path(model_dir).expanduser()
    missing = missing_files(d)
    if missing:
        raise AttnlabError(f"model directory {d} lacks {', '.join(missing)}")
    try:
        cfg = BertConfig.from_dict(json.loads((d / "config.json").read_text()))
    except (OSError, json.JSONDecodeError) as e:
        raise AttnlabError(f"cannot read {d / 'config.json'}: {e}") from None
    try:
        raw = load_file(str(d / "model.safetensors"))
    except Exception as e:  # a truncated or foreign file: safetensors raises its own errors
        raise AttnlabError(f"cannot read {d / 'model.safetensors'}: {' '.join(str(e).split())}") from None
    weights = {_normalise(k): v for k, v in raw.items()}
    H, I = cfg.hidden_size, cfg.intermediate_size
    shapes = {"embeddings.word_embeddings.weight": (cfg.vocab_size, H),
              "embeddings.position_embeddings.weight": (cfg.max_position_embeddings, H),
              "embeddings.token_type_embeddings.weight": (cfg.type_vocab_size, H)}
    per_layer = {"q_w": (H, H), "k_w": (H, H), "v_w": (H, H), "o_w": (H, H), "i_w": (I, H), "f_w": (H, I),
                 "i_b": (I,)}
    for name in tensor_names(cfg):
        if name not in weights:
            raise AttnlabError(f"{d / 'model.safetensors'} lacks tensor {name!r}: not a BERT encoder checkpoint")
        key = next((k for k, t in _LAYER_TENSORS.items() if name.endswith("." + t)), None)
        want = shapes.get(name) or per_layer.get(key, (H,))
        if tuple(weights[name].shape) != want:
            raise AttnlabError(f"tensor {name!r} has shape {tuple(weights[name].shape)}, config.json implies {want}")
    weights = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items() if k in set(tensor_names(cfg))}
    tokenizer, tok_file, lowercase = _load_tokenizer(d)
    pad_id = tokenizer.token_to_id("[PAD]")
    if tokenizer.token_to_id("[CLS]") is None or tokenizer.token_to_id("[SEP]") is None:
        raise AttnlabError(f"the vocabulary in {d} has no [CLS] or [SEP] token")
    params = _stack(weights, cfg, dtype)
    return BertModel(cfg, weights, params, tokenizer, 0 if pad_id is None else int(pad_id), dtype, str(d),
                     _fingerprint(d), tok_file, lowercase)


def _stack(w: dict[str, np.ndarray], cfg: BertConfig, dtype) -> dict[str, Any]:
    """The JAX parameters: embeddings, and each layer tensor stacked over layers, matrices transposed to act on the
    right (``x @ W``)."""
    emb = {k: jnp.asarray(w[n], dtype=dtype) for k, n in _EMBEDDING_TENSORS.items()}
    layers = {}
    for k, t in _LAYER_TENSORS.items():
        stack = np.stack([w[f"encoder.layer.{i}.{t}"] for i in range(cfg.num_hidden_layers)])
        layers[k] = jnp.asarray(np.swapaxes(stack, 1, 2) if k.endswith("_w") else stack, dtype=dtype)
    return {**emb, "layers": layers}


def tokenize(model: BertModel, texts: list[str]) -> list[Any]:
    """The tokenizer's encodings of ``texts`` ([CLS] ... [SEP], no padding, no truncation): ``.ids``, ``.offsets``."""
    encodings = model.tokenizer.encode_batch(list(texts))
    longest = max(len(e.ids) for e in encodings)
    if longest > model.config.max_position_embeddings:
        raise AttnlabError(f"a sentence has {longest} tokens, more than the model's {model.config.max_position_embeddings} "
                           "positions")
    return encodings


_HIGHEST = jax.lax.Precision.HIGHEST  # full float32 products on accelerators too (no TF32 or bfloat16 passes)


def _mm(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


def _layer_norm(x, g, b, eps):
    mu = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * g + b


@partial(jax.jit, static_argnames=("n_heads", "eps", "use_mask"))
def cls_states(params, ids, mask, *, n_heads: int, eps: float, use_mask: bool = True):
    """The [CLS] state of every layer, shape (batch, L + 1, d), of the padded batch ``ids`` (batch, T) with attention
    mask ``mask`` (1 on real tokens). ``use_mask=False`` lets every token attend to the padding (a deliberately wrong
    model: the forward-pass check's control)."""
    dtype = params["word"].dtype
    B, T = ids.shape
    x = params["word"][ids] + params["position"][:T][None] + params["type"][0][None, None]
    x = _layer_norm(x, params["ln_g"], params["ln_b"], eps)
    d = x.shape[-1]
    dh = d // n_heads
    bias = jnp.where(mask[:, None, None, :] > 0, 0.0, jnp.finfo(dtype).min).astype(dtype) if use_mask else 0.0
    scale = jnp.asarray(1.0 / math.sqrt(dh), dtype)

    def layer(h, p):
        split = lambda z: z.reshape(B, T, n_heads, dh)  # noqa: E731
        q, k, v = (split(_mm(h, p[f"{c}_w"]) + p[f"{c}_b"]) for c in "qkv")
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k, precision=_HIGHEST) * scale + bias
        att = jax.nn.softmax(scores, axis=-1)
        ctx = jnp.einsum("bhqk,bkhd->bqhd", att, v, precision=_HIGHEST).reshape(B, T, d)
        a = _layer_norm(_mm(ctx, p["o_w"]) + p["o_b"] + h, p["ln1_g"], p["ln1_b"], eps)
        f = _mm(jax.nn.gelu(_mm(a, p["i_w"]) + p["i_b"], approximate=False), p["f_w"]) + p["f_b"]
        out = _layer_norm(f + a, p["ln2_g"], p["ln2_b"], eps)
        return out, out[:, 0]

    _, cls = jax.lax.scan(layer, x, params["layers"])
    return jnp.concatenate([x[:, None, 0], jnp.swapaxes(cls, 0, 1)], axis=1)


def pad(model: BertModel, encodings, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (padded with [PAD]) and attention masks, shape (n, ``length``)."""
    ids = np.full((len(encodings), length), model.pad_id, dtype=np.int32)
    mask = np.zeros((len(encodings), length), dtype=np.int32)
    for i, e in enumerate(encodings):
        ids[i, : len(e.ids)] = e.ids
        mask[i, : len(e.ids)] = 1
    return ids, mask


def run_batches(model: BertModel, ids: np.ndarray, mask: np.ndarray, batch_size: int, *, use_mask: bool = True,
                progress=None) -> np.ndarray:
    """:func:`cls_states` over ``ids`` in batches of ``batch_size`` rows (the last one padded with empty rows), so
    that every call has one shape; returns (n, L + 1, d) as NumPy."""
    n = ids.shape[0]
    out = np.empty((n, model.config.num_hidden_layers + 1, model.config.hidden_size), dtype=np.dtype(model.dtype))
    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        bi = np.full((batch_size, ids.shape[1]), model.pad_id, dtype=np.int32)
        bm = np.zeros((batch_size, ids.shape[1]), dtype=np.int32)
        bm[:, 0] = 1  # empty rows attend to their first position only (no row is all masked)
        bi[: stop - start], bm[: stop - start] = ids[start:stop], mask[start:stop]
        res = cls_states(model.params, jnp.asarray(bi), jnp.asarray(bm), n_heads=model.config.num_attention_heads,
                         eps=float(model.config.layer_norm_eps), use_mask=use_mask)
        out[start:stop] = np.asarray(res)[: stop - start]
        if progress is not None:
            progress(stop, n)
    return out


def cls_features(model: BertModel, texts: list[str], batch_size: int = 128, progress=None):
    """The [CLS] state of every layer (embedding output, then layers 1..L) of each sentence: (n, L + 1, d), and the
    encodings. Sentences are tokenised with [CLS] and [SEP], padded to the longest and run in batches."""
    enc = tokenize(model, texts)
    ids, mask = pad(model, enc, max(len(e.ids) for e in enc))
    return run_batches(model, ids, mask, batch_size, progress=progress), enc


def reference_cls_states(model: BertModel, ids) -> np.ndarray:
    """The [CLS] state of every layer of one unpadded sentence (token ids with [CLS] and [SEP]), computed in float64
    NumPy from the stored weights, one layer after the other: (L + 1, d). The reference of the batched JAX pass."""
    from scipy.special import erf

    w = {k: np.asarray(v, dtype=np.float64) for k, v in model.weights.items()}
    cfg = model.config
    eps = float(cfg.layer_norm_eps)

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def dense(x, name):
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    ids = np.asarray(ids)
    T = ids.size
    e = "embeddings"
    h = ln(w[f"{e}.word_embeddings.weight"][ids] + w[f"{e}.position_embeddings.weight"][:T]
           + w[f"{e}.token_type_embeddings.weight"][0], f"{e}.LayerNorm")
    out = [h[0]]
    nh = cfg.num_attention_heads
    dh = cfg.hidden_size // nh
    for i in range(cfg.num_hidden_layers):
        p = f"encoder.layer.{i}."
        q, k, v = (dense(h, p + f"attention.self.{c}").reshape(T, nh, dh).transpose(1, 0, 2)
                   for c in ("query", "key", "value"))
        s = q @ k.transpose(0, 2, 1) / math.sqrt(dh)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = (s / s.sum(-1, keepdims=True) @ v).transpose(1, 0, 2).reshape(T, cfg.hidden_size)
        a = ln(dense(ctx, p + "attention.output.dense") + h, p + "attention.output.LayerNorm")
        z = dense(a, p + "intermediate.dense")
        h = ln(dense(0.5 * z * (1.0 + erf(z / math.sqrt(2.0))), p + "output.dense") + a, p + "output.LayerNorm")
        out.append(h[0])
    return np.stack(out)


def write_random_model(path: str | Path, words, *, hidden: int = 32, layers: int = 2, heads: int = 2,
                       intermediate: int = 64, max_position: int = 64, std: float = 0.1, seed: int = 0,
                       hub_names: bool = False) -> Path:
    """Write a randomly initialised BERT encoder in the Hugging Face layout into ``path``: ``config.json``,
    ``vocab.txt`` ([PAD], [UNK], [CLS], [SEP], [MASK], then ``words``), ``tokenizer_config.json`` and
    ``model.safetensors`` (every matrix and embedding N(0, std^2), biases N(0, (std/4)^2), LayerNorm gains
    1 + N(0, (std/4)^2) and biases N(0, (std/4)^2), plus a pooler that the encoder ignores). ``hub_names`` writes the
    published bert-base-uncased checkpoint's names (``bert.`` prefix, LayerNorm ``gamma``/``beta``)."""
    from safetensors.numpy import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[w for w in words if not w.startswith("[")]]
    cfg = BertConfig(len(vocab), hidden, layers, heads, intermediate, max_position)
    rng = np.random.default_rng(seed)
    small = std / 4
    t: dict[str, np.ndarray] = {}

    def put(name, shape, kind):
        if kind == "w":
            x = rng.normal(0.0, std, shape)
        elif kind == "g":
            x = 1.0 + rng.normal(0.0, small, shape)
        else:
            x = rng.normal(0.0, small, shape)
        t[name] = x.astype(np.float32)

    put("embeddings.word_embeddings.weight", (cfg.vocab_size, hidden), "w")
    put("embeddings.position_embeddings.weight", (max_position, hidden), "w")
    put("embeddings.token_type_embeddings.weight", (2, hidden), "w")
    put("embeddings.LayerNorm.weight", (hidden,), "g")
    put("embeddings.LayerNorm.bias", (hidden,), "b")
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for c in ("query", "key", "value"):
            put(p + f"attention.self.{c}.weight", (hidden, hidden), "w")
            put(p + f"attention.self.{c}.bias", (hidden,), "b")
        put(p + "attention.output.dense.weight", (hidden, hidden), "w")
        put(p + "attention.output.dense.bias", (hidden,), "b")
        put(p + "attention.output.LayerNorm.weight", (hidden,), "g")
        put(p + "attention.output.LayerNorm.bias", (hidden,), "b")
        put(p + "intermediate.dense.weight", (intermediate, hidden), "w")
        put(p + "intermediate.dense.bias", (intermediate,), "b")
        put(p + "output.dense.weight", (hidden, intermediate), "w")
        put(p + "output.dense.bias", (hidden,), "b")
        put(p + "output.LayerNorm.weight", (hidden,), "g")
        put(p + "output.LayerNorm.bias", (hidden,), "b")
    put("pooler.dense.weight", (hidden, hidden), "w")
    put("pooler.dense.bias", (hidden,), "b")
    if hub_names:
        t = {"bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
             for k, v in t.items()}
    save_file(t, str(path / "model.safetensors"))
    config = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": cfg.vocab_size,
              "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": intermediate, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "max_position_embeddings": max_position, "type_vocab_size": 2,
              "initializer_range": std, "layer_norm_eps": 1e-12, "pad_token_id": 0,
              "position_embedding_type": "absolute"}
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    (path / "config.json").write_text(json.dumps(config, indent=2))  # last: a directory with it is complete
    return path
