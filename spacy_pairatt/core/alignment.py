"""Wordpieces to units for a whole batch: pooled hidden states and word-level attention in torch.

The transformer's outputs for a batch are windows (spans) of `P` padded wordpiece positions, and
each Doc's `TransformerData.align` maps its spaCy tokens to positions of its own windows; a token
can own several wordpieces and a wordpiece can belong to several tokens ("do" and "n't" share
"don"; a token of zero-width, format or combining characters, which the encoder's tokenizer drops,
shares the wordpieces of the token before it: features.borrowed_wordpieces), and whitespace tokens
own none. A *group* is what one pair-score matrix covers (a
sentence for the parser, a Doc's entities for relations); its *units* are what the scorer pairs:
unit 0 is the artificial root, carried by each window's first position ([CLS] or <s>), units
1..n are words or entities (an entity owns the tokens of all its mentions).

Pooling rules (Clark et al. 2019, and what the paper's word-level pairs need):
- hidden state of a unit: mean over its wordpieces (over all windows that hold it);
- attention *from* a unit: mean over its wordpieces' rows, attention *to* a unit: sum over its
  wordpieces' columns, so a word's attention row sums to at most 1 unless words share a
  wordpiece (then that wordpiece is counted for each of them);
- a pair is read in every window that holds both units and averaged over those windows; a pair
  that shares no window gets zero attention, and `shared == 0` says so.

Everything is computed per *block*, one (group, window) pair: a block holds only the units that
own a wordpiece in that window (at most the window's tokens), so a sentence of any length costs
memory in proportion to its windows, and pairs in no common window are never materialised. The
index arithmetic that finds blocks runs once per batch in numpy over small integer arrays; the
pooling itself (pooling.py) is batched torch matmuls on the device of the transformer's outputs,
with gradients by autograd.
"""

from dataclasses import dataclass, fields
from typing import Optional, Sequence, Tuple

import numpy as np
import torch


def ragged_arange(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """concatenate([arange(s, s + n) for s, n in zip(starts, lengths)]) without a Python loop."""
    starts = np.asarray(starts, dtype="int64")
    lengths = np.asarray(lengths, dtype="int64")
    total = int(lengths.sum())
    offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + np.arange(total, dtype="int64") - offsets


@dataclass
class DocAlignments:
    """The token -> wordpiece maps of a batch of Docs, in one global window numbering.

    lengths: (n_tokens_all,) wordpieces per token, Docs concatenated; positions: their global
    flat positions window * P + position, with windows of all Docs numbered consecutively and P
    the batch's widest window; token_offsets: (D + 1,) first token of each Doc in `lengths`.
    """

    lengths: np.ndarray
    positions: np.ndarray
    token_offsets: np.ndarray
    n_positions: int

    @property
    def wordpiece_offsets(self) -> np.ndarray:
        """(n_tokens_all,) index in `positions` of each token's first wordpiece."""
        return np.cumsum(self.lengths) - self.lengths

    @classmethod
    def from_docs(
        cls,
        lengths: Sequence[np.ndarray],
        indices: Sequence[np.ndarray],
        windows: Sequence[Tuple[int, int]],
        first_windows: Optional[Sequence[int]] = None,
    ) -> "DocAlignments":
        """lengths/indices: each Doc's `align.lengths` / `align.dataXd` (flat in its own (W_d * P_d)
        grid); windows: each Doc's (W_d, P_d); first_windows: each Doc's first global window
        (default: the Docs' windows numbered consecutively in Doc order)."""
        n_windows = np.array([w for w, _ in windows], dtype="int64")
        widths = np.array([p for _, p in windows], dtype="int64")
        n_positions = int(widths.max(initial=1))
        if first_windows is None:
            window_offsets = np.cumsum(n_windows) - n_windows
        else:
            window_offsets = np.asarray(first_windows, dtype="int64").reshape(len(windows))
        counts = np.array([len(i) for i in indices], dtype="int64")
        flat = np.concatenate([np.asarray(i, dtype="int64").ravel() for i in indices] or [np.zeros(0, "int64")])
        width = np.repeat(widths, counts)
        positions = (
            np.repeat(window_offsets, counts) + flat // np.maximum(width, 1)
        ) * n_positions + flat % np.maximum(width, 1)
        token_counts = np.array([len(length) for length in lengths], dtype="int64")
        return cls(
            lengths=np.concatenate([np.asarray(x, dtype="int64") for x in lengths] or [np.zeros(0, "int64")]),
            positions=positions,
            token_offsets=np.concatenate([[0], np.cumsum(token_counts)]),
            n_positions=n_positions,
        )


@dataclass
class Groups:
    """Which tokens make which unit of which group; flat arrays over all listed tokens.

    doc: (G,) the Doc of each group; n_units: (G,) units per group, root included;
    token_group / token_index / token_unit: (T,) group, token index in its Doc and unit (>= 1).
    """

    doc: np.ndarray
    n_units: np.ndarray
    token_group: np.ndarray
    token_index: np.ndarray
    token_unit: np.ndarray

    @classmethod
    def sentences(cls, doc: np.ndarray, start: np.ndarray, n_words: np.ndarray) -> "Groups":
        """One group per sentence (doc[g], tokens start[g] .. start[g] + n_words[g]), one unit per word."""
        doc, start, n_words = (np.asarray(x, dtype="int64") for x in (doc, start, n_words))
        group = np.repeat(np.arange(len(doc)), n_words)
        return cls(
            doc=doc,
            n_units=n_words + 1,
            token_group=group,
            token_index=ragged_arange(start, n_words),
            token_unit=ragged_arange(np.ones_like(n_words), n_words),
        )

    def subset(self, groups: Sequence[int]) -> "Groups":
        """The listed groups, renumbered 0..len(groups)-1 in that order."""
        groups = np.asarray(groups, dtype="int64")
        new_index = np.full(len(self.doc), -1, dtype="int64")
        new_index[groups] = np.arange(len(groups))
        keep = new_index[self.token_group] >= 0
        return Groups(
            doc=self.doc[groups],
            n_units=self.n_units[groups],
            token_group=new_index[self.token_group[keep]],
            token_index=self.token_index[keep],
            token_unit=self.token_unit[keep],
        )


@dataclass
class BlockAlignment:
    """How to pool one chunk of groups, block by block (numpy, or torch after `to_torch`).

    S groups padded to N units; Bk blocks of at most U units over P positions.
    block_group, block_window: (Bk,) the group and global window of each block;
    unit_of: (Bk, U) the group unit of each block unit, -1 for padding; local_of: (Bk, N) the
    block unit of each group unit, -1 where the unit is not in the block;
    rows: (Bk, U, P) float, mean over a unit's wordpieces in the window (attention from it);
    cols: (Bk, U, P) float, 1 on a unit's wordpieces in the window (attention to it);
    hidden_weights: (Bk, U, P) float, mean over a unit's wordpieces in all windows;
    shared: (S, N, N) float, windows holding both units; missing: (S, N) float, 1 for real units
    without wordpieces; mask: (S, N) float, 1 for real units (root included).
    """

    block_group: np.ndarray
    block_window: np.ndarray
    unit_of: np.ndarray
    local_of: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    hidden_weights: np.ndarray
    shared: np.ndarray
    missing: np.ndarray
    mask: np.ndarray

    @property
    def n_groups(self) -> int:
        return self.mask.shape[0]

    @property
    def n_units(self) -> int:
        return self.mask.shape[1]

    def to_torch(self, device) -> "BlockAlignment":
        """The same alignment as torch tensors on `device` (integers int64, the rest float32)."""
        return BlockAlignment(
            **{
                f.name: torch.as_tensor(
                    np.asarray(getattr(self, f.name)),
                    dtype=torch.int64 if getattr(self, f.name).dtype.kind in "iu" else torch.float32,
                    device=device,
                )
                for f in fields(self)
            }
        )

    def unit_slots(self) -> torch.Tensor:
        """(Bk, U) flat index g * N + u of each block unit in an (S * N) array; S * N for padding."""
        slots = self.block_group[:, None] * self.n_units + self.unit_of
        return torch.where(self.unit_of >= 0, slots, self.n_groups * self.n_units)

    def pair_slots(self) -> torch.Tensor:
        """(Bk, U * U) flat index of each block pair in an (S * N * N) array; S * N * N for padding."""
        n = self.n_units
        first = self.block_group[:, None, None] * n * n + self.unit_of[:, :, None] * n + self.unit_of[:, None, :]
        real = (self.unit_of[:, :, None] >= 0) & (self.unit_of[:, None, :] >= 0)
        width = self.unit_of.shape[1]
        return torch.where(real, first, self.n_groups * n * n).reshape(len(self.unit_of), width * width)


def align_blocks(alignments: DocAlignments, groups: Groups) -> BlockAlignment:
    """The BlockAlignment of `groups` over the batch's windows (vectorised over all groups)."""
    n_positions = alignments.n_positions
    n_groups = len(groups.doc)
    n_units = int(groups.n_units.max(initial=1))
    tokens = alignments.token_offsets[groups.doc[groups.token_group]] + groups.token_index
    counts = alignments.lengths[tokens]
    first = alignments.wordpiece_offsets[tokens]
    flat = alignments.positions[ragged_arange(first, counts)]
    group = np.repeat(groups.token_group, counts)
    unit = np.repeat(groups.token_unit, counts)
    window, position = flat // n_positions, flat % n_positions
    # Blocks: the distinct (group, window) pairs, sorted by group then window.
    n_windows = max(int(window.max(initial=-1)) + 1, 1)
    block_keys, block_of = np.unique(group * n_windows + window, return_inverse=True)
    block_group, block_window = block_keys // n_windows, block_keys % n_windows
    n_blocks = len(block_keys)
    # Every block holds the root, at its window's first position.
    block_of = np.concatenate([np.arange(n_blocks), block_of.ravel()])
    unit = np.concatenate([np.zeros(n_blocks, dtype="int64"), unit])
    position = np.concatenate([np.zeros(n_blocks, dtype="int64"), position])
    # Block units: the distinct (block, unit) pairs; the root is block unit 0 of every block.
    block_unit_keys, local_of_entry = np.unique(block_of * n_units + unit, return_inverse=True)
    block_of_unit = block_unit_keys // n_units
    block_first_unit = np.searchsorted(block_of_unit, np.arange(n_blocks))
    local = np.arange(len(block_unit_keys)) - block_first_unit[block_of_unit]
    width = int(local.max(initial=0)) + 1
    unit_of = np.full((n_blocks, width), -1, dtype="int64")
    unit_of[block_of_unit, local] = block_unit_keys % n_units
    local_of = np.full((n_blocks, n_units), -1, dtype="int64")
    local_of[block_of_unit, block_unit_keys % n_units] = local
    cols = np.zeros((n_blocks, width, n_positions), dtype="float32")
    cols[block_of, local[local_of_entry.ravel()], position] = 1.0
    per_window = cols.sum(axis=2)  # (Bk, U) wordpieces of each block unit in its window
    real = unit_of >= 0
    unit_slot = block_group[:, None] * n_units + np.maximum(unit_of, 0)
    # Counts summed by bincount (exact in float64), not np.add.at, which is many times slower.
    total = np.bincount(unit_slot[real], per_window[real], minlength=n_groups * n_units).astype("float32")
    pair_group = np.repeat(block_group, width * width)
    pair_i = np.repeat(unit_of, width, axis=1).ravel()
    pair_j = np.tile(unit_of, (1, width)).ravel()
    both = (pair_i >= 0) & (pair_j >= 0)
    pair_slot = (pair_group[both] * n_units + pair_i[both]) * n_units + pair_j[both]
    shared = np.bincount(pair_slot, minlength=n_groups * n_units * n_units).astype("float32")
    shared = shared.reshape(n_groups, n_units, n_units)
    mask = (np.arange(n_units)[None, :] < groups.n_units[:, None]).astype("float32")
    missing = mask * (total.reshape(n_groups, n_units) == 0)
    return BlockAlignment(
        block_group=block_group,
        block_window=block_window,
        unit_of=unit_of,
        local_of=local_of,
        rows=cols / np.maximum(per_window, 1.0)[:, :, None],
        cols=cols,
        hidden_weights=cols / np.maximum(np.where(real, total[unit_slot], 1.0), 1.0)[:, :, None],
        shared=shared,
        missing=missing,
        mask=mask,
    )
