"""Relation-extraction metrics as the benchmarks' official scripts define them, in numpy.

- SemEval-2010 Task 8: `semeval_official_scores` re-implements semeval2010_task8_scorer-v1.2.pl,
  whose primary score is the macro-averaged F1 of the (9+1)-way evaluation with direction taken
  into account, Other excluded.
- DocRED / Re-DocRED: `docred_scores` (P/R/F1 at a threshold, Ign F1, AUC and Ign AUC) and
  `tune_threshold` follow the official evaluation (thunlp/DocRED `evaluation.py` for P/R/F1 and
  Ign F1, the baseline's `Config.test` for the precision-recall curve, AUC and theta).

Definitions and sources: docs/relations_data.md.
"""

from typing import Any, Collection, Dict, Hashable, Mapping, Sequence, Tuple, Union

import numpy as np

OTHER = "Other"
SEMEVAL_RELATIONS = (
    "Cause-Effect",
    "Component-Whole",
    "Content-Container",
    "Entity-Destination",
    "Entity-Origin",
    "Instrument-Agency",
    "Member-Collection",
    "Message-Topic",
    "Product-Producer",
)
DIRECTIONS = ("(e1,e2)", "(e2,e1)")
SEMEVAL_LABELS = tuple(f"{relation}{direction}" for relation in SEMEVAL_RELATIONS for direction in DIRECTIONS) + (
    OTHER,
)

Labels = Union[Mapping[Hashable, str], Sequence[str]]


def undirected(labels: np.ndarray) -> np.ndarray:
    """'Cause-Effect(e2,e1)' -> 'Cause-Effect'; 'Other' stays."""
    return np.array([label.split("(", 1)[0] for label in labels], dtype=object)


def _as_dict(labels: Labels) -> Dict[Hashable, str]:
    return dict(labels) if isinstance(labels, Mapping) else dict(enumerate(labels))


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (the Perl scorer prints 0/0 as 0.00%)."""
    numerator, denominator = np.asarray(numerator, float), np.asarray(denominator, float)
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def _f1(precision: np.ndarray, recall: np.ndarray) -> np.ndarray:
    return _safe_divide(2 * precision * recall, precision + recall)


def _class_counts(
    gold_keys: np.ndarray, predicted_keys: np.ndarray, correct: np.ndarray, covered: np.ndarray
) -> Tuple[np.ndarray, np.ndarray]:
    """The classes (the keys present in the answer key, Other excluded) and (3, D, C) what each of D
    sentences adds to their counts: correct predictions on gold c, predictions whose key is c
    (wrong-direction ones included: the scorer's xDIRx column adds to the precision denominator;
    predictions of a class absent from the key count for no class, like Other), and gold c
    (skipped sentences included)."""
    classes = np.array(sorted(set(gold_keys) - {OTHER}), dtype=object)
    is_gold = gold_keys[:, None] == classes[None, :]
    is_predicted = (predicted_keys[:, None] == classes[None, :]) & covered[:, None]
    return classes, np.stack([is_gold & correct[:, None], is_predicted, is_gold]).astype(np.int64)


def _semeval_evaluation(
    gold_keys: np.ndarray, predicted_keys: np.ndarray, correct: np.ndarray, covered: np.ndarray
) -> Dict[str, Any]:
    """One of the Perl scorer's three evaluations, from the counts of `_class_counts`."""
    classes, counts = _class_counts(gold_keys, predicted_keys, correct, covered)
    tp, n_predicted, n_gold = counts.sum(axis=1)
    precision, recall = _safe_divide(tp, n_predicted), _safe_divide(tp, n_gold)
    f1 = _f1(precision, recall)
    micro_p, micro_r = _safe_divide(tp.sum(), n_predicted.sum()), _safe_divide(tp.sum(), n_gold.sum())
    return {
        "macro_p": float(precision.mean()) if len(classes) else 0.0,
        "macro_r": float(recall.mean()) if len(classes) else 0.0,
        "macro_f1": float(f1.mean()) if len(classes) else 0.0,
        "micro_p": float(micro_p),
        "micro_r": float(micro_r),
        "micro_f1": float(_f1(micro_p, micro_r)),
        "accuracy": float(_safe_divide((correct & covered).sum(), covered.sum())),
        "per_relation": {
            str(name): {"p": float(p), "r": float(r), "f": float(f)}
            for name, p, r, f in zip(classes, precision, recall, f1)
        },
    }


def _check_labels(gold: Dict[Hashable, str], predicted: Dict[Hashable, str]) -> None:
    """Every label a SemEval-2010 Task 8 label, and no prediction for a sentence without a gold label."""
    for source, labels in (("gold", gold), ("predicted", predicted)):
        for key, label in labels.items():
            if label not in SEMEVAL_LABELS:
                raise ValueError(f"{source} label {label!r} of sentence {key!r} is not a SemEval-2010 Task 8 label")
    unknown = [key for key in predicted if key not in gold]
    if unknown:
        raise ValueError(f"predictions for sentences without a gold label: {unknown[:5]}")


def semeval_sentence_counts(gold_labels: Sequence[str], predicted_labels: Sequence[str]) -> np.ndarray:
    """(3, D, C) what each of D sentences adds to the official evaluation's counts of C classes (the
    relations in the gold labels, Other excluded): correct (direction included), predicted and gold.

    Summed over any multiset of sentences they give that multiset's official macro-F1
    (`semeval_macro_f1`): what a bootstrap over test sentences resamples.
    """
    gold, predicted = np.asarray(gold_labels, dtype=object), np.asarray(predicted_labels, dtype=object)
    if gold.shape != predicted.shape:
        raise ValueError(f"{len(predicted)} predicted labels for {len(gold)} gold labels")
    _check_labels(_as_dict(gold_labels), _as_dict(predicted_labels))
    covered = np.ones(len(gold), dtype=bool)
    return _class_counts(undirected(gold), undirected(predicted), predicted == gold, covered)[1]


def semeval_macro_f1(counts: np.ndarray) -> np.ndarray:
    """The official macro-F1 (a fraction) from summed `semeval_sentence_counts`: (3, ..., C) -> (...)."""
    precision, recall = _safe_divide(counts[0], counts[1]), _safe_divide(counts[0], counts[2])
    return _f1(precision, recall).mean(-1)


def semeval_official_scores(gold_labels: Labels, predicted_labels: Labels) -> Dict[str, Any]:
    """The SemEval-2010 Task 8 scorer (v1.2) on 19-way labels such as "Cause-Effect(e1,e2)" or "Other".

    Both arguments are sequences (same length, same order) or mappings from sentence id to label; a
    mapping of predictions may leave ids out (the scorer's "skipped": they count as wrong and are
    in every recall denominator). Returns fractions: "macro_f1" is the official score, and
    "with_direction" (official, iii), "ignoring_direction" (ii) and "19_way" (i) hold macro/micro
    P, R, F1 (Other excluded), accuracy over the predictions made and per-relation P/R/F1;
    "coverage" is the share of ids predicted.
    """
    gold, predicted = _as_dict(gold_labels), _as_dict(predicted_labels)
    if not isinstance(predicted_labels, Mapping) and len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted labels for {len(gold)} gold labels")
    _check_labels(gold, predicted)
    ids = list(gold)
    gold_array = np.array([gold[key] for key in ids], dtype=object)
    predicted_array = np.array([predicted.get(key, "") for key in ids], dtype=object)
    covered = np.array([key in predicted for key in ids], dtype=bool)
    gold_undirected, predicted_undirected = undirected(gold_array), undirected(predicted_array)
    exact = predicted_array == gold_array
    with_direction = _semeval_evaluation(gold_undirected, predicted_undirected, exact, covered)
    return {
        "macro_f1": with_direction["macro_f1"],
        "with_direction": with_direction,
        "ignoring_direction": _semeval_evaluation(
            gold_undirected, predicted_undirected, predicted_undirected == gold_undirected, covered
        ),
        "19_way": _semeval_evaluation(gold_array, predicted_array, exact, covered),
        "coverage": float(covered.mean()) if len(ids) else 0.0,
    }


def _ranked(gold_facts: Collection[Hashable], predicted: Mapping[Hashable, float], seen: Collection[Hashable] = ()):
    """Scores sorted high to low (stable, as the official list.sort), whether each is gold and gold-and-seen."""
    gold, seen = set(gold_facts), set(seen)
    facts = list(predicted)
    scores = np.array([predicted[fact] for fact in facts], dtype=float)
    order = np.argsort(-scores, kind="stable")
    is_gold = np.array([fact in gold for fact in facts], dtype=bool)[order]
    is_seen = np.array([fact in seen for fact in facts], dtype=bool)[order]
    return scores[order], is_gold, is_gold & is_seen, len(gold)


def _trapezoid(x: np.ndarray, y: np.ndarray) -> float:
    """Area under y(x) by the trapezoid rule over the given points, as sklearn.metrics.auc (no origin added)."""
    return float(np.sum(np.diff(x) * (y[1:] + y[:-1]) / 2)) if len(x) > 1 else 0.0


def docred_scores(
    gold_facts: Collection[Hashable],
    predicted: Mapping[Hashable, float],
    seen_in_train: Collection[Hashable],
    theta: float,
) -> Dict[str, float]:
    """DocRED's relation metrics; a fact is any hashable, e.g. (document, head, tail, relation).

    `predicted` maps every scored fact to its score (pass all candidates, not only those above
    theta: AUC sweeps the whole ranking); a fact counts as predicted at `theta` when score >= theta.
    `seen_in_train` holds the gold facts that DocRED's "Ign" metrics discount: those for which some
    mention name of the head, some mention name of the tail and the relation form a triple of the
    training data (`corpora.docred.seen_in_training`).

    - precision, recall, f1 at theta; the recall denominator is the number of distinct gold facts.
    - ign_precision = (correct - correct_seen) / (predicted - correct_seen), with correct_seen the
      correct predictions in `seen_in_train`; ign_f1 combines it with the *unchanged* recall, as
      the official evaluation does (0 when every correct prediction was seen).
    - auc / ign_auc: trapezoid area under (recall, precision) / (recall, ign precision) with one
      point per prediction in score order, as the official `sklearn.metrics.auc(pr_x, pr_y)`:
      no (0, 1) start point, so even a perfect ranking of n facts scores 1 - 1/n.
    """
    scores, is_gold, correct_seen, n_gold = _ranked(gold_facts, predicted, seen_in_train)
    tp, tp_seen = np.cumsum(is_gold), np.cumsum(correct_seen)
    n_predicted = np.arange(1, len(scores) + 1)
    precision = tp / n_predicted
    recall = tp / max(n_gold, 1)
    ign_precision = _safe_divide(tp - tp_seen, n_predicted - tp_seen)
    cut = int(np.sum(scores >= theta))
    at = cut - 1
    p, r = (precision[at], recall[at]) if cut else (0.0, 0.0)
    ign_p = ign_precision[at] if cut else 0.0
    return {
        "precision": float(p),
        "recall": float(r),
        "f1": float(_f1(p, r)),
        "ign_precision": float(ign_p),
        "ign_f1": float(_f1(ign_p, r)),
        "auc": _trapezoid(recall, precision),
        "ign_auc": _trapezoid(recall, ign_precision),
        "theta": float(theta),
        "n_gold": n_gold,
        "n_predicted": cut,
    }


def tune_threshold(gold_facts: Collection[Hashable], predicted: Mapping[Hashable, float]) -> float:
    """The theta (a predicted score) whose cut `score >= theta` maximises F1 on held-out data.

    One sort and a cumulative count of true positives; only cuts after the last of equal scores
    are considered, since a threshold cannot split a tie. This is the official `theta` (score of
    the F1-maximising prediction) when scores are distinct; the highest such theta wins ties in F1.
    """
    if not predicted:
        raise ValueError("tune_threshold: no predicted facts to choose a threshold from")
    scores, is_gold, _, n_gold = _ranked(gold_facts, predicted)
    tp = np.cumsum(is_gold)
    n_predicted = np.arange(1, len(scores) + 1)
    f1 = _f1(tp / n_predicted, tp / max(n_gold, 1))
    last_of_tie = np.append(scores[1:] != scores[:-1], True)
    best = int(np.argmax(np.where(last_of_tie, f1, -1.0)))
    return float(scores[best])
