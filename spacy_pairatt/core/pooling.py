"""The torch side of alignment.py: each block's wordpieces pooled to its units, hidden states
(`pool_hidden`) and word-level attention (`WordAttention`, `pool_attention`) by the rules stated
there, with batched matmuls on the transformer's device and gradients by autograd; and the windows
of a batch in buckets for them (`bucket_windows`).

A batch's windows are numbered 0..W-1 and held in buckets of consecutive windows of one width P_b:
hidden states [(W_b, P_b, M)] and attention [[(W_b, H, P_b, P_b)] per layer]. Global window w is
row w - (windows of the buckets before) of its bucket.
"""

from dataclasses import dataclass
from functools import cached_property
from itertools import groupby
from typing import Dict, Hashable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from .alignment import BlockAlignment


def block_buckets(bucket_sizes: Sequence[int], block_window: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(Bk,) each block's bucket, and (Bk,) its window's row in that bucket."""
    sizes = torch.tensor(list(bucket_sizes), dtype=torch.int64, device=block_window.device)
    ends = torch.cumsum(sizes, 0)
    bucket = torch.bucketize(block_window, ends, right=True)
    return bucket, block_window - (ends - sizes)[bucket]


def bucket_blocks(
    bucket_sizes: Sequence[int], bucket_of_block: torch.Tensor, row_of_block: torch.Tensor
) -> List[Tuple[int, torch.Tensor, Optional[torch.Tensor]]]:
    """(bucket, its blocks, their window rows in the bucket) for every bucket that has blocks, from
    `block_buckets`; the rows are None where the blocks are the bucket's windows, each once, in order
    (then the bucket is used as it is, without a gather's copy)."""
    found = []
    for bucket in torch.unique(bucket_of_block).tolist():
        blocks = torch.nonzero(bucket_of_block == bucket).flatten()
        rows = row_of_block[blocks]
        in_order = torch.arange(bucket_sizes[bucket], device=rows.device)
        whole = len(rows) == len(in_order) and bool((rows == in_order).all())
        found.append((bucket, blocks, None if whole else rows))
    return found


def _rows(bucket: torch.Tensor, rows: Optional[torch.Tensor]) -> torch.Tensor:
    """bucket[rows]; the bucket itself for rows None (`bucket_blocks`)."""
    return bucket if rows is None else bucket[rows]


def pool_hidden(window_hidden: Sequence[torch.Tensor], alignment: BlockAlignment) -> torch.Tensor:
    """(S, N, M) mean of each unit's wordpiece vectors; zeros for units with none.

    window_hidden: the last hidden state of the batch's windows in buckets [(W_b, P_b, M)]; alignment
    on their device.
    """
    n_slots = alignment.n_groups * alignment.n_units
    width = window_hidden[0].shape[-1]
    slots = alignment.unit_slots()
    pooled = window_hidden[0].new_zeros(n_slots + 1, width)
    sizes = [len(h) for h in window_hidden]
    for bucket, blocks, rows in bucket_blocks(sizes, *block_buckets(sizes, alignment.block_window)):
        hidden = window_hidden[bucket]
        weights = alignment.hidden_weights[blocks, :, : hidden.shape[1]]
        per_block = torch.matmul(weights, _rows(hidden, rows))  # (Bk_b, U, M)
        pooled = pooled.index_add(0, slots[blocks].reshape(-1), per_block.reshape(-1, width))
    return pooled[:-1].view(alignment.n_groups, alignment.n_units, width)


def _project_layers(layers: Sequence[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """(W, C, P*P): sum_f weights[..., c, f] * map f, the maps given per layer [(W, H_l, P, P)],
    layer-major; weights (C, F) or (W, C, F). One matmul per layer: the layers are never joined."""
    projected, start = None, 0
    for layer in layers:
        part = torch.matmul(weights[..., start : start + layer.shape[1]], layer.flatten(2))
        projected = part if projected is None else projected + part
        start += layer.shape[1]
    return projected


def _project_per_block(
    layers: Sequence[torch.Tensor], block_weights: torch.Tensor, rows: Optional[torch.Tensor]
) -> torch.Tensor:
    """(Bk, C, P*P): block k's window, row rows[k] of the bucket's maps [(W, H_l, P, P)] per layer,
    projected by its own weights block_weights[k] (C, F); rows None: block k is window k.

    A window holds several blocks when it holds several groups (the sentences of a paragraph).
    Gathering its maps per block copied its F maps once for each of them, forward and back: most of
    a UD pipeline training step. Here each window's maps are read once, by the weights of all its
    blocks stacked, (K * C, F) for the K blocks of the window that has most.
    """
    if rows is None:
        return _project_layers(layers, block_weights)
    windows, rows = torch.unique(rows, return_inverse=True)
    if len(windows) < len(layers[0]):  # a chunk of the batch reads some of the bucket's windows
        layers = [layer[windows] for layer in layers]
    n_blocks, n_out, n_maps = block_weights.shape
    order = torch.argsort(rows, stable=True)
    counts = torch.bincount(rows, minlength=len(windows))
    place = torch.empty_like(rows)
    place[order] = torch.arange(n_blocks, device=rows.device) - (torch.cumsum(counts, 0) - counts)[rows[order]]
    stacked = block_weights.new_zeros(len(windows), int(counts.max()), n_out, n_maps)
    stacked = stacked.index_put((rows, place), block_weights)
    projected = _project_layers(layers, stacked.flatten(1, 2))  # (W, K * C, P*P)
    return projected.view(len(windows), -1, n_out, projected.shape[-1])[rows, place]


@dataclass
class WordAttention:
    """Word-level attention of S groups of N units, kept as the windows' wordpiece maps and the
    alignment that pools them; nothing is pooled until a method asks for it.

    window_maps: the windows' maps in buckets, each a list of layers [(W_b, H, P_b, P_b)]
    (`bucket_windows`): [w, h, p, q] is how much position p attends to position q in head h; map f
    of F = L * H is layer f // H, head f % H (layer-major).
    alignment: the BlockAlignment (torch) whose blocks, one per (group, window), pool them.
    Word-level attention averages over the windows that hold both units the per-window value:
    the mean over the first unit's wordpieces of the attention summed over the second's.
    Nothing of size F x N x N is built unless `dense` is called.
    projected: where a batch's chunks share the projections of whole buckets by fixed weights
    (`project` with a key), or None: the windows are the batch's, the groups only the chunk's, so
    without it every chunk would project every window of the buckets it reads.
    """

    window_maps: Sequence[Sequence[torch.Tensor]]
    alignment: BlockAlignment
    projected: Optional[Dict[Tuple, torch.Tensor]] = None

    @property
    def n_maps(self) -> int:
        return sum(layer.shape[1] for layer in self.window_maps[0])

    @property
    def like(self) -> torch.Tensor:
        """A tensor of the maps' dtype and device."""
        return self.window_maps[0][0]

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
        return cls([[attention]], alignment)

    @cached_property
    def _bucket_sizes(self) -> List[int]:
        return [len(layers[0]) for layers in self.window_maps]

    @cached_property
    def _bucket_blocks(self) -> List[Tuple[int, torch.Tensor, Optional[torch.Tensor]]]:
        return bucket_blocks(self._bucket_sizes, *self._block_windows)

    def _pooled_blocks(self, weights: Optional[torch.Tensor], key: Optional[Hashable] = None) -> torch.Tensor:
        """(Bk, C, U, U): every block's maps pooled to its units, C = F; or, with weights (C, F) or
        (S, C, F), the maps projected to C channels first (what `_project_blocks` chooses when C < F).

        Each block is rows (U, P_b) @ maps (P_b, C * P_b), then (U * C, P_b) @ cols.T (P_b, U): two
        batched matmuls per bucket whose inner sizes are whole maps, not one small matmul per map
        (the maps' rows first: one copy of the C maps, after the projection). Buckets keep windows of
        different widths unpadded; the layers are joined only when every map is pooled (weights None).
        """
        a = self.alignment
        n_units = a.unit_of.shape[1]
        n_out = self.n_maps if weights is None else weights.shape[-2]
        pooled = self.like.new_zeros(len(a.block_window), n_out, n_units, n_units)
        for bucket, blocks, local in self._bucket_blocks:
            layers = self.window_maps[bucket]
            width = layers[0].shape[-1]
            if weights is None:
                block_maps = (
                    torch.cat([_rows(layer, local) for layer in layers], 1)
                    if len(layers) > 1
                    else _rows(layers[0], local)
                )
            elif weights.dim() == 2:  # before the gather: fewer values
                block_maps = _rows(self._projected_bucket(bucket, weights, key), local)  # (Bk_b, C, P_b * P_b)
            else:  # one set of weights per group (map dropout)
                block_maps = _project_per_block(layers, weights[a.block_group[blocks]], local)
            rows_first = block_maps.reshape(-1, n_out, width, width).transpose(1, 2)  # (Bk_b, P_b, C, P_b)
            used = int((a.unit_of[blocks] >= 0).sum(1).max())  # block units beyond are padding here
            rows, cols = a.rows[blocks, :used, :width], a.cols[blocks, :used, :width]
            from_units = torch.matmul(rows, rows_first.reshape(-1, width, n_out * width))  # (Bk_b, U_b, C * P_b)
            to_units = torch.matmul(from_units.view(-1, used * n_out, width), cols.transpose(1, 2))  # (Bk_b, U*C, U)
            pooled[blocks, :, :used, :used] = to_units.view(-1, used, n_out, used).transpose(1, 2)  # one copy, in place
        return pooled

    def _projected_bucket(self, bucket: int, weights: torch.Tensor, key: Optional[Hashable]) -> torch.Tensor:
        """(W_b, C, P_b * P_b) every window of the bucket projected by weights (C, F); kept in
        `projected` under (key, bucket) when both are given, for the batch's other chunks."""
        if key is None or self.projected is None:
            return _project_layers(self.window_maps[bucket], weights)
        if (key, bucket) not in self.projected:
            self.projected[key, bucket] = _project_layers(self.window_maps[bucket], weights)
        return self.projected[key, bucket]

    def _project_blocks(self, weights: torch.Tensor, key: Optional[Hashable] = None) -> torch.Tensor:
        """(Bk, C, U*U): sum_f weights[c, f] * the block's pooled map f, each block in its own window.

        Pooling and the projection are both linear, so either may come first: with fewer outputs
        than maps (the parser's arc terms: 2 against 72) the wordpiece maps are projected first and
        the pooling runs over C maps instead of F; with more (the relation scorer's hidden layer),
        the F maps are pooled first.
        """
        n_out, n_maps = weights.shape[-2:]
        n_blocks, n_units = self.alignment.unit_of.shape
        if n_out < n_maps:
            return self._pooled_blocks(weights, key).view(n_blocks, n_out, n_units * n_units)
        block_weights = weights if weights.dim() == 2 else weights[self.alignment.block_group]
        return torch.matmul(block_weights, self._pooled_blocks(None).view(n_blocks, n_maps, n_units * n_units))

    def project(self, weights: torch.Tensor, key: Optional[Hashable] = None) -> torch.Tensor:
        """(S, C, N, N): sum_f weights[c, f] * attention[s, f, i, j], averaged over shared windows.

        weights: (C, F), or (S, C, F) for one set of weights per group (map dropout). key: names
        weights (C, F) that stay the same for the whole batch and need no gradient (inference), so
        that the windows' projections are kept in `projected` and computed once per batch.
        """
        a = self.alignment
        per_block = self._project_blocks(weights, key)  # (Bk, C, U*U)
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
        eye = torch.eye(self.n_maps, dtype=self.like.dtype, device=self.like.device)
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
        # Both directions in one pass: rows (unit -> head) then (head -> unit), side by side after.
        both = self._arc_sums(block.repeat(2), torch.cat([unit, head]), torch.cat([head, unit]))
        both = torch.cat([both[: len(block)], both[len(block) :]], dim=1)  # (R, 2F)
        slots = a.unit_slots()[block, unit]
        shared = a.shared.gather(2, heads[..., None])[..., 0].clamp(min=1)[..., None]  # (S, N, 1)
        placed = both.new_zeros(a.n_groups * a.n_units, 2 * self.n_maps).index_add(0, slots, both)
        placed = placed.view(a.n_groups, a.n_units, 2 * self.n_maps) / shared
        return placed[..., : self.n_maps], placed[..., self.n_maps :]

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
        sums = self.like.new_zeros(len(block), self.n_maps)
        for bucket in torch.unique(pair_bucket).tolist():
            here = pair_bucket == bucket
            window, p_here, q_here = pair_window[here], p[here], q[here]
            values = torch.cat([layer[window, :, p_here, q_here] for layer in self.window_maps[bucket]], 1)
            sums = sums.index_add(0, row[here], values * weight[here, None])
        return sums

    @cached_property
    def _block_windows(self) -> Tuple[torch.Tensor, torch.Tensor]:
        return block_buckets(self._bucket_sizes, self.alignment.block_window)


def pool_attention(
    window_maps: Sequence[Sequence[torch.Tensor]],
    alignment: BlockAlignment,
    projected: Optional[Dict[Tuple, torch.Tensor]] = None,
) -> WordAttention:
    """The word-level attention of the alignment's groups (`WordAttention`), pooled on demand;
    `projected` the batch's shared projections (`WordAttention.projected`)."""
    return WordAttention([list(layers) for layers in window_maps], alignment, projected)


def bucket_windows(
    hidden_per_doc: Sequence, layers_per_doc: Optional[Sequence[Sequence]] = None
) -> Tuple[List[torch.Tensor], Optional[List[List[torch.Tensor]]]]:
    """Per-Doc transformer output in buckets: hidden [(W_b, P_b, M)] and, given each Doc's layers
    [(W_d, H, P_d, P_d)], attention [[(W_b, H, P_b, P_b)] per layer] (else None).

    Arrays are numpy, cupy or torch. Docs of one width must be consecutive. A bucket is a run of
    them whose arrays each begin where the previous Doc's end in memory, as spacy-transformers'
    per-Doc views of one transformer pass do (numpy, in the pass's order): the bucket is then a view
    over them and nothing is copied (the view reads the other Docs' memory, which their
    TransformerData keep alive while the batch is scored). Other arrays of one width are copied
    into one bucket.
    """
    docs = [
        [hidden, *(layers_per_doc[i] if layers_per_doc is not None else [])] for i, hidden in enumerate(hidden_per_doc)
    ]
    buckets = []
    for _, same_width in groupby(docs, key=lambda arrays: arrays[0].shape[1]):
        for run, is_view in _memory_runs(list(same_width)):
            buckets.append([_joined([doc[k] for doc in run], is_view) for k in range(len(run[0]))])
    attention = [bucket[1:] for bucket in buckets] if layers_per_doc is not None else None
    return [bucket[0] for bucket in buckets], attention


def _extent(array) -> Optional[Tuple[int, int, Tuple]]:
    """(first byte, byte after the last, row layout) of a C-ordered numpy array, else None.

    Read once per array: `__array_interface__` builds a dict on every access, and a batch has one
    array per Doc and layer.
    """
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        return None
    start = array.__array_interface__["data"][0]
    return start, start + array.nbytes, (array.dtype, array.shape[1:])


def _memory_runs(docs: List[List]) -> List[Tuple[List[List], bool]]:
    """Docs (each its list of arrays) cut where one Doc's arrays do not all begin where the previous
    Doc's end in memory (with the same dtype and row shape); each run with whether its arrays can be
    viewed as one. Arrays other than numpy stay one run, to be copied."""
    extents = [[_extent(array) for array in doc] for doc in docs]
    if any(extent is None for doc in extents for extent in doc):
        return [(docs, False)]
    runs = [([docs[0]], True)]
    for before, after, doc in zip(extents, extents[1:], docs[1:]):
        if all(b[1] == a[0] and b[2] == a[2] for b, a in zip(before, after)):
            runs[-1][0].append(doc)
        else:
            runs.append(([doc], True))
    return runs


def _joined(arrays: Sequence, is_view: bool) -> torch.Tensor:
    """The arrays' rows as one tensor: a view over them when `is_view` (numpy arrays that follow
    each other in memory, `_memory_runs`), else a copy."""
    if len(arrays) == 1:
        return torch.as_tensor(arrays[0])
    if is_view:
        first = arrays[0]
        rows = sum(len(array) for array in arrays)
        return torch.from_numpy(np.lib.stride_tricks.as_strided(first, (rows, *first.shape[1:]), first.strides))
    return torch.cat([torch.as_tensor(array) for array in arrays])
