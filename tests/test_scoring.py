"""Tree checks used by the scorer, on hand-made heads and on spaCy Docs."""

import numpy as np
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_pairatt.scoring import score_parse, sentence_is_one_tree, single_tree_rate


def test_sentence_is_one_tree_on_absolute_heads():
    #         0  1  2  3  4  5
    heads = np.array([1, 1, 1, 4, 4, 4])  # two sentences [0, 3) and [3, 6), each rooted once
    assert sentence_is_one_tree(heads, 0, 3)
    assert sentence_is_one_tree(heads, 3, 6)
    assert not sentence_is_one_tree(heads, 0, 6)  # two roots
    two_roots = np.array([0, 1, 1])
    assert not sentence_is_one_tree(two_roots, 0, 3)
    leaves_sentence = np.array([1, 1, 4, 4, 4])  # token 2 is headed from outside [0, 3)
    assert not sentence_is_one_tree(leaves_sentence, 0, 3)


def make_doc(vocab, words, heads, deps):
    return Doc(vocab, words=words, heads=heads, deps=deps)


def test_single_tree_rate_and_punctuation_scores():
    vocab = spacy.blank("en").vocab
    words = ["Dogs", "bark", ".", "Cats", "sleep", "."]
    gold = make_doc(vocab, words, [1, 1, 1, 4, 4, 4], ["nsubj", "ROOT", "punct", "nsubj", "ROOT", "punct"])
    # prediction: first sentence right; in the second, "Cats" is a second root and "." attaches wrongly
    pred = make_doc(vocab, words, [1, 1, 1, 3, 4, 3], ["nsubj", "ROOT", "punct", "ROOT", "ROOT", "punct"])
    example = Example(pred, gold)
    assert single_tree_rate([example]) == 0.5
    scores = score_parse([example])
    # without punctuation: 4 arcs, "Cats" wrong -> 3/4; with punctuation: 6 arcs, 2 wrong -> 4/6
    assert abs(scores["dep_uas"] - 0.75) < 1e-9
    assert abs(scores["dep_uas_punct"] - 4 / 6) < 1e-9
    assert scores["dep_single_tree"] == 0.5
