"""PyTorch modules that score every (dependent i, head j) pair of a padded batch of groups.

Scores for K labels, read by `spacy_pairatt.core.objectives`:
- `PaperPairScorer` (Meng et al. eq. 5): (B, N, N, 1 + K), channel 0 the NONE class, channels
  1..K the labels; one softmax over all 1 + K channels per pair.
- `BiaffinePairScorer` (Dozat & Manning 2017, plus the attention terms): (B, N, N) arc scores
  (softmax over heads j for each dependent i), then (B, N, K) label scores on one chosen arc per
  unit (`label_scores_at`).
- `RelationPairScorer` (relations between entities i -> j): (B, N, N, 1 + K), channel 0 NONE,
  channels 1..K the relation types (one softmax, or one sigmoid per type for multi-label data).

Inputs: hidden (B, N, M) unit vectors, attention a `WordAttention` (F = L*H maps, attention[b, f,
i, j] how much unit i attends to unit j, kept as per-window blocks), missing (B, N) units without
wordpieces, unshared (B, N, N) pairs with no common window. A linear map of the concatenation
T_i ∘ T_j ∘ a_ij ∘ a_ji is the sum of one map per part, so no (B, N, N, 2M + 2F) tensor is ever
built, and the attention part is projected block by block, so no (B, F, N, N) one either.
`PooledPairScorer` puts the pooling from wordpieces to units (`spacy_pairatt.core.alignment`) in front
of a scorer, so that autograd carries the gradient back to the transformer's windows.
"""

from functools import partial
from typing import Optional, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..core.alignment import BlockAlignment
from ..core.pooling import WordAttention, pool_attention, pool_hidden

# BiaffinePairScorer's MLP projections of a unit, in the order `_projected` returns them.
PROJECTIONS = ("arc_dependent", "arc_head", "label_dependent", "label_head")


class PairIndicators(nn.Module):
    """Learned offsets for units without wordpieces and pairs without a shared window."""

    def __init__(self, n_out: int):
        super().__init__()
        self.missing_dependent = nn.Parameter(torch.zeros(n_out))
        self.missing_head = nn.Parameter(torch.zeros(n_out))
        self.unshared = nn.Parameter(torch.zeros(n_out))

    def forward(self, missing: torch.Tensor, unshared: torch.Tensor, channels: slice = slice(None)) -> torch.Tensor:
        """(B, N, N, C) offsets for the output channels selected by `channels` (default: all)."""
        return (
            missing[:, :, None, None] * self.missing_dependent[channels]
            + missing[:, None, :, None] * self.missing_head[channels]
            + unshared[..., None] * self.unshared[channels]
        )


class MapDropout(nn.Dropout):
    """Dropout of whole attention maps: one keep/drop draw per (sentence, layer x head).

    Element-wise dropout on the (B, L*H, N, N) maps drew one random number per attention weight
    and was the most expensive step of a training update; dropping whole maps draws B x L*H and
    is folded into the weights, so the maps are never copied.
    """

    def scale(self, batch: int, n_maps: int, like: torch.Tensor) -> Optional[torch.Tensor]:
        """(B, 1, L*H) kept maps scaled by 1 / (1 - p) while training, else None (keep everything)."""
        if not self.training or self.p == 0:
            return None
        kept = torch.rand(batch, 1, n_maps, device=like.device) >= self.p
        return kept.to(like.dtype) / (1 - self.p)


class PairAttention(nn.Module):
    """W_fwd a_ij + W_bwd a_ji: the attention part of eq. 5 for every pair, both directions.

    Both maps are applied to the attention blocks at once, (2C x F) @ (F x U*U) per block, before
    the blocks are placed in their groups, so the cost and memory grow with the windows' pairs.
    """

    def __init__(self, n_attention: int, n_out: int, dropout: float):
        super().__init__()
        self.forward_map = nn.Parameter(torch.zeros(n_out, n_attention))
        self.backward_map = nn.Parameter(torch.zeros(n_out, n_attention))
        self.dropout = MapDropout(dropout)

    def kept_maps(self, attention: WordAttention) -> Optional[torch.Tensor]:
        """(B, 1, F) this pass's map dropout (`MapDropout.scale`), or None outside training.

        Drawn once per pass and handed to every term that reads the maps, so that a scorer whose
        arc and label terms are computed apart drops the same maps in both.
        """
        return self.dropout.scale(attention.alignment.n_groups, attention.n_maps, attention.like)

    def _weights(self, attention: WordAttention, channels: slice, kept: Optional[torch.Tensor]) -> torch.Tensor:
        """(2C, F) the forward then the backward map, or (B, 2C, F) with the dropped maps zeroed."""
        weights = torch.cat([self.forward_map[channels], self.backward_map[channels]])
        if kept is None:
            kept = self.kept_maps(attention)
        return weights if kept is None else weights * kept

    def forward(
        self, attention: WordAttention, channels: slice = slice(None), kept: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """(B, N, N, C) for the output channels selected by `channels` (default: all); `kept`: the
        pass's map dropout from `kept_maps` (default: drawn here)."""
        weights = self._weights(attention, channels, kept)
        fixed = weights.dim() == 2 and not torch.is_grad_enabled()  # the same for every chunk of the batch
        both = attention.project(weights, (id(self), channels.start, channels.stop) if fixed else None)  # (B, 2C, N, N)
        n_groups, n_both, n_units, _ = both.shape
        both = both.view(n_groups, 2, n_both // 2, n_units, n_units)
        return (both[:, 0] + both[:, 1].transpose(2, 3)).permute(0, 2, 3, 1)

    def shared_pairs(self, attention: WordAttention) -> Tuple[torch.Tensor, torch.Tensor]:
        """`forward` at the pairs that share a window, the only ones where it is not 0: (Q,) their
        flat slots b * N * N + i * N + j, ascending, and (Q, C) the values there."""
        slots, both = attention.project_shared(self._weights(attention, slice(None), None))  # (Q,), (Q, 2C)
        n_units = attention.alignment.n_units
        group, pair = slots // (n_units * n_units), slots % (n_units * n_units)
        # A window that holds i and j holds (j, i) too, so the reverse of every slot is in `slots`.
        reverse = torch.searchsorted(slots, group * n_units * n_units + (pair % n_units) * n_units + pair // n_units)
        n_out = both.shape[1] // 2
        return slots, both[:, :n_out] + both[reverse, n_out:]

    def at_pairs(self, attention: WordAttention, heads: torch.Tensor, channels: slice, kept: Optional[torch.Tensor]):
        """(B, N, C): `forward` at one pair (i, heads[b, i]) per unit i, with the pass's map dropout `kept`."""
        to_head, from_head = attention.at_pairs(heads)
        if kept is not None:
            to_head, from_head = to_head * kept, from_head * kept
        return to_head @ self.forward_map[channels].T + from_head @ self.backward_map[channels].T


class PaperPairScorer(nn.Module):
    """Eq. 5: one linear layer over T_i ∘ T_j ∘ a_ij ∘ a_ji into NONE + K labels."""

    def __init__(
        self, width: int, n_attention: int, n_labels: int, use_embeddings: bool, use_attention: bool, dropout: float
    ):
        super().__init__()
        n_out = 1 + n_labels
        self.bias = nn.Parameter(torch.zeros(n_out))
        self.indicators = PairIndicators(n_out)
        self.dropout = nn.Dropout(dropout)
        self.dependent = nn.Linear(width, n_out, bias=False) if use_embeddings else None
        self.head = nn.Linear(width, n_out, bias=False) if use_embeddings else None
        self.attention = PairAttention(n_attention, n_out, dropout) if use_attention else None

    def forward(self, hidden, attention: Optional[torch.Tensor], missing, unshared):
        scores = self.bias + self.indicators(missing, unshared)
        if self.dependent is not None:
            hidden = self.dropout(hidden)
            scores = scores + self.dependent(hidden)[:, :, None] + self.head(hidden)[:, None, :]
        if self.attention is not None:
            scores = scores + self.attention(attention)
        return scores


class BiaffinePairScorer(nn.Module):
    """MLP-projected dependent/head vectors, a biaffine arc score and a bilinear label score.

    `forward` scores the arcs of every pair; `label_scores_at` then scores the labels of one arc
    per unit, N instead of N x N pairs per sentence: the gold arcs in training (the loss reads
    labels nowhere else), the decoded arcs at inference. A label score is
    label_bias + d @ U_k @ h + w_k d + v_k h + the indicator and attention terms, with d, h the
    label projections of the dependent and the head; without `label_attention` the attention
    terms are the arcs' alone.
    """

    def __init__(
        self,
        width: int,
        n_attention: int,
        n_labels: int,
        use_embeddings: bool,
        use_attention: bool,
        dropout: float,
        arc_width: int,
        label_width: int,
        label_attention: bool = True,
    ):
        super().__init__()
        n_out = 1 + n_labels
        self.n_labels = n_labels
        self.indicators = PairIndicators(n_out)
        self.label_bias = nn.Parameter(torch.zeros(n_labels))
        # Channel 0 the arc, 1..K the labels; the arc's alone without label_attention.
        self.attention = PairAttention(n_attention, n_out if label_attention else 1, dropout) if use_attention else None
        self.label_attention = use_attention and label_attention
        self.use_embeddings = use_embeddings
        if use_embeddings:
            self.dropout = nn.Dropout(dropout)
            self.projections = nn.ModuleDict(
                {
                    name: nn.Sequential(nn.Linear(width, size), nn.GELU(), nn.Dropout(dropout))
                    for name, size in zip(PROJECTIONS, (arc_width, arc_width, label_width, label_width))
                }
            )
            self.arc_bilinear = nn.Parameter(torch.zeros(arc_width, arc_width))
            self.arc_head_bias = nn.Linear(arc_width, 1, bias=False)
            self.label_bilinear = nn.Parameter(torch.zeros(n_labels, label_width, label_width))
            self.label_dependent = nn.Linear(label_width, n_labels, bias=False)
            self.label_head = nn.Linear(label_width, n_labels, bias=False)

    def _projected(self, hidden: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """The four MLP projections of every unit, (B, N, E) each in PROJECTIONS' order, from one
        matmul over the rows of hidden (B, N, M) that are not zero.

        Every other row (a chunk's padding, about half its slots once chunks may pad fourfold, and
        units without wordpieces) gets the projection of a zero vector. The four linear maps are
        applied as one (their weights side by side): one large matmul and one GELU instead of four
        of each, and the label vectors are taken from here instead of gathering hidden rows again.
        """
        batch, n_units, width = hidden.shape
        flat = hidden.reshape(-1, width)
        nonzero = torch.nonzero(flat.any(1)).flatten()
        linears = [self.projections[name][0] for name in PROJECTIONS]
        weight, bias = torch.cat([linear.weight for linear in linears]), torch.cat([linear.bias for linear in linears])
        _, gelu, dropout = self.projections[PROJECTIONS[0]]  # the same GELU and dropout rate in all four
        rows = gelu(nn.functional.linear(flat[nonzero], weight, bias))
        projected = dropout(gelu(bias).expand(len(flat), -1).index_copy(0, nonzero, rows)).view(batch, n_units, -1)
        return projected.split([linear.out_features for linear in linears], dim=-1)

    def _arcs(self, dependent: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """(B, N, N) biaffine arc scores of the arc projections."""
        # Plain matmuls in contiguous layouts: torch's einsum backward is an order of
        # magnitude slower on CPU for these shapes.
        scores = torch.matmul(dependent @ self.arc_bilinear, head.transpose(1, 2))
        return scores + self.arc_head_bias(head)[:, None, :, 0]

    def forward(self, hidden, attention: Optional[WordAttention], missing, unshared):
        """(B, N, N) arc scores, and the state `label_scores_at` reads (this pass's label projections
        of every unit and its map dropout, so that the labels see the same dropout as the arcs)."""
        arc = self.indicators(missing, unshared, slice(0, 1))[..., 0]
        label_vectors = None
        if self.use_embeddings:
            arc_dependent, arc_head, *label_vectors = self._projected(self.dropout(hidden))
            arc = arc + self._arcs(arc_dependent, arc_head)
        kept = None
        if self.attention is not None:
            kept = self.attention.kept_maps(attention)
            arc = arc + self.attention(attention, slice(0, 1), kept)[..., 0]
        return arc, (label_vectors, attention, kept, missing, unshared)

    def _dependent_label_terms(
        self, dependent_vectors: torch.Tensor, head_vectors: torch.Tensor, head_of: torch.Tensor
    ):
        """(R, K) d_r @ (U_k @ h_r + w_k) for R (dependent, head) rows, with the head vectors given once
        per distinct head: row r's is head_vectors[head_of[r]]. w_k d (`label_dependent`) rides along
        as the bias of U @ h: no matmul of its own over the rows.

        U_k @ h costs K x E x E per head and the product with d only K x E per row; in a tree about
        half the words head none of the others, so U @ h is computed once per head, and each head's
        dependents are laid side by side to be scored by one batched matmul, (H, K, E) @ (H, E, C)
        with C the most dependents of a head. In a one-thread microbenchmark (R = 900, K = 50,
        E = 128, 420 heads) this took a third of the time of torch's `bilinear` (whose backward,
        trilinear, was also 25 times slower than two matmuls) and 60% of gathering U @ h per row.
        """
        n_labels, width, _ = self.label_bilinear.shape
        if len(head_of) == 0:
            return dependent_vectors.new_zeros(0, n_labels)
        right = nn.functional.linear(
            head_vectors, self.label_bilinear.view(n_labels * width, width), self.label_dependent.weight.view(-1)
        )  # (H, K*E)
        n_dependents = torch.bincount(head_of, minlength=len(head_vectors))
        order = torch.argsort(head_of, stable=True)
        slot = torch.empty_like(head_of)
        first = torch.cumsum(n_dependents, 0) - n_dependents
        slot[order] = torch.arange(len(head_of), device=head_of.device) - first[head_of[order]]
        grouped = dependent_vectors.new_zeros(len(head_vectors), int(n_dependents.max()), width)
        grouped = grouped.index_put((head_of, slot), dependent_vectors)  # (H, C, E)
        scores = torch.bmm(right.view(-1, n_labels, width), grouped.transpose(1, 2))  # (H, K, C)
        return scores[head_of, :, slot]

    def label_scores_at(self, state, heads: torch.Tensor) -> torch.Tensor:
        """(B, N, K) label scores of the arcs heads[b, i] -> i.

        Only units with a head (heads[b, i] >= 0; the root and padding have -1 and get zeros) are
        scored: the bilinear costs K x E x E per distinct head, and a chunk is padded to its longest
        sentence.
        """
        label_vectors, attention, kept, missing, unshared = state
        batch, n_units = heads.shape
        sentence, unit = torch.nonzero(heads >= 0, as_tuple=True)
        head = heads[sentence, unit]
        labels = self.label_bias.expand(len(unit), -1)
        if label_vectors is not None:
            as_dependent, as_head = label_vectors
            heads_once, head_of = torch.unique(sentence * n_units + head, return_inverse=True)
            head_vectors = as_head.flatten(0, 1)[heads_once]
            dependent_vectors = as_dependent[sentence, unit]
            labels = (
                labels
                + self._dependent_label_terms(dependent_vectors, head_vectors, head_of)
                + self.label_head(head_vectors)[head_of]
            )
        indicators = self.indicators
        labels = (
            labels
            + missing[sentence, unit, None] * indicators.missing_dependent[1:]
            + missing[sentence, head, None] * indicators.missing_head[1:]
            + unshared[sentence, unit, head, None] * indicators.unshared[1:]
        )
        if self.label_attention:
            labels = (
                labels + self.attention.at_pairs(attention, heads.clamp(min=0), slice(1, None), kept)[sentence, unit]
            )
        scores = labels.new_zeros(batch, n_units, self.n_labels)
        scores[sentence, unit] = labels
        return scores


# The relation scorer's hidden layer holds pairs x hidden_width values per tensor. It runs over
# slices of a chunk's pairs of at most this many values (16 MB in float32), so beyond the scores
# themselves its memory does not grow with the pairs of a Doc (1,000 entities: 1e6 pairs).
RELATION_SLICE_VALUES = 2**22


class RelationPairScorer(nn.Module):
    """Eq. 5 with one hidden layer: T_i ∘ T_j ∘ T_root ∘ a_ij ∘ a_ji -> GELU -> NONE + K relations.

    Unit i is the head entity, j the tail, unit 0 the root ([CLS]), whose vector gives the
    sentence context a relation between two spans depends on. As in the other scorers the first
    layer is a sum of one linear map per part, so no (B, N, N, 3M + 2F) input is built. The
    attention part is projected at the pairs that share a window only (elsewhere it is 0), and
    the hidden layer runs over slices of head entities of at most `slice_values` values; under
    autograd each slice is recomputed in the backward pass instead of kept (checkpointing).
    """

    def __init__(
        self,
        width: int,
        n_attention: int,
        n_labels: int,
        use_embeddings: bool,
        use_attention: bool,
        dropout: float,
        hidden_width: int,
        slice_values: int = RELATION_SLICE_VALUES,
    ):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(hidden_width))
        self.indicators = PairIndicators(hidden_width)
        self.dropout = nn.Dropout(dropout)
        self.parts = (
            nn.ModuleDict({name: nn.Linear(width, hidden_width, bias=False) for name in ("head", "tail", "context")})
            if use_embeddings
            else None
        )
        self.attention = PairAttention(n_attention, hidden_width, dropout) if use_attention else None
        self.output = nn.Sequential(nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden_width, 1 + n_labels))
        self.slice_values = slice_values

    def forward(self, hidden, attention: Optional[WordAttention], missing, unshared):
        batch, n_units = hidden.shape[:2]
        as_head, as_tail = self._unit_terms(hidden, missing)
        slots, values = (None, None) if attention is None else self.attention.shared_pairs(attention)
        n_rows = max(1, self.slice_values // (batch * n_units * self.bias.shape[0]))
        score_rows = self._score_rows
        if torch.is_grad_enabled() and n_rows < n_units:
            score_rows = partial(checkpoint, self._score_rows, use_reentrant=False)
        return torch.cat(
            [
                score_rows(as_head, as_tail, unshared, slots, values, start, min(start + n_rows, n_units))
                for start in range(0, n_units, n_rows)
            ],
            dim=1,
        )

    def _unit_terms(self, hidden, missing):
        """(B, N, H) what each unit adds to the hidden layer as the head of a pair (with the bias and
        the [CLS] context) and as the tail, its missing-wordpiece indicators included."""
        missing = missing[..., None]
        as_head = self.bias + missing * self.indicators.missing_dependent
        as_tail = missing * self.indicators.missing_head
        if self.parts is not None:
            hidden = self.dropout(hidden)
            as_head = as_head + self.parts["head"](hidden) + self.parts["context"](hidden[:, :1])
            as_tail = as_tail + self.parts["tail"](hidden)
        return as_head, as_tail

    def _score_rows(self, as_head, as_tail, unshared, slots, values, start: int, stop: int):
        """(B, R, N, 1 + K) scores of the pairs whose head is unit start..stop - 1; `slots` / `values`
        the attention part at the pairs that share a window (`PairAttention.shared_pairs`), or None."""
        rows = slice(start, stop)
        pairs = as_head[:, rows, None] + as_tail[:, None]
        pairs = torch.addcmul(pairs, unshared[:, rows, :, None], self.indicators.unshared)
        if slots is not None:
            batch, n_rows, n_units, width = pairs.shape
            group, row, column = slots // (n_units * n_units), (slots // n_units) % n_units, slots % n_units
            here = (row >= start) & (row < stop)
            local = ((group * n_rows + row - start) * n_units + column)[here]
            pairs = pairs.view(-1, width).index_add_(0, local, values[here]).view(batch, n_rows, n_units, width)
        return self.output(pairs)


class PooledPairScorer(nn.Module):
    """Pooling from the transformer's windows to units, then a pair scorer: one autograd graph.

    forward takes window_hidden [(W_b, P_b, M)] and window_attention [[(W_b, H, P_b, P_b)] per layer]
    or None, bucket by bucket (`pooling.bucket_windows`), the chunk's BlockAlignment (torch) and
    optionally the batch's shared attention projections (`WordAttention.projected`), and returns
    what the wrapped scorer returns.
    """

    def __init__(self, scorer: nn.Module, use_attention: bool):
        super().__init__()
        self.scorer = scorer
        self.use_attention = use_attention

    def pooled(self, window_hidden, window_attention, alignment: BlockAlignment, projected: Optional[dict] = None):
        """(hidden (B, N, M), attention WordAttention or None, missing (B, N), unshared (B, N, N))."""
        hidden = pool_hidden(window_hidden, alignment)
        mask = alignment.mask
        if self.use_attention:
            attention = pool_attention(window_attention, alignment, projected)
            unshared = (alignment.shared == 0) * mask[:, :, None] * mask[:, None, :]
        else:
            attention, unshared = None, torch.zeros_like(alignment.shared)
        return hidden, attention, alignment.missing, unshared

    def forward(self, window_hidden, window_attention, alignment: BlockAlignment, projected: Optional[dict] = None):
        return self.scorer(*self.pooled(window_hidden, window_attention, alignment, projected))

    def label_scores_at(self, state, heads: torch.Tensor) -> torch.Tensor:
        return self.scorer.label_scores_at(state, heads)
