"""Tree checks used by the scorer, on hand-made heads and on spaCy Docs."""

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_pairatt.integration.scoring import arc_counts, score_parse, sentence_is_one_tree, single_tree_rate


def f_score(correct, predicted, gold):
    """spaCy's dep_uas / dep_las from summed arc counts: the counts' reading that evaluate --arcs promises."""
    return 2 * correct / (predicted + gold)


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


def test_arc_counts_sum_to_spacys_scores():
    vocab = spacy.blank("en").vocab
    words = ["Dogs", "bark", "loudly", ".", "Cats", "sleep", "."]
    gold_heads, pred_heads = [1, 1, 1, 1, 5, 5, 5], [1, 1, 0, 1, 5, 5, 4]
    gold_deps = ["nsubj", "ROOT", "advmod", "punct", "nsubj", "ROOT", "punct"]
    # "loudly": wrong head and labelled punct (so not a predicted arc); "Cats": right head, wrong label
    pred_deps = ["nsubj", "ROOT", "punct", "punct", "obj", "root", "punct"]
    examples = [
        Example(
            make_doc(vocab, words[:4], pred_heads[:4], pred_deps[:4]),
            make_doc(vocab, words[:4], gold_heads[:4], gold_deps[:4]),
        ),
        Example(
            make_doc(vocab, words[4:], [h - 4 for h in pred_heads[4:]], pred_deps[4:]),
            make_doc(vocab, words[4:], [h - 4 for h in gold_heads[4:]], gold_deps[4:]),
        ),
    ]
    counts = arc_counts(examples)
    expected = {"uas_correct": [2, 2], "uas_predicted": [2, 2], "las_correct": [2, 1], "las_predicted": [2, 2]}
    assert counts == {**expected, "gold": [3, 2]}
    scores = score_parse(examples)
    totals = {name: np.sum(values) for name, values in counts.items()}
    for metric in ("uas", "las"):
        f = f_score(totals[f"{metric}_correct"], totals[f"{metric}_predicted"], totals["gold"])
        assert f == pytest.approx(scores[f"dep_{metric}"])


def test_arc_counts_follow_the_alignment_when_tokenizations_differ():
    nlp = spacy.blank("en")
    gold = make_doc(nlp.vocab, ["Don't", "go", "home"], [1, 1, 1], ["aux", "ROOT", "obj"])
    pred = nlp("Don't go home")  # "Do" and "n't": each aligns one-to-one, to the gold word "Don't"
    for token, head in zip(pred, [2, 2, 2, 2]):
        token.head = pred[head]
    for token, dep in zip(pred, ["aux", "neg", "ROOT", "obj"]):
        token.dep_ = dep
    example = Example(pred, gold)
    counts = arc_counts([example])
    scores = score_parse([example])
    f = f_score(*(np.array(counts[name][0]) for name in ("uas_correct", "uas_predicted", "gold")))
    assert f == pytest.approx(scores["dep_uas"])
    # "Do" and "n't" both become the arc (Don't -> go): one arc in the unlabelled set, two labelled
    assert counts["uas_predicted"] == [3] and counts["las_predicted"] == [4]
