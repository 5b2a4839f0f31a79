"""The torch side of alignment.py: each block's wordpieces pooled to its units, hidden states
(`pool_hidden`) and word-level attention (`WordAttention`, `pool_attention`) by the rules stated
there, with batched matmuls on the transformer's device and gradients by autograd; and the windows
of a batch stacked for them (`stack_windows`, `bucket_windows`)."""

from dataclasses import dataclass
from itertools import groupby
from typing import List, Optional, Sequence, Tuple

import torch

from .alignment import BlockAlignment


def pool_hidden(window_hidden: torch.Tensor, alignment: BlockAlignment) -> torch.Tensor:
    """(S, N, M) mean of each unit's wordpiece vectors; zeros for units with none.

    window_hidden: (W, P, M) last hidden state of the batch's windows; alignment on its device.
    """
    n_slots = alignment.n_groups * alignment.n_units
    per_block = torch.matmul(alignment.hidden_weights, window_hidden[alignment.block_window])  # (Bk, U, M)
    width = window_hidden.shape[-1]
    pooled = window_hidden.new_zeros(n_slots + 1, width).index_add(
        0, alignment.unit_slots().reshape(-1), per_block.reshape(-1, width)
    )
    return pooled[:-1].view(alignment.n_groups, alignment.n_units, width)


@dataclass
class WordAttention:
    """Word-level attention of S groups of N units, kept as per-window blocks.

    blocks: (Bk, F, U, U) with blocks[b, f, k, l] the attention of block unit k to block unit l
    in map f (layer-major: f = layer * H + head), summed (not yet averaged) over that window;
    alignment: the BlockAlignment (torch) that places blocks in their groups.
    Nothing of size F x N x N is built unless `dense` is called.
    """

    blocks: torch.Tensor
    alignment: BlockAlignment

    @property
    def n_maps(self) -> int:
        return self.blocks.shape[1]

    @classmethod
    def from_dense(cls, attention: torch.Tensor, mask: Optional[torch.Tensor] = None) -> "WordAttention":
        """Groups whose (S, F, N, N) attention is given whole: one block per group, every pair shared."""
        n_groups, _, n_units, _ = attention.shape
        mask = attention.new_ones(n_groups, n_units) if mask is None else mask
        units = torch.arange(n_units, device=attention.device)
        unit_of = torch.where(mask > 0, units, -1)
        empty = attention.new_zeros(n_groups, n_units, 0)
        alignment = BlockAlignment(
            block_group=torch.arange(n_groups, device=attention.device),
            block_window=torch.arange(n_groups, device=attention.device),
            unit_of=unit_of,
            local_of=unit_of,
            rows=empty,
            cols=empty,
            hidden_weights=empty,
            shared=mask[:, :, None] * mask[:, None, :],
            missing=torch.zeros_like(mask),
            mask=mask,
        )
        return cls(attention, alignment)

    def _project_blocks(self, weights: torch.Tensor) -> torch.Tensor:
        """(Bk, C, U*U): sum_f weights[c, f] * blocks[b, f, k, l], each block in its own window."""
        n_blocks, n_maps, width, _ = self.blocks.shape
        block_weights = weights if weights.dim() == 2 else weights[self.alignment.block_group]
        return torch.matmul(block_weights, self.blocks.reshape(n_blocks, n_maps, width * width))

    def project(self, weights: torch.Tensor) -> torch.Tensor:
        """(S, C, N, N): sum_f weights[c, f] * attention[s, f, i, j], averaged over shared windows.

        weights: (C, F), or (S, C, F) for one set of weights per group (map dropout).
        """
        a = self.alignment
        per_block = self._project_blocks(weights)  # (Bk, C, U*U)
        n_out = per_block.shape[1]
        n_slots = a.n_groups * a.n_units * a.n_units
        summed = per_block.new_zeros(n_out, n_slots + 1).index_add(
            1, a.pair_slots().reshape(-1), per_block.permute(1, 0, 2).reshape(n_out, -1)
        )
        summed = summed[:, :-1].view(n_out, a.n_groups, a.n_units, a.n_units).transpose(0, 1)
        return summed / a.shared.clamp(min=1)[:, None]

    def project_shared(self, weights: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """`project` for the pairs that share a window only: (Q,) their flat slots g * N * N + i * N + j,
        ascending, and (Q, C) their values (the same as `project` there; it is 0 at every other pair).

        Memory grows with the pairs the blocks hold, not with S x N x N: what relations between
        entities in separate windows need.
        """
        a = self.alignment
        per_block = self._project_blocks(weights)  # (Bk, C, U*U)
        n_out = per_block.shape[1]
        slots = a.pair_slots().reshape(-1)
        real = slots < a.n_groups * a.n_units * a.n_units
        shared_slots, which, n_windows = torch.unique(slots[real], return_inverse=True, return_counts=True)
        values = per_block.transpose(1, 2).reshape(-1, n_out)[real]
        summed = values.new_zeros(len(shared_slots), n_out).index_add(0, which, values)
        return shared_slots, summed / n_windows[:, None]

    def dense(self) -> torch.Tensor:
        """(S, F, N, N) word-level attention, every map (for tooling and tests)."""
        eye = torch.eye(self.n_maps, dtype=self.blocks.dtype, device=self.blocks.device)
        return self.project(eye)

    def at_pairs(self, heads: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(S, N, F) attention of each unit i to heads[s, i], and (S, N, F) of heads[s, i] to i."""
        a = self.alignment
        n_blocks = len(a.unit_of)
        block_index = torch.arange(n_blocks, device=heads.device)[:, None]
        head_units = heads[a.block_group[:, None], a.unit_of.clamp(min=0)]  # (Bk, U)
        head_local = a.local_of[block_index, head_units]
        usable = (a.unit_of >= 0) & (head_local >= 0)
        local = torch.arange(a.unit_of.shape[1], device=heads.device)[None].expand(n_blocks, -1)
        maps = self.blocks.permute(0, 2, 3, 1)  # (Bk, U, U, F)
        to_head = maps[block_index, local, head_local.clamp(min=0)] * usable[..., None]
        from_head = maps[block_index, head_local.clamp(min=0), local] * usable[..., None]
        slots = a.unit_slots().reshape(-1)
        shared = a.shared.gather(2, heads[..., None])[..., 0].clamp(min=1)[..., None]  # (S, N, 1)

        def place(values: torch.Tensor) -> torch.Tensor:
            n_slots = a.n_groups * a.n_units
            placed = values.new_zeros(n_slots + 1, self.n_maps).index_add(0, slots, values.reshape(-1, self.n_maps))
            return placed[:-1].view(a.n_groups, a.n_units, self.n_maps) / shared

        return place(to_head), place(from_head)


def pool_attention(window_maps: Sequence[torch.Tensor], alignment: BlockAlignment) -> WordAttention:
    """Word-level attention between the units of every group, for every map.

    window_maps: the batch's windows in width buckets [(W_b, P_b, F, P_b)] (`bucket_windows`):
    [w, p, f, q] is how much position p attends to position q in map f (all layers' heads,
    layer-major); global window w is row w - (windows of the buckets before) of its bucket.
    Buckets keep windows of different widths unpadded: padding a batch's maps to its widest window
    multiplied the copied and pooled values up to forty-fold. Each block is rows (U, P_b) @ maps
    (P_b, F * P_b), then (U * F, P_b) @ cols.T (P_b, U): two batched matmuls per bucket whose
    inner sizes are whole maps, not one small matmul per map.
    """
    device = alignment.block_window.device
    sizes = torch.tensor([len(maps) for maps in window_maps], dtype=torch.int64, device=device)
    ends = torch.cumsum(sizes, 0)
    bucket_of_block = torch.bucketize(alignment.block_window, ends, right=True)
    n_units, n_maps = alignment.unit_of.shape[1], window_maps[0].shape[2]
    pooled = window_maps[0].new_zeros(len(alignment.block_window), n_maps, n_units, n_units)
    for bucket, maps in enumerate(window_maps):
        blocks = torch.nonzero(bucket_of_block == bucket).flatten()
        if len(blocks) == 0:
            continue
        local, order = torch.sort(alignment.block_window[blocks] - (ends[bucket] - sizes[bucket]))
        blocks = blocks[order]
        width = maps.shape[-1]
        every_window_once = len(local) == len(maps) and bool((local == torch.arange(len(maps), device=device)).all())
        block_maps = maps if every_window_once else maps[local]  # the copy only where blocks repeat or skip windows
        used = int((alignment.unit_of[blocks] >= 0).sum(1).max())  # block units beyond are padding here
        rows, cols = alignment.rows[blocks, :used, :width], alignment.cols[blocks, :used, :width]
        from_units = torch.matmul(rows, block_maps.reshape(-1, width, n_maps * width))  # (Bk_b, U_b, F * P_b)
        to_units = torch.matmul(from_units.view(-1, used * n_maps, width), cols.transpose(1, 2))  # (Bk_b, U_b * F, U_b)
        pooled[blocks, :, :used, :used] = to_units.view(-1, used, n_maps, used).transpose(1, 2)  # one copy, in place
    return WordAttention(pooled, alignment)


def stack_windows(arrays: List[torch.Tensor]) -> torch.Tensor:
    """Concatenate per-Doc (W_d, P_d, M) hidden states, right-padding positions to the widest P."""
    widest = max(array.shape[1] for array in arrays)
    return torch.cat([torch.nn.functional.pad(array, (0, 0, 0, widest - array.shape[1])) for array in arrays])


def bucket_windows(layers_per_doc: List[List[torch.Tensor]]) -> List[torch.Tensor]:
    """Per-Doc attention, each a list of L layers (W_d, H, P_d, P_d), as width buckets (W_b, P_b, L*H, P_b).

    Docs of one width must be consecutive; each layer is copied once, into its bucket's slot, row
    positions first so that `pool_attention` reads every map of a row position at once.
    """
    buckets = []
    for width, same_width in groupby(layers_per_doc, key=lambda layers: layers[0].shape[-1]):
        docs = list(same_width)
        n_layers, n_heads = len(docs[0]), docs[0][0].shape[1]
        bucket = docs[0][0].new_empty(sum(len(layers[0]) for layers in docs), width, n_layers, n_heads, width)
        row = 0
        for layers in docs:
            for layer, maps in enumerate(layers):
                bucket[row : row + len(maps), :, layer].copy_(maps.transpose(1, 2))
            row += len(layers[0])
        buckets.append(bucket.view(len(bucket), width, n_layers * n_heads, width))
    return buckets
