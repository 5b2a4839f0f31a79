"""Wordpieces to words: pooled hidden states and word-level attention.

Pure numpy over the arrays in `TransformerData`, so it is testable without a pipeline.

The transformer's outputs for one Doc are windows (spans) of `P` padded wordpiece positions, and
`TransformerData.align` maps each spaCy token to positions in the flattened `W * P` grid; a token
can own several wordpieces and a wordpiece can belong to several tokens ("do" and "n't" share
"don"), and whitespace tokens own none. A *unit* is what the pair scorer sees: unit 0 is the
artificial root, carried by each window's first position ([CLS] or <s>), units 1..n are the words.

Pooling rules (Clark et al. 2019, and what the paper's word-level pairs need):
- hidden state of a unit: mean over its wordpieces (over all windows that hold it);
- attention *from* a unit: mean over its wordpieces' rows, attention *to* a unit: sum over its
  wordpieces' columns, so a word's attention row sums to at most 1 unless words share a
  wordpiece (then that wordpiece is counted for each of them);
- a pair is read in every window that holds both units and averaged over those windows; a pair
  that shares no window gets zero attention, and `shared == 0` says so.
"""

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np


@dataclass
class UnitAlignment:
    """Which wordpieces each unit of one sentence owns, restricted to the windows it touches.

    windows: (k,) sorted window indices touched by the sentence.
    membership: (n_units, k, P) bool, True where the unit owns that wordpiece position.
    """

    windows: np.ndarray
    membership: np.ndarray

    @property
    def n_units(self) -> int:
        return self.membership.shape[0]

    @property
    def has_wordpieces(self) -> np.ndarray:
        """(n_units,) bool: False for units with no wordpiece (e.g. whitespace tokens)."""
        return self.membership.any(axis=(1, 2))

    def mean_weights(self) -> np.ndarray:
        """(n_units, k, P) float32 weights that average a unit's wordpieces over all windows."""
        counts = self.membership.sum(axis=(1, 2), keepdims=True)
        return self.membership / np.maximum(counts, 1).astype("float32")


def align_units(
    align_lengths: np.ndarray,
    align_indices: np.ndarray,
    n_positions: int,
    token_start: int,
    token_end: int,
) -> UnitAlignment:
    """Alignment of root + tokens[token_start:token_end], one unit per token (the parser's words)."""
    if not 0 <= token_start <= token_end <= len(align_lengths):
        raise ValueError(
            f"Token range [{token_start}, {token_end}) is outside the alignment of {len(align_lengths)} tokens"
        )
    tokens = np.arange(token_start, token_end)
    return align_token_groups(align_lengths, align_indices, n_positions, tokens, tokens - token_start + 1)


def align_token_groups(
    align_lengths: np.ndarray,
    align_indices: np.ndarray,
    n_positions: int,
    tokens: np.ndarray,
    units: np.ndarray,
) -> UnitAlignment:
    """Alignment of root + units made of groups of tokens, from a ragged token->wordpiece map.

    align_lengths: (n_tokens,) wordpieces per token of the Doc; align_indices: their flat
    positions in the (W * n_positions) grid, concatenated in token order. tokens[t] belongs to
    unit units[t] (1-based; a word is one token, an entity all tokens of all its mentions).
    """
    align_lengths = np.asarray(align_lengths, dtype="int64")
    align_indices = np.asarray(align_indices, dtype="int64")
    tokens = np.asarray(tokens, dtype="int64")
    units = np.asarray(units, dtype="int64")
    n_units = int(units.max(initial=0)) + 1
    offsets = np.concatenate([[0], np.cumsum(align_lengths)])
    counts = align_lengths[tokens]
    # Flat positions of every wordpiece of every listed token: ragged ranges gathered at once.
    first = np.repeat(offsets[tokens] - np.cumsum(counts) + counts, counts)
    flat = align_indices[first + np.arange(int(counts.sum()))]
    owners = np.repeat(units, counts)
    windows = np.unique(flat // n_positions)
    membership = np.zeros((n_units, len(windows), n_positions), dtype=bool)
    membership[owners, np.searchsorted(windows, flat // n_positions), flat % n_positions] = True
    membership[0, :, 0] = True
    return UnitAlignment(windows=windows, membership=membership)


def pool_hidden(hidden: np.ndarray, alignment: UnitAlignment) -> np.ndarray:
    """(n_units, M) mean of each unit's wordpiece vectors; zeros for units with none.

    hidden: (W, P, M) last hidden state of the Doc's windows.
    """
    selected = hidden[alignment.windows]
    return np.einsum("ukp,kpm->um", alignment.mean_weights(), selected).astype(hidden.dtype, copy=False)


def pool_hidden_backward(d_units: np.ndarray, alignment: UnitAlignment, hidden_shape: Sequence[int]) -> np.ndarray:
    """Gradient of `pool_hidden` with respect to `hidden`, as a (W, P, M) array."""
    d_hidden = np.zeros(hidden_shape, dtype=d_units.dtype)
    d_hidden[alignment.windows] = np.einsum("ukp,um->kpm", alignment.mean_weights(), d_units)
    return d_hidden


def _attention_pooling(alignment: UnitAlignment):
    """(used, membership, rows, shared): what `pool_attention` and its backward share.

    Only the positions some unit occupies matter (windows are padded to the batch's longest):
    used lists them; membership (k, n, p) float32 says which of them each unit owns in each
    window; rows (k, n, p) averages a unit's wordpieces; shared (n, n) counts common windows.
    """
    used = np.flatnonzero(alignment.membership.any(axis=(0, 1)))
    membership = alignment.membership[:, :, used].transpose(1, 0, 2).astype("float32")  # (k, n, p)
    per_window_counts = membership.sum(axis=2, keepdims=True)
    rows = membership / np.maximum(per_window_counts, 1)  # mean over the unit's wordpieces
    present = (per_window_counts[..., 0] > 0).astype("float32")  # (k, n)
    shared = np.einsum("ki,kj->ij", present, present)
    return used, membership, rows, shared


def pool_attention(attentions: List[np.ndarray], alignment: UnitAlignment):
    """Word-level attention between all units, for every layer and head.

    attentions: one (W, H, P, P) array per layer, rows attending to columns.
    Returns (attention, shared): attention is (L*H, n_units, n_units) float32 where
    attention[l*H + h, i, j] is how much unit i attends to unit j in layer l, head h, averaged
    over the windows both units share; shared is (n_units, n_units) int, that window count.
    """
    used, membership, rows, shared = _attention_pooling(alignment)
    # (k, L*H, p, p): the used part of each window's maps, all layers and heads stacked layer-major.
    maps = np.concatenate(
        [layer[np.ix_(alignment.windows, np.arange(layer.shape[1]), used, used)] for layer in attentions], axis=1
    )
    from_rows = np.matmul(rows[:, None], maps)  # (k, LH, n, p)
    per_window = np.matmul(from_rows, membership.transpose(0, 2, 1)[:, None])  # (k, LH, n, n)
    attention = per_window.sum(axis=0) / np.maximum(shared, 1)
    return attention.astype("float32", copy=False), shared.astype("int32")


def pool_attention_backward(
    d_attention: np.ndarray,
    alignment: UnitAlignment,
    layer_shapes: Sequence[Sequence[int]],
    out: Optional[List[np.ndarray]] = None,
) -> List[np.ndarray]:
    """Gradient of `pool_attention` with respect to its attentions: one (W, H, P, P) array per layer.

    d_attention: (L*H, n_units, n_units), the gradient of the pooled attention. layer_shapes: the
    shape of each layer's attentions. out: arrays (one per layer) to add the gradient to instead
    of new zeros, because the sentences of a Doc share its windows and only touch a few of their
    positions, so writing a full-size array per sentence would cost far more than the gradient.
    """
    used, membership, rows, shared = _attention_pooling(alignment)
    d_per_window = (d_attention / np.maximum(shared, 1)).astype("float32", copy=False)  # (LH, n, n)
    # maps[k, f] enters as rows[k] @ maps[k, f] @ membership[k].T, so its gradient is
    # rows[k].T @ d @ membership[k], for every window and map at once.
    to_rows = np.matmul(rows.transpose(0, 2, 1)[:, None], d_per_window[None])  # (k, LH, p, n)
    d_maps = np.matmul(to_rows, membership[:, None])  # (k, LH, p, p)
    heads = np.cumsum([0] + [shape[1] for shape in layer_shapes])
    if heads[-1] != d_attention.shape[0]:
        raise ValueError(
            f"pool_attention_backward: d_attention has {d_attention.shape[0]} maps "
            f"but the layers hold {heads[-1]} heads"
        )
    d_attentions = [np.zeros(shape, dtype="float32") for shape in layer_shapes] if out is None else out
    for d_layer, first, end in zip(d_attentions, heads[:-1], heads[1:]):
        d_layer[np.ix_(alignment.windows, np.arange(end - first), used, used)] += d_maps[:, first:end]
    return d_attentions
