"""The decoder's layout of arc scores, shared by the losses (objectives) and the tree probabilities
(marginals): unit 0 of every sentence is the root, `arcs[b, i, j]` scores j -> i, `mask` (B, N)
marks real units, and NEG_INF marks an arc that cannot be."""

import numpy as np

NEG_INF = -1e9


def candidate_mask(mask: np.ndarray) -> np.ndarray:
    """(B, N, N) True where unit j may head word i: both real, i is a word, j != i."""
    n = mask.shape[1]
    valid = (mask[:, :, None] > 0) & (mask[:, None, :] > 0) & ~np.eye(n, dtype=bool)
    valid[:, 0, :] = False
    return valid


def attach_leaves(arcs: np.ndarray, lengths: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """arcs with the `leaves` units (B, N) (whitespace tokens) out of the tree: no unit may take a
    leaf as its head, and each leaf has one possible head, score 0: the word before it, else the
    word after it. A sentence of leaves only hangs them from its first unit, the root's dependent.

    A leaf with one possible head multiplies every tree's weight by the same factor, so the
    distribution over the words' trees (the marginals, log Z's differences) is the one without
    the leaves, and the decoder keeps each leaf where it is put.
    """
    batch, n_units = leaves.shape
    units = np.arange(n_units)[None, :]
    real = (units >= 1) & (units <= np.asarray(lengths)[:, None])
    leaves = leaves & real
    if not leaves.any():
        return arcs
    words = real & ~leaves
    before = np.maximum.accumulate(np.where(words, units, 0), axis=1)  # 0: no word before
    after = np.minimum.accumulate(np.where(words, units, n_units)[:, ::-1], axis=1)[:, ::-1]
    no_word = ~words.any(axis=1, keepdims=True)
    head = np.where(before >= 1, before, after)
    head = np.where(no_word, np.where(units == 1, 0, 1), head)
    no_leaf_heads = np.where(leaves[:, None, :], NEG_INF, arcs)
    forced = np.where(units[:, None, :] == head[:, :, None], 0.0, NEG_INF).astype(arcs.dtype)
    return np.where(leaves[:, :, None], forced, no_leaf_heads)
