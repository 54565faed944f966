r"""The template sentences of the linear-probing experiment of Marion, Berthier, Biau, Boyer (ICLR 2025), Section 2:
sentences whose label is carried by one sentiment adjective at a varying position, in training lists, held-out lists
with new fillers, and out-of-distribution (OOD) lists with new adjectives and new sentence frames.

**Grammar.** A sentence takes one option from each slot of its list, in the list's order, and joins them with single
spaces; an empty option (written ``""`` here, the spec's empty word) omits the word: the double spaces it leaves are
collapsed once and the ends trimmed. Each option carries a sign in {+1, -1}; the label is the product of the signs.
Only sentiment adjectives carry -1, so the label is the adjective's polarity. The first clause "The city is nice." (or
dreadful., clean., dirty.) is a sentiment distractor with sign +1.

**Lists** (slot order; size):

=======  ===========================================================  ======
list     slots                                                        size
=======  ===========================================================  ======
train_a  CITY CS PRON COL ANIM VERB ADV ADJ6 (predicative, last word)  5184
train_b  CITY CS PRON COL ADJ6 ANIM VERB ADV SIZE (attributive)       10368
test_a   CITY CS PRON' COL' ADJ6 ANIM' VERB ADV' SIZE' (attributive)   2304
test_b   identical to test_a (the notebook's "another order" is not)   2304
test_c   CITY CS GREET PRON' SIZE' COL' ANIM' VERB ADV' ADJ4            1536
test_d   CITY CS GREET PRON' ADJ4 COL' ANIM' VERB ADV' SIZE'            1536
test_e   Q GREET PRON' COL' ANIM' VERB ADV' ADJ6                         144
test_f   Q GREET PRON' COL' ANIM' VERB ADV' ADJ4                          96
=======  ===========================================================  ======

**Splits** (:data:`SPLITS`): train = train_a + train_b (15 552); test = test_a + test_b (4608, two copies of the
same 2304: the notebook's duplicate, or 2304 with ``test_b="drop"``); OOD tokens = test_c + test_d (3072); OOD
structure = test_e (144); OOD structure + tokens = test_f (96). Every list is exactly balanced. Sentences come in the
cartesian product's order, the last slot varying fastest.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["ADJ6", "ADJ4", "LISTS", "SPLITS", "SPLIT_NAMES", "SPLIT_SIZES", "LIST_SIZES", "SPEC_SENTENCES",
           "Sentence", "sentences", "split_lists", "split_sentences", "template_words", "join_words"]

Option = tuple[str, int]
Slot = tuple[Option, ...]


def _plus(*words: str) -> Slot:
    return tuple((w, +1) for w in words)


ADJ6: Slot = (("nice", +1), ("mean", -1), ("cute", +1), ("dreadful", -1), ("aggressive", -1), ("delightful", +1))
"""The sentiment adjectives of the training and in-distribution test lists, with their polarity."""
ADJ4: Slot = (("lovely", +1), ("nasty", -1), ("charming", +1), ("foul", -1))
"""The new sentiment adjectives of the OOD-token lists."""

CITY = _plus("The city is")
CS = _plus("nice.", "dreadful.", "clean.", "dirty.")
VERB = _plus("is")
GREET = _plus("Good evening,")
Q = _plus("Hello, how are you?")
PRON = _plus("my", "his", "her", "our")
COL = _plus("", "blue", "orange", "beige", "green", "red")
ANIM = _plus("dog", "owl", "cow")
ADV = _plus("", "very", "extremely")
SIZE = _plus("tiny", "giant")
PRON_T = _plus("their", "your")
COL_T = _plus("purple", "gray")
ANIM_T = _plus("cat", "eagle", "goat")
ADV_T = _plus("", "especially")
SIZE_T = _plus("big", "little", "mini", "enormous")

_ADJECTIVE_SLOTS = (ADJ6, ADJ4)

LISTS: dict[str, tuple[Slot, ...]] = {
    "train_a": (CITY, CS, PRON, COL, ANIM, VERB, ADV, ADJ6),
    "train_b": (CITY, CS, PRON, COL, ADJ6, ANIM, VERB, ADV, SIZE),
    "test_a": (CITY, CS, PRON_T, COL_T, ADJ6, ANIM_T, VERB, ADV_T, SIZE_T),
    "test_b": (CITY, CS, PRON_T, COL_T, ADJ6, ANIM_T, VERB, ADV_T, SIZE_T),  # the notebook's copy of test_a
    "test_c": (CITY, CS, GREET, PRON_T, SIZE_T, COL_T, ANIM_T, VERB, ADV_T, ADJ4),
    "test_d": (CITY, CS, GREET, PRON_T, ADJ4, COL_T, ANIM_T, VERB, ADV_T, SIZE_T),
    "test_e": (Q, GREET, PRON_T, COL_T, ANIM_T, VERB, ADV_T, ADJ6),
    "test_f": (Q, GREET, PRON_T, COL_T, ANIM_T, VERB, ADV_T, ADJ4),
}
"""The eight lists of the notebook, each its slots in order."""

LIST_SIZES = {"train_a": 5184, "train_b": 10368, "test_a": 2304, "test_b": 2304, "test_c": 1536, "test_d": 1536,
              "test_e": 144, "test_f": 96}
"""The spec's size of each list."""

SPLITS: dict[str, tuple[str, ...]] = {
    "train": ("train_a", "train_b"),
    "test": ("test_a", "test_b"),
    "ood_tokens": ("test_c", "test_d"),
    "ood_structure": ("test_e",),
    "ood_both": ("test_f",),
}
"""The five splits and their lists."""

SPLIT_NAMES = {"train": "Train set", "test": "Test set", "ood_tokens": "Test OOD tokens",
               "ood_structure": "Test OOD structure", "ood_both": "Test OOD structure + tokens"}
"""The notebook's name of each split."""

SPLIT_SIZES = {"train": 15552, "test": 4608, "ood_tokens": 3072, "ood_structure": 144, "ood_both": 96}
"""The spec's size of each split (the test split holds test_a twice)."""

SPEC_SENTENCES = {
    ("train_a", 0): "The city is nice. my dog is nice",
    ("train_a", -1): "The city is dirty. our red cow is extremely delightful",
    ("train_b", 0): "The city is nice. my nice dog is tiny",
    ("test_c", 0): "The city is nice. Good evening, their big purple cat is lovely",
    ("test_e", 0): "Hello, how are you? Good evening, their purple cat is nice",
}
"""The first and last sentences the spec quotes, by (list, index)."""


@dataclass(frozen=True)
class Sentence:
    """One template sentence: its text, label (the product of its options' signs), the adjective, the adjective's
    word index (whitespace words) and character offset in ``text``."""

    text: str
    label: int
    adjective: str
    adjective_word: int
    adjective_char: int


def join_words(words, collapse: bool = True) -> str:
    """The notebook's join: single spaces, then double spaces (left by empty options) collapsed once, ends trimmed.
    ``collapse=False`` skips the collapse (the generator check's negative control)."""
    text = " ".join(words)
    return (text.replace("  ", " ") if collapse else text).strip()


def sentences(name: str, collapse: bool = True) -> list[Sentence]:
    """Every sentence of list ``name`` (:data:`LISTS`), in the cartesian product's order (last slot fastest)."""
    slots = LISTS[name]
    adj_slot = next(i for i, s in enumerate(slots) if s in _ADJECTIVE_SLOTS)
    out = []
    for combo in itertools.product(*slots):
        words = [w for w, _ in combo]
        label = int(np.prod([s for _, s in combo]))
        text = join_words(words, collapse)
        before = " ".join(w for w in words[:adj_slot] if w)
        adjective = words[adj_slot]
        char = len(before) + 1 if before else 0
        out.append(Sentence(text, label, adjective, len(before.split()), char))
    return out


def split_lists(test_b: Literal["duplicate", "drop"] = "duplicate") -> dict[str, tuple[str, ...]]:
    """The lists of each split; ``test_b="drop"`` leaves the duplicate test_b out of the test split."""
    return {k: tuple(v for v in lists if not (v == "test_b" and test_b == "drop")) for k, lists in SPLITS.items()}


def split_sentences(test_b: Literal["duplicate", "drop"] = "duplicate") -> dict[str, list[tuple[str, Sentence]]]:
    """``{split: [(list, sentence), ...]}`` in the order of :data:`SPLITS`."""
    return {split: [(name, s) for name in lists for s in sentences(name)]
            for split, lists in split_lists(test_b).items()}


def template_words() -> list[str]:
    """The lowercase words and punctuation marks of every template sentence (what a BERT pre-tokenizer splits them
    into), sorted: the vocabulary a small test model needs."""
    words = set()
    for slots in LISTS.values():
        for slot in slots:
            for option, _ in slot:
                words.update(re.findall(r"\w+|[^\w\s]", option.lower()))
    return sorted(words)
