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
