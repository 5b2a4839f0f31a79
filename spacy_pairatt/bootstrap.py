"""Paired bootstrap over documents for the difference between two parsers' attachment scores.

Table 1's orderings compare single runs whose differences can be a few words in thousands; the
interval says whether a difference is larger than the resampling of test sentences would give.
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
    if metric not in ("uas", "las"):
        raise ValueError(f"metric must be 'uas' or 'las', got {metric!r}")
    gold = np.asarray(better["gold"])
    if len(gold) == 0 or not np.array_equal(gold, np.asarray(worse["gold"])):
        raise ValueError("a paired bootstrap needs both systems' counts on the same, non-empty documents")
    counts = {
        name: np.stack([np.asarray(system[f"{metric}_{count}"]) for count in ("correct", "predicted")])
        for name, system in (("better", better), ("worse", worse))
    }

    def score(system: np.ndarray, docs: np.ndarray) -> np.ndarray:
        return 100 * f_score(system[0][docs].sum(-1), system[1][docs].sum(-1), gold[docs].sum(-1))

    everything = np.arange(len(gold))
    observed = float(score(counts["better"], everything) - score(counts["worse"], everything))
    rng = np.random.default_rng(seed)
    differences = []
    for start in range(0, n_resamples, chunk):
        docs = rng.integers(0, len(gold), size=(min(chunk, n_resamples - start), len(gold)))
        differences.append(score(counts["better"], docs) - score(counts["worse"], docs))
    resampled = np.concatenate(differences)
    low, high = np.percentile(resampled, [2.5, 97.5])
    # Not rounded: whether the interval spans 0 is read from these; the markdown rounds as it prints.
    return {
        "difference": observed,
        "low": float(low),
        "high": float(high),
        "p_not_better": float((resampled <= 0).mean()),
        "n_resamples": n_resamples,
        "seed": seed,
        "n_docs": len(gold),
    }
