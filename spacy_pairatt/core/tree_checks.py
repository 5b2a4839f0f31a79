"""Whether arrays of heads form a tree: for corpus readers and decoders, before any Doc exists."""

from typing import Optional

import numpy as np


def head_array_problem(heads: np.ndarray) -> Optional[str]:
    """What keeps one sentence's 1-based `heads` (0: the root) from being a single-rooted tree, or None.

    The check for arrays of heads, before any Doc exists (a corpus reader, a decoder's output);
    `gold_parse_problem` checks the arcs of a Doc.
    """
    n = len(heads)
    outside = (heads < 0) | (heads > n)
    if outside.any():
        word = int(np.argmax(outside))
        return f"word {word + 1} has head {heads[word]}, outside 0..{n}"
    positions = np.arange(n)
    self_headed = heads == positions + 1
    if self_headed.any():
        return f"words {(np.flatnonzero(self_headed) + 1).tolist()} are their own heads"
    roots = np.flatnonzero(heads == 0)
    if len(roots) == 0:
        return "no word has head 0: the sentence has no root"
    if len(roots) > 1:
        return f"words {(roots + 1).tolist()} all have head 0, expected one root"
    on_cycle = cycle_members(np.where(heads == 0, positions, heads - 1))
    if on_cycle.any():
        return f"words {(np.flatnonzero(on_cycle) + 1).tolist()} form a cycle"
    return None


def cycle_members(heads: np.ndarray) -> np.ndarray:
    """(n,) bool, True for the tokens lying on a cycle of `heads` (absolute; roots head themselves).

    Pointer jumping: after ceil(log2 n) squarings every token has moved at least n steps, so it
    sits on a root (a fixed point) or on a cycle; a cycle's members are the tokens it then reaches.
    """
    reached = heads
    for _ in range(max(len(heads), 1).bit_length()):
        reached = reached[reached]
    on_cycle = np.zeros(len(heads), dtype=bool)
    on_cycle[reached] = True
    return on_cycle & (heads != np.arange(len(heads)))
