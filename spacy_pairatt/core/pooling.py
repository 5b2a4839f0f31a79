"""The torch side of alignment.py: each block's wordpieces pooled to its units, hidden states
(`pool_hidden`) and word-level attention (`WordAttention`, `pool_attention`) by the rules stated
there, with batched matmuls on the transformer's device and gradients by autograd; and the windows
of a batch stacked for them (`stack_windows`, `bucket_windows`)."""

from dataclasses import dataclass
from functools import cached_property
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
    """Word-level attention of S groups of N units, kept as the windows' wordpiece maps and the
    alignment that pools them; nothing is pooled until a method asks for it.

    window_maps: the windows in width buckets [(W_b, F, P_b, P_b)] (`bucket_windows`):
    [w, f, p, q] is how much position p attends to position q in map f (all layers' heads,
    layer-major); global window w is row w - (windows of the buckets before) of its bucket.
    alignment: the BlockAlignment (torch) whose blocks, one per (group, window), pool them.
    Word-level attention averages over the windows that hold both units the per-window value:
    the mean over the first unit's wordpieces of the attention summed over the second's.
    Nothing of size F x N x N is built unless `dense` is called.
    """

    window_maps: Sequence[torch.Tensor]
    alignment: BlockAlignment

    @property
    def n_maps(self) -> int:
        return self.window_maps[0].shape[1]

    @classmethod
    def from_dense(cls, attention: torch.Tensor, mask: Optional[torch.Tensor] = None) -> "WordAttention":
        """Groups whose (S, F, N, N) attention is given whole: each group one window of N positions
        (unit u at position u), so pooling reproduces it and every pair is shared."""
        n_groups, _, n_units, _ = attention.shape
        mask = attention.new_ones(n_groups, n_units) if mask is None else mask
        units = torch.arange(n_units, device=attention.device)
        unit_of = torch.where(mask > 0, units, -1)
        identity = torch.diag_embed(mask)
        alignment = BlockAlignment(
            block_group=torch.arange(n_groups, device=attention.device),
            block_window=torch.arange(n_groups, device=attention.device),
            unit_of=unit_of,
            local_of=unit_of,
            rows=identity,
            cols=identity,
            hidden_weights=identity,
            shared=mask[:, :, None] * mask[:, None, :],
            missing=torch.zeros_like(mask),
            mask=mask,
        )
        return cls([attention], alignment)

    @cached_property
    def _block_windows(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """(Bk,) each block's bucket, and (Bk,) its window's row in that bucket."""
        a = self.alignment
        sizes = torch.tensor([len(maps) for maps in self.window_maps], dtype=torch.int64, device=a.block_window.device)
        ends = torch.cumsum(sizes, 0)
        bucket = torch.bucketize(a.block_window, ends, right=True)
        return bucket, a.block_window - (ends - sizes)[bucket]

    @cached_property
    def _bucket_blocks(self) -> List[Tuple[int, torch.Tensor, torch.Tensor]]:
        """(bucket, its blocks, their window rows in the bucket) for every bucket that has blocks."""
        bucket_of_block, row_of_block = self._block_windows
        found = []
        for bucket in torch.unique(bucket_of_block).tolist():
            blocks = torch.nonzero(bucket_of_block == bucket).flatten()
            found.append((bucket, blocks, row_of_block[blocks]))
        return found

    def _pooled_blocks(self, weights: Optional[torch.Tensor]) -> torch.Tensor:
        """(Bk, C, U, U): every block's maps pooled to its units, C = F; or, with weights (C, F) or
        (S, C, F), the maps projected to C channels first (what `_project_blocks` chooses when C < F).

        Each block is rows (U, P_b) @ maps (P_b, C * P_b), then (U * C, P_b) @ cols.T (P_b, U): two
        batched matmuls per bucket whose inner sizes are whole maps, not one small matmul per map
        (the maps' rows first: one copy of the C maps, after the projection). Buckets keep windows of
        different widths unpadded.
        """
        a = self.alignment
        n_units = a.unit_of.shape[1]
        n_out = self.n_maps if weights is None else weights.shape[-2]
        pooled = self.window_maps[0].new_zeros(len(a.block_window), n_out, n_units, n_units)
        for bucket, blocks, local in self._bucket_blocks:
            maps = self.window_maps[bucket]
            in_order = torch.arange(len(maps), device=local.device)
            every_window_once = len(local) == len(maps) and bool((local == in_order).all())
            width = maps.shape[-1]
            if weights is not None and weights.dim() == 2:  # before the gather: fewer values
                maps = torch.matmul(weights, maps.flatten(2)).unflatten(2, (width, width))  # (W_b, C, P_b, P_b)
            block_maps = maps if every_window_once else maps[local]  # a copy only where blocks repeat or skip windows
            if weights is not None and weights.dim() == 3:  # one set of weights per group (map dropout)
                block_maps = torch.matmul(weights[a.block_group[blocks]], block_maps.flatten(2))
            rows_first = block_maps.reshape(-1, n_out, width, width).transpose(1, 2)  # (Bk_b, P_b, C, P_b)
            used = int((a.unit_of[blocks] >= 0).sum(1).max())  # block units beyond are padding here
            rows, cols = a.rows[blocks, :used, :width], a.cols[blocks, :used, :width]
            from_units = torch.matmul(rows, rows_first.reshape(-1, width, n_out * width))  # (Bk_b, U_b, C * P_b)
            to_units = torch.matmul(from_units.view(-1, used * n_out, width), cols.transpose(1, 2))  # (Bk_b, U*C, U)
            pooled[blocks, :, :used, :used] = to_units.view(-1, used, n_out, used).transpose(1, 2)  # one copy, in place
        return pooled

    def _project_blocks(self, weights: torch.Tensor) -> torch.Tensor:
        """(Bk, C, U*U): sum_f weights[c, f] * the block's pooled map f, each block in its own window.

        Pooling and the projection are both linear, so either may come first: with fewer outputs
        than maps (the parser's arc terms: 2 against 72) the wordpiece maps are projected first and
        the pooling runs over C maps instead of F; with more (the relation scorer's hidden layer),
        the F maps are pooled first.
        """
        n_out, n_maps = weights.shape[-2:]
        n_blocks, n_units = self.alignment.unit_of.shape
        if n_out < n_maps:
            return self._pooled_blocks(weights).view(n_blocks, n_out, n_units * n_units)
        block_weights = weights if weights.dim() == 2 else weights[self.alignment.block_group]
        return torch.matmul(block_weights, self._pooled_blocks(None).view(n_blocks, n_maps, n_units * n_units))

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
        eye = torch.eye(self.n_maps, dtype=self.window_maps[0].dtype, device=self.window_maps[0].device)
        return self.project(eye)

    def at_pairs(self, heads: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(S, N, F) attention of each unit i to heads[s, i], and (S, N, F) of heads[s, i] to i.

        Read from the wordpiece maps at the two units' wordpieces only, in every window that holds
        both: one arc per unit costs its wordpiece pairs x F, where pooling whole blocks first costs
        U x P x F x P per block.
        """
        a = self.alignment
        n_blocks = len(a.unit_of)
        head_units = heads[a.block_group[:, None], a.unit_of.clamp(min=0)]  # (Bk, U)
        head_local = a.local_of[torch.arange(n_blocks, device=heads.device)[:, None], head_units]
        block, unit = torch.nonzero((a.unit_of >= 0) & (head_local >= 0), as_tuple=True)
        head = head_local[block, unit]
        to_head, from_head = self._arc_sums(block, unit, head), self._arc_sums(block, head, unit)
        slots = a.unit_slots()[block, unit]
        shared = a.shared.gather(2, heads[..., None])[..., 0].clamp(min=1)[..., None]  # (S, N, 1)

        def place(values: torch.Tensor) -> torch.Tensor:
            n_slots = a.n_groups * a.n_units
            placed = values.new_zeros(n_slots, self.n_maps).index_add(0, slots, values)
            return placed.view(a.n_groups, a.n_units, self.n_maps) / shared

        return place(to_head), place(from_head)

    def _arc_sums(self, block: torch.Tensor, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(R, F): for R (block, source unit, target unit) rows, sum over p, q of
        rows[block, source, p] * cols[block, target, q] * maps[window of block, :, p, q]."""
        a = self.alignment
        source_row, source_piece = torch.nonzero(a.rows[block, source], as_tuple=True)
        target_row, target_piece = torch.nonzero(a.cols[block, target], as_tuple=True)
        # Every (source piece, target piece) combination of each row, rows in order.
        n_source = torch.bincount(source_row, minlength=len(block))
        n_target = torch.bincount(target_row, minlength=len(block))
        n_pairs = n_source * n_target
        row = torch.repeat_interleave(torch.arange(len(block), device=block.device), n_pairs)
        within = torch.arange(len(row), device=block.device) - (torch.cumsum(n_pairs, 0) - n_pairs)[row]
        first_source, first_target = torch.cumsum(n_source, 0) - n_source, torch.cumsum(n_target, 0) - n_target
        p = source_piece[first_source[row] + within // n_target[row]]
        q = target_piece[first_target[row] + within % n_target[row]]
        weight = a.rows[block[row], source[row], p] * a.cols[block[row], target[row], q]
        bucket_of_block, row_of_block = self._block_windows
        pair_bucket, pair_window = bucket_of_block[block[row]], row_of_block[block[row]]
        sums = self.window_maps[0].new_zeros(len(block), self.n_maps)
        for bucket in torch.unique(pair_bucket).tolist():
            here = pair_bucket == bucket
            values = self.window_maps[bucket][pair_window[here], :, p[here], q[here]] * weight[here, None]
            sums = sums.index_add(0, row[here], values)
        return sums


def pool_attention(window_maps: Sequence[torch.Tensor], alignment: BlockAlignment) -> WordAttention:
    """The word-level attention of the alignment's groups (`WordAttention`), pooled on demand."""
    return WordAttention(list(window_maps), alignment)


def stack_windows(arrays: List[torch.Tensor]) -> torch.Tensor:
    """Concatenate per-Doc (W_d, P_d, M) hidden states, right-padding positions to the widest P."""
    widest = max(array.shape[1] for array in arrays)
    return torch.cat([torch.nn.functional.pad(array, (0, 0, 0, widest - array.shape[1])) for array in arrays])


def bucket_windows(layers_per_doc: List[List[torch.Tensor]]) -> List[torch.Tensor]:
    """Per-Doc attention, each a list of L layers (W_d, H, P_d, P_d), as width buckets (W_b, L*H, P_b, P_b).

    Docs of one width must be consecutive; each layer is copied once, as it is, into its bucket's slot.
    """
    buckets = []
    for width, same_width in groupby(layers_per_doc, key=lambda layers: layers[0].shape[-1]):
        docs = list(same_width)
        n_layers, n_heads = len(docs[0]), docs[0][0].shape[1]
        bucket = docs[0][0].new_empty(sum(len(layers[0]) for layers in docs), n_layers, n_heads, width, width)
        row = 0
        for layers in docs:
            for layer, maps in enumerate(layers):
                bucket[row : row + len(maps), layer].copy_(maps)
            row += len(layers[0])
        buckets.append(bucket.view(len(bucket), n_layers * n_heads, width, width))
    return buckets
