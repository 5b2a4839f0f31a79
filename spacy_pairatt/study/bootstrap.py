"""Paired bootstrap over documents for the difference between two parsers' attachment scores.

Table 1's orderings compare single runs whose differences can be a few words in thousands; the
interval says whether a difference is larger than the resampling of test sentences would give.
`paired_bootstrap_seeds` pools the difference over training seeds (the attention curve's rows).
Arrays of counts are (2, S, D): correct and predicted arcs, S training seeds, D documents.
"""

from typing import Dict, Sequence

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

    return bootstrap_difference(stack(better), stack(worse), gold, n_resamples, seed, chunk)


def resampled_scores(counts: np.ndarray, gold: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Attachment F in points of each seed's system on each resample.

    counts: (2, S, D) correct and predicted arcs; gold: (D,) gold arcs; docs: (R, D) document
    indices of R resamples (or (D,) for the data itself). Returns (S, R) (or (S,))."""
    return 100 * f_score(counts[0][:, docs].sum(-1), counts[1][:, docs].sum(-1), gold[docs].sum(-1))


def bootstrap_difference(
    better: np.ndarray, worse: np.ndarray, gold: np.ndarray, n_resamples: int = 10_000, seed: int = 0,
    chunk: int = 500,
) -> Dict:  # fmt: skip
    """The seed-mean difference better - worse of `resampled_scores` on the data and on
    `n_resamples` resamples of the documents (one draw shared by every seed and both systems).
    better, worse: (2, S, D) counts (see `resampled_scores`); gold: (D,)."""
    everything = np.arange(len(gold))
    by_seed = resampled_scores(better, gold, everything) - resampled_scores(worse, gold, everything)
    rng = np.random.default_rng(seed)
    differences = []
    for start in range(0, n_resamples, chunk):
        docs = rng.integers(0, len(gold), size=(min(chunk, n_resamples - start), len(gold)))
        differences.append((resampled_scores(better, gold, docs) - resampled_scores(worse, gold, docs)).mean(0))
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
        "n_docs": len(gold),
        "n_seeds": len(by_seed),
    }
