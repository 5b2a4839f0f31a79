"""Losses and decoding scores over the (B, N, N, 1 + K) pair scores of the parser and relations, plain numpy.

Unit 0 of every sentence is the root; `mask` (B, N) marks real units. Gold arrays are (B, N):
`gold_heads[b, i]` the head unit of unit i and `gold_labels[b, i]` its label index (0..K-1),
both -1 where unknown (the root, padding, words the gold data does not align to).
"""

from typing import Optional, Tuple

import numpy as np
from scipy.special import expit, log_softmax, logsumexp, softmax

from .layout import NEG_INF, candidate_mask

ARC_OBJECTIVES = ("local", "tree_crf")


def arc_log_scores(scores: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """(B, N, N) log-score of each arc j -> i, -inf-like where the arc is impossible.

    biaffine: log-softmax of the arc channel over heads; paper: log P(not NONE) of each pair.
    """
    valid = candidate_mask(mask)
    if mode == "paper":
        arcs = logsumexp(scores[..., 1:], axis=-1) - logsumexp(scores, axis=-1)
    else:
        arcs = log_softmax(np.where(valid, scores[..., 0], NEG_INF), axis=-1)
    return np.where(valid, arcs, NEG_INF)


def _gold_words(gold_heads: np.ndarray, n_words: Optional[int]) -> Tuple[np.ndarray, np.ndarray, int]:
    """(sentence, unit) indices of the words with a gold arc, and what a loss is averaged over."""
    b_idx, i_idx = np.nonzero(gold_heads >= 0)
    return b_idx, i_idx, max(len(b_idx) if n_words is None else n_words, 1)


def softmax_rows_loss(logits: np.ndarray, targets: np.ndarray) -> Tuple[float, np.ndarray]:
    """Summed cross-entropy of each row of logits (R, C) against its target column, and its gradient."""
    log_probs = log_softmax(logits, axis=-1)
    rows = np.arange(len(targets))
    grad = np.exp(log_probs)
    grad[rows, targets] -= 1
    return -float(log_probs[rows, targets].sum()), grad


def paper_loss(
    scores: np.ndarray, mask: np.ndarray, gold_heads: np.ndarray, gold_labels: np.ndarray, n_words: Optional[int] = None
) -> Tuple[float, np.ndarray]:
    """Meng et al.'s loss over (B, N, N, 1 + K) scores and its gradient, averaged over gold words.

    One (1 + K)-way softmax per candidate pair of a gold word, NONE for every pair but the gold arc
    (summed over a word's candidates). n_words: what to average over, when these scores are one
    chunk of a larger batch (default: the gold words here).
    """
    valid = candidate_mask(mask)
    b_idx, i_idx, n_known = _gold_words(gold_heads, n_words)
    targets = np.zeros(scores.shape[:3], dtype="int64")
    targets[b_idx, i_idx, gold_heads[b_idx, i_idx]] = 1 + gold_labels[b_idx, i_idx]
    pair_weight = (valid & (gold_heads >= 0)[:, :, None]).astype(scores.dtype)
    log_probs = log_softmax(scores, axis=-1)
    picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
    loss = -(picked * pair_weight).sum()
    grad = np.exp(log_probs)
    np.put_along_axis(grad, targets[..., None], np.take_along_axis(grad, targets[..., None], -1) - 1, -1)
    d_scores = grad * pair_weight[..., None]
    return float(loss) / n_known, (d_scores / n_known).astype(scores.dtype, copy=False)


def biaffine_loss(
    arc_scores: np.ndarray,
    label_scores: np.ndarray,
    mask: np.ndarray,
    gold_heads: np.ndarray,
    gold_labels: np.ndarray,
    n_words: Optional[int] = None,
    arc_objective: str = "local",
) -> Tuple[float, np.ndarray, np.ndarray]:
    """Dozat & Manning's loss and its gradients, averaged over gold words: an arc loss, plus a
    label softmax on each word's gold arc.

    arc_scores (B, N, N); label_scores (B, N, K) the label scores of each unit's gold arc
    gold_heads[b, i] -> i (what the scorer's `label_scores_at(gold_heads)` gives). arc_objective:
    "local", a softmax over the candidate heads of each word; "tree_crf", the gold tree's negative
    log-likelihood among all single-root trees (`tree_crf_arc_loss`). Returns the loss, d arc_scores
    and d label_scores. n_words: as in `paper_loss`.
    """
    valid = candidate_mask(mask)
    b_idx, i_idx, n_known = _gold_words(gold_heads, n_words)
    d_arcs, d_labels = np.zeros_like(arc_scores), np.zeros_like(label_scores)
    whole_trees = gold_tree_rows(gold_heads, mask) if arc_objective == "tree_crf" else np.zeros(len(mask), dtype=bool)
    local = ~whole_trees[b_idx]  # words of sentences without a whole gold tree keep the local loss
    arc_logits = np.where(valid[b_idx[local], i_idx[local]], arc_scores[b_idx[local], i_idx[local]], NEG_INF)
    arc_loss, arc_grad = softmax_rows_loss(arc_logits, gold_heads[b_idx[local], i_idx[local]])
    d_arcs[b_idx[local], i_idx[local]] = arc_grad * valid[b_idx[local], i_idx[local]]
    if whole_trees.any():
        tree_loss, d_trees = tree_crf_arc_loss(arc_scores[whole_trees], mask[whole_trees], gold_heads[whole_trees])
        arc_loss += tree_loss
        d_arcs[whole_trees] = d_trees
    label_loss, label_grad = softmax_rows_loss(label_scores[b_idx, i_idx], gold_labels[b_idx, i_idx])
    d_labels[b_idx, i_idx] = label_grad
    return (arc_loss + label_loss) / n_known, d_arcs / n_known, d_labels / n_known


def gold_tree_rows(gold_heads: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(B,) True for the sentences whose every word has a gold head, exactly one of them the root:
    the gold trees the tree CRF's distribution (single-root trees) can score."""
    words = mask > 0
    words[:, 0] = False
    known = ((gold_heads >= 0) | ~words).all(axis=1)
    one_root = ((gold_heads == 0) & words).sum(axis=1) == 1
    return known & one_root & words.any(axis=1)


def tree_crf_arc_loss(arc_scores: np.ndarray, mask: np.ndarray, gold_heads: np.ndarray) -> Tuple[float, np.ndarray]:
    """Summed negative log-likelihood of each sentence's gold tree among all its single-root trees
    (Koo et al. 2007; SuPar's CRF dependency parser), and its gradient: marginals minus the gold arcs.

    arc_scores (B, N, N) in the decoder's layout; every word of every sentence has a gold head
    (`gold_tree_rows`). Unused entries get no gradient.
    """
    from .marginals import diagonal_to_root_first, root_first_to_diagonal, tree_marginals_with_log_partition

    valid = candidate_mask(mask)
    logits = np.where(valid, arc_scores, -np.inf).astype("float64")
    lengths = (mask > 0).sum(axis=1) - 1
    marginals, log_z = tree_marginals_with_log_partition(root_first_to_diagonal(logits), lengths)
    b_idx, i_idx = np.nonzero(gold_heads >= 0)
    gold_score = np.zeros(len(mask))
    np.add.at(gold_score, b_idx, logits[b_idx, i_idx, gold_heads[b_idx, i_idx]])
    d_arcs = diagonal_to_root_first(marginals.numpy())
    d_arcs[b_idx, i_idx, gold_heads[b_idx, i_idx]] -= 1.0
    d_arcs = np.where(valid, d_arcs, 0.0)
    usable = np.isfinite(log_z.numpy())  # a sentence float64 cannot score (`marginals.py`) adds nothing
    d_arcs[~usable] = 0.0
    loss = (log_z.numpy() - gold_score)[usable].sum()
    return float(loss), d_arcs.astype(arc_scores.dtype, copy=False)


def allowed_labels(heads: np.ndarray, root_allowed: np.ndarray, other_allowed: np.ndarray) -> np.ndarray:
    """(..., N, K) the labels the decoder may give each unit: root labels on root arcs, others elsewhere."""
    return np.where((heads == 0)[..., None], root_allowed, other_allowed)


def best_labels(
    label_scores: np.ndarray, heads: np.ndarray, root_allowed: np.ndarray, other_allowed: np.ndarray
) -> np.ndarray:
    """Label index for each unit given its head, among the labels allowed there.

    label_scores (..., N, K): the scores of each unit on its arc heads[..., i] -> i; heads (..., N).
    Labels seen only on root arcs in training stay on root arcs and the others stay off them.
    """
    allowed = allowed_labels(heads, root_allowed, other_allowed)
    return np.where(allowed, label_scores, -np.inf).argmax(axis=-1)


def entity_pair_mask(mask: np.ndarray) -> np.ndarray:
    """(B, N, N) True for ordered pairs of two different real entities (the root, unit 0, is not one)."""
    pairs = (mask[:, :, None] > 0) & (mask[:, None, :] > 0) & ~np.eye(mask.shape[1], dtype=bool)
    pairs[:, 0, :] = pairs[:, :, 0] = False
    return pairs


def relation_probabilities(scores: np.ndarray, multi_label: bool) -> np.ndarray:
    """(B, N, N, K) probability of each relation type for every pair, from (B, N, N, 1 + K) scores.

    multi_label: one sigmoid per type (channel 0 unused); else one softmax over NONE + K.
    """
    if multi_label:
        return expit(scores[..., 1:])
    return softmax(scores, axis=-1)[..., 1:]


def relation_loss(
    scores: np.ndarray, weights: np.ndarray, gold: np.ndarray, multi_label: bool, n_pairs: int
) -> Tuple[float, np.ndarray]:
    """Loss summed over weighted pairs / n_pairs, and its gradient with respect to `scores`.

    weights (B, N, N): 1.0 for pairs in the loss (positives and the sampled negatives), else 0.
    multi_label: gold is (B, N, N, K) 0/1 and the loss binary cross-entropy per type; else gold
    is (B, N, N) with 0 for NONE and 1..K a relation, and the loss softmax cross-entropy.
    """
    d_scores = np.zeros_like(scores)
    if multi_label:
        logits = scores[..., 1:]
        per_type = np.logaddexp(0, logits) - gold * logits  # -log sigmoid(+-logit), stable
        loss = (per_type.sum(axis=-1) * weights).sum()
        d_scores[..., 1:] = (expit(logits) - gold) * weights[..., None]
    else:
        log_probs = log_softmax(scores, axis=-1)
        picked = np.take_along_axis(log_probs, gold[..., None], axis=-1)[..., 0]
        loss = -(picked * weights).sum()
        d_scores = np.exp(log_probs)
        np.put_along_axis(d_scores, gold[..., None], np.take_along_axis(d_scores, gold[..., None], -1) - 1, -1)
        d_scores *= weights[..., None]
    n_pairs = max(n_pairs, 1)
    return float(loss) / n_pairs, (d_scores / n_pairs).astype(scores.dtype, copy=False)
