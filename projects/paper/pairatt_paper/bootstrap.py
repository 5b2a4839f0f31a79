"""Paired bootstrap over documents for the difference between two systems' scores: two parsers'
attachment scores, or two relation extractors' SemEval macro-F1 (`paired_bootstrap_macro_f1`).

Table 1's orderings compare single runs whose differences can be a few words in thousands; the
interval says whether a difference is larger than the resampling of test sentences would give.
`paired_bootstrap_seeds` pools the difference over training seeds (the attention curve's rows).
Arrays of counts are (2, S, D): correct and predicted arcs, S training seeds, D documents.
"""

from typing import Callable, Dict, Sequence

import numpy as np


def f_score(correct: np.ndarray, predicted: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """spaCy's dep_uas / dep_las from summed counts (0 where there are no arcs at all)."""
    total = predicted + gold
    return np.divide(2 * correct, total, out=np.zeros(np.shape(total), dtype=float), where=total > 0)


def paired_bootstrap(
    better: Dict[str, Sequence[int]], worse: Dict[str, Sequence[int]], metric: str = "uas",
    n_resamples: int = 10_000, seed: int = 0, chunk: int = 500,
) -> Dict[str, float]:  # fmt: skip
    """Resample the documents with replacement, the same draw for both systems, and score each
    resample as spaCy does (F over summed counts, in points).

    `better` / `worse` are `scoring.arc_counts` of two parsers on the same data; metric "uas" or
    "las". Returns the difference better - worse on the data itself, the 2.5 and 97.5 percentiles
    of the resampled differences, and `p_not_better`, the share of resamples where `better` does
    not score higher.
    """
    result = paired_bootstrap_seeds([better], [worse], metric, n_resamples, seed, chunk)
    del result["by_seed"], result["n_seeds"]
    return result


def paired_bootstrap_seeds(
    better: Sequence[Dict[str, Sequence[int]]], worse: Sequence[Dict[str, Sequence[int]]], metric: str = "uas",
    n_resamples: int = 10_000, seed: int = 0, chunk: int = 500,
) -> Dict:  # fmt: skip
    """`paired_bootstrap` pooled over training seeds: `better[s]` and `worse[s]` are the two
    systems' `scoring.arc_counts` under training seed s, all on the same documents. Each resample
    draws the documents once, for every seed and both systems, and its difference is the mean over
    seeds of better - worse. Returns that mean on the data itself (`difference`), each seed's
    (`by_seed`), the interval and `p_not_better` of the mean. The interval measures the test set's
    sampling with the seeds' models held fixed, not the spread over seeds."""
    if metric not in ("uas", "las"):
        raise ValueError(f"metric must be 'uas' or 'las', got {metric!r}")
    if len(better) == 0 or len(better) != len(worse):
        raise ValueError(f"one pair of systems per seed: got {len(better)} and {len(worse)} count sets")
    gold = np.asarray(better[0]["gold"])
    if len(gold) == 0 or any(not np.array_equal(gold, np.asarray(system["gold"])) for system in (*better, *worse)):
        raise ValueError("a paired bootstrap needs both systems' counts on the same, non-empty documents")

    def stack(systems: Sequence[Dict[str, Sequence[int]]]) -> np.ndarray:
        """(2, S, D): correct and predicted arcs of each seed's system on each document."""
        return np.asarray([[system[f"{metric}_{count}"] for system in systems] for count in ("correct", "predicted")])

    def score(counts: np.ndarray, docs: np.ndarray) -> np.ndarray:
        return resampled_scores(counts, gold, docs)

    return bootstrap_difference(stack(better), stack(worse), score, len(gold), n_resamples, seed, chunk)


def paired_bootstrap_macro_f1(
    better: Sequence[Dict[str, Sequence[str]]], worse: Sequence[Dict[str, Sequence[str]]],
    n_resamples: int = 10_000, seed: int = 0, chunk: int = 200,
) -> Dict:  # fmt: skip
    """`paired_bootstrap_seeds` for SemEval-2010 Task 8's official macro-F1 (in points): `better[s]` and
    `worse[s]` hold the "gold" and "predicted" 19-way label of every test sentence under training
    seed s, the same sentences in the same order for every system."""
    from spacy_pairatt.corpora.relation_metrics import semeval_macro_f1, semeval_sentence_counts

    gold = list(better[0]["gold"]) if better else []
    if len(gold) == 0 or len(better) != len(worse):
        raise ValueError(f"one pair of systems per seed, on non-empty data: got {len(better)} and {len(worse)}")
    if any(list(system["gold"]) != gold for system in (*better, *worse)):
        raise ValueError("a paired bootstrap needs both systems' labels on the same sentences")

    def stack(systems: Sequence[Dict[str, Sequence[str]]]) -> np.ndarray:
        """(3, S, D, C): each seed's `semeval_sentence_counts`."""
        return np.stack([semeval_sentence_counts(gold, system["predicted"]) for system in systems], axis=1)

    def score(counts: np.ndarray, docs: np.ndarray) -> np.ndarray:
        if docs.ndim == 1:
            return 100 * semeval_macro_f1(counts[:, :, docs].sum(-2))
        times = np.zeros(docs.shape, dtype=float)  # (R, D): how often each resample drew each sentence
        np.add.at(times, (np.arange(len(docs))[:, None], docs), 1.0)
        return 100 * semeval_macro_f1(np.einsum("rd,ksdc->ksrc", times, counts))  # counts summed: (3, S, R, C)

    return bootstrap_difference(stack(better), stack(worse), score, len(gold), n_resamples, seed, chunk)


def resampled_scores(counts: np.ndarray, gold: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Attachment F in points of each seed's system on each resample.

    counts: (2, S, D) correct and predicted arcs; gold: (D,) gold arcs; docs: (R, D) document
    indices of R resamples (or (D,) for the data itself). Returns (S, R) (or (S,))."""
    return 100 * f_score(counts[0][:, docs].sum(-1), counts[1][:, docs].sum(-1), gold[docs].sum(-1))


def bootstrap_difference(
    better: np.ndarray, worse: np.ndarray, score: Callable[[np.ndarray, np.ndarray], np.ndarray], n_docs: int,
    n_resamples: int = 10_000, seed: int = 0, chunk: int = 500,
) -> Dict:  # fmt: skip
    """The seed-mean difference better - worse of `score` on the data and on `n_resamples` resamples
    of the n_docs documents (one draw shared by every seed and both systems). score(system, docs):
    each seed's score in points, (S, R) for docs (R, D) document indices, (S,) for docs (D,)."""
    everything = np.arange(n_docs)
    by_seed = score(better, everything) - score(worse, everything)
    rng = np.random.default_rng(seed)
    differences = []
    for start in range(0, n_resamples, chunk):
        docs = rng.integers(0, n_docs, size=(min(chunk, n_resamples - start), n_docs))
        differences.append((score(better, docs) - score(worse, docs)).mean(0))
    resampled = np.concatenate(differences)
    low, high = np.percentile(resampled, [2.5, 97.5])
    # Not rounded: whether the interval spans 0 is read from these; the markdown rounds as it prints.
    return {
        "difference": float(by_seed.mean()),
        "by_seed": [float(value) for value in by_seed],
        "low": float(low),
        "high": float(high),
        "p_not_better": float((resampled <= 0).mean()),
        "n_resamples": n_resamples,
        "seed": seed,
        "n_docs": n_docs,
        "n_seeds": len(by_seed),
    }
