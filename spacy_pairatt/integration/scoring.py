"""Parser and relation scores in spaCy's conventions, so `spacy train` and `spacy evaluate` print them.

- dep_uas / dep_las / dep_las_per_type: spaCy's `Scorer.score_deps` with labels "p" and "punct"
  ignored (spaCy's parser convention), plus sents_p / sents_r / sents_f;
- dep_uas_punct / dep_las_punct: the same with punctuation included;
- arc_counts: per example, the arc counts dep_uas and dep_las are F-scores of (for paired bootstrap
  tests, `bootstrap.py`);
- dep_single_tree: the share of gold sentences whose predicted arcs form exactly one tree
  (one root inside the sentence, every other word headed inside it, no cycle);
- rel_micro_p / rel_micro_r / rel_micro_f: labelled, directional relations in `doc._.relations`.
"""

from typing import Any, Dict, Iterable, List, Optional

import numpy as np
from spacy.pipeline.dep_parser import parser_score
from spacy.scorer import Scorer
from spacy.training import Example
from spacy.util import registry

from ..core.decoding import is_single_rooted_tree
from .extensions import register_extensions


def lowercase_dep(token, attr: str) -> str:
    """Labels compare case-insensitively ("ROOT" == "root"), as spaCy's parser scorer does."""
    return token.vocab.strings.as_string(getattr(token, attr)).lower()


def sentence_is_one_tree(heads: np.ndarray, start: int, end: int) -> bool:
    """Whether absolute `heads[start:end]` form one tree inside [start, end) (roots head themselves)."""
    local = heads[start:end] - start + 1
    positions = np.arange(1, end - start + 1)
    local = np.where((local == positions) | (local < 1) | (local > end - start), 0, local)
    return is_single_rooted_tree(np.concatenate([[-1], local]))


def single_tree_rate(examples: Iterable[Example]) -> Optional[float]:
    """Share of gold sentences parsed as exactly one tree.

    Each gold sentence is mapped to the predicted tokens aligned to it, so a tokenization that
    differs from the gold one (spaCy's tokenizer on the raw text) is fine.
    """
    total = ok = 0
    for example in examples:
        reference = example.reference
        if not (reference.has_annotation("DEP") or reference.has_annotation("SENT_START")):
            continue
        heads = np.array([token.head.i for token in example.predicted])
        y2x = example.alignment.y2x
        for sent in reference.sents:
            aligned = y2x.data[y2x.starts[sent.start] : y2x.ends[sent.end - 1]]
            if len(aligned) == 0:
                continue
            total += 1
            ok += sentence_is_one_tree(heads, int(aligned.min()), int(aligned.max()) + 1)
    return ok / total if total else None


def score_parse(examples: Iterable[Example], **kwargs) -> Dict[str, Any]:
    examples = list(examples)
    scores = parser_score(examples, **kwargs)
    with_punct = Scorer.score_deps(examples, "dep", getter=lowercase_dep, ignore_labels=())
    scores["dep_uas_punct"] = with_punct["dep_uas"]
    scores["dep_las_punct"] = with_punct["dep_las"]
    scores["dep_single_tree"] = single_tree_rate(examples)
    return scores


PUNCT_LABELS = ("p", "punct")  # what spaCy's parser_score leaves out of dep_uas / dep_las


def arc_counts(examples: Iterable[Example]) -> Dict[str, List[int]]:
    """Per example, the counts that spaCy's dep_uas and dep_las are F-scores of when summed:
    `2 * {uas,las}_correct / ({uas,las}_predicted + gold)`, punctuation left out.

    A paired bootstrap needs these per document; spaCy's scorer only returns corpus totals. This
    follows `Scorer.score_deps` word for word: a predicted word counts only through a one-to-one
    alignment with a gold word (its head too), else as a wrong arc; words whose gold label is
    missing count on neither side; arcs are sets, so two predicted words aligned to one gold word
    with the same head count once.
    """
    names = ("uas_correct", "uas_predicted", "las_correct", "las_predicted", "gold")
    counts: Dict[str, List[int]] = {name: [] for name in names}
    for example in examples:
        gold_labelled, missing = set(), set()
        for token in example.reference:
            dep = lowercase_dep(token, "dep")
            if dep == "":
                missing.add(token.i)
            elif dep not in PUNCT_LABELS:
                gold_labelled.add((token.i, token.head.i, dep))
        x2y = example.alignment.x2y
        one_to_one = {int(i): int(x2y.data[x2y.starts[i]]) for i in np.flatnonzero(x2y.lengths == 1)}
        pred_labelled, unaligned = set(), 0
        for token in example.predicted:
            gold_i, dep = one_to_one.get(token.i), lowercase_dep(token, "dep")
            if token.is_space or gold_i in missing or dep in PUNCT_LABELS:
                continue
            gold_head = one_to_one.get(token.head.i)
            if gold_i is None or gold_head is None:
                unaligned += 1
            else:
                pred_labelled.add((gold_i, gold_head, dep))
        gold_unlabelled = {arc[:2] for arc in gold_labelled}
        pred_unlabelled = {arc[:2] for arc in pred_labelled}
        counts["uas_correct"].append(len(pred_unlabelled & gold_unlabelled))
        counts["uas_predicted"].append(len(pred_unlabelled) + unaligned)
        counts["las_correct"].append(len(pred_labelled & gold_labelled))
        counts["las_predicted"].append(len(pred_labelled) + unaligned)
        counts["gold"].append(len(gold_labelled))
    return counts


@registry.scorers("spacy-pairatt.parser_scorer.v1")
def make_parser_scorer():
    """Registered as `spacy-pairatt.parser_scorer.v1`."""
    return score_parse


def score_relations(examples: Iterable[Example], **kwargs) -> Dict[str, float]:
    """Micro precision, recall and F1 of labelled, directional relations (spans compared by characters).

    Registered through `make_relation_scorer` as `spacy-pairatt.relation_scorer.v1`.
    """
    register_extensions()
    gold, predicted = set(), set()
    for index, example in enumerate(examples):
        for facts, doc in ((gold, example.reference), (predicted, example.predicted)):
            for relation in doc._.relations:
                head, tail = relation.head_span(doc), relation.tail_span(doc)
                facts.add((index, head.start_char, head.end_char, tail.start_char, tail.end_char, relation.label))
    correct = len(gold & predicted)
    precision = correct / len(predicted) if predicted else 0.0
    recall = correct / len(gold) if gold else 0.0
    f_score = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"rel_micro_p": precision, "rel_micro_r": recall, "rel_micro_f": f_score}


@registry.scorers("spacy-pairatt.relation_scorer.v1")
def make_relation_scorer():
    return score_relations
