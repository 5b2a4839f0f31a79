"""Losses and decoding scores over the (B, N, N, 1 + K) pair scores of the parser and relations, plain numpy.

Unit 0 of every sentence is the root; `mask` (B, N) marks real units. Gold arrays are (B, N):
`gold_heads[b, i]` the head unit of unit i and `gold_labels[b, i]` its label index (0..K-1),
both -1 where unknown (the root, padding, words the gold data does not align to).
"""

from typing import Optional, Tuple

import numpy as np
from scipy.special import expit, log_softmax, logsumexp, softmax

NEG_INF = -1e9


def candidate_mask(mask: np.ndarray) -> np.ndarray:
    """(B, N, N) True where unit j may head word i: both real, i is a word, j != i."""
    n = mask.shape[1]
    valid = (mask[:, :, None] > 0) & (mask[:, None, :] > 0) & ~np.eye(n, dtype=bool)
    valid[:, 0, :] = False
    return valid


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


def parser_loss(
    scores: np.ndarray,
    mask: np.ndarray,
    gold_heads: np.ndarray,
    gold_labels: np.ndarray,
    mode: str,
    n_words: Optional[int] = None,
) -> Tuple[float, np.ndarray]:
    """Cross-entropy loss and its gradient with respect to `scores`, averaged over gold words.

    n_words: what to average over, when these scores are one chunk of a larger batch (default:
    the gold words here).

    biaffine: softmax over candidate heads for each word plus a label softmax on the gold arc.
    paper: one (1 + K)-way softmax per candidate pair, NONE for every pair but the gold arc
    (summed over a word's candidates, then averaged over words).
    """
    valid = candidate_mask(mask)
    known = gold_heads >= 0
    n_known = max(int(known.sum()) if n_words is None else n_words, 1)
    b_idx, i_idx = np.nonzero(known)
    h_idx = gold_heads[b_idx, i_idx]
    l_idx = gold_labels[b_idx, i_idx]
    d_scores = np.zeros_like(scores)
    if mode == "paper":
        targets = np.zeros(scores.shape[:3], dtype="int64")
        targets[b_idx, i_idx, h_idx] = 1 + l_idx
        pair_weight = (valid & known[:, :, None]).astype(scores.dtype)
        log_probs = log_softmax(scores, axis=-1)
        picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]
        loss = -(picked * pair_weight).sum()
        grad = np.exp(log_probs)
        np.put_along_axis(grad, targets[..., None], np.take_along_axis(grad, targets[..., None], -1) - 1, -1)
        d_scores = grad * pair_weight[..., None]
    else:
        arc_logits = np.where(valid, scores[..., 0], NEG_INF)
        arc_log_probs = log_softmax(arc_logits[b_idx, i_idx], axis=-1)  # (n_known, N)
        loss = -arc_log_probs[np.arange(len(b_idx)), h_idx].sum()
        arc_grad = np.exp(arc_log_probs)
        arc_grad[np.arange(len(b_idx)), h_idx] -= 1
        d_scores[b_idx, i_idx, :, 0] = arc_grad * valid[b_idx, i_idx]
        label_log_probs = log_softmax(scores[b_idx, i_idx, h_idx, 1:], axis=-1)
        loss -= label_log_probs[np.arange(len(b_idx)), l_idx].sum()
        label_grad = np.exp(label_log_probs)
        label_grad[np.arange(len(b_idx)), l_idx] -= 1
        d_scores[b_idx, i_idx, h_idx, 1:] = label_grad
    return float(loss) / n_known, (d_scores / n_known).astype(scores.dtype, copy=False)


def best_labels(
    label_scores: np.ndarray, heads: np.ndarray, root_allowed: np.ndarray, other_allowed: np.ndarray
) -> np.ndarray:
    """Label index for each unit given its head, among the labels allowed there.

    label_scores (..., N, K): the scores of each unit on its arc heads[..., i] -> i; heads (..., N).
    Labels seen only on root arcs in training stay on root arcs and the others stay off them.
    """
    allowed = np.where((heads == 0)[..., None], root_allowed, other_allowed)
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
