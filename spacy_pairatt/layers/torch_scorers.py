"""PyTorch modules that score every (dependent i, head j) pair of a padded batch of sentences.

Both return one tensor of shape (B, N, N, 1 + K) for K dependency labels, read by
`spacy_pairatt.objectives`:
- `PaperPairScorer` (Meng et al. eq. 5): channel 0 is the NONE class, channels 1..K the labels;
  one softmax over all 1 + K channels per pair.
- `BiaffinePairScorer` (Dozat & Manning 2017, plus the attention terms): channel 0 is the arc
  score (softmax over heads j for each dependent i), channels 1..K the label scores.

Inputs: hidden (B, N, M) unit vectors, attention (B, F, N, N) with F = L*H and attention[b, f, i, j]
how much unit i attends to unit j, missing (B, N) units without wordpieces, unshared (B, N, N)
pairs with no common window. A linear map of the concatenation T_i ∘ T_j ∘ a_ij ∘ a_ji is the sum
of one map per part, so no (B, N, N, 2M + 2F) tensor is ever built.
"""
from typing import Optional

import torch
from torch import nn


class PairIndicators(nn.Module):
    """Learned offsets for units without wordpieces and pairs without a shared window."""

    def __init__(self, n_out: int):
        super().__init__()
        self.missing_dependent = nn.Parameter(torch.zeros(n_out))
        self.missing_head = nn.Parameter(torch.zeros(n_out))
        self.unshared = nn.Parameter(torch.zeros(n_out))

    def forward(self, missing: torch.Tensor, unshared: torch.Tensor) -> torch.Tensor:
        return (
            missing[:, :, None, None] * self.missing_dependent
            + missing[:, None, :, None] * self.missing_head
            + unshared[..., None] * self.unshared
        )


class PairAttention(nn.Module):
    """W_fwd a_ij + W_bwd a_ji: the attention part of eq. 5 for every pair, both directions."""

    def __init__(self, n_attention: int, n_out: int, dropout: float):
        super().__init__()
        self.forward_map = nn.Linear(n_attention, n_out, bias=False)
        self.backward_map = nn.Linear(n_attention, n_out, bias=False)
        self.dropout = nn.Dropout(dropout)
        nn.init.zeros_(self.forward_map.weight)
        nn.init.zeros_(self.backward_map.weight)

    def forward(self, attention: torch.Tensor) -> torch.Tensor:
        pairs = self.dropout(attention.permute(0, 2, 3, 1))  # (B, N, N, F): a_ij at [b, i, j]
        return self.forward_map(pairs) + self.backward_map(pairs.transpose(1, 2))


class PaperPairScorer(nn.Module):
    """Eq. 5: one linear layer over T_i ∘ T_j ∘ a_ij ∘ a_ji into NONE + K labels."""

    def __init__(self, width: int, n_attention: int, n_labels: int, use_embeddings: bool, use_attention: bool, dropout: float):
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
    """MLP-projected dependent/head vectors, a biaffine arc score and a bilinear label score."""

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
    ):
        super().__init__()
        n_out = 1 + n_labels
        self.indicators = PairIndicators(n_out)
        self.label_bias = nn.Parameter(torch.zeros(n_labels))
        self.attention = PairAttention(n_attention, n_out, dropout) if use_attention else None
        self.use_embeddings = use_embeddings
        if use_embeddings:
            self.dropout = nn.Dropout(dropout)
            self.projections = nn.ModuleDict(
                {
                    name: nn.Sequential(nn.Linear(width, size), nn.GELU(), nn.Dropout(dropout))
                    for name, size in (
                        ("arc_dependent", arc_width),
                        ("arc_head", arc_width),
                        ("label_dependent", label_width),
                        ("label_head", label_width),
                    )
                }
            )
            self.arc_bilinear = nn.Parameter(torch.zeros(arc_width, arc_width))
            self.arc_head_bias = nn.Linear(arc_width, 1, bias=False)
            self.label_bilinear = nn.Parameter(torch.zeros(n_labels, label_width, label_width))
            self.label_dependent = nn.Linear(label_width, n_labels, bias=False)
            self.label_head = nn.Linear(label_width, n_labels, bias=False)

    def forward(self, hidden, attention: Optional[torch.Tensor], missing, unshared):
        batch, n_units = hidden.shape[:2]
        arc = hidden.new_zeros(batch, n_units, n_units)
        labels = self.label_bias.expand(batch, n_units, n_units, -1)
        if self.use_embeddings:
            hidden = self.dropout(hidden)
            p = {name: layer(hidden) for name, layer in self.projections.items()}
            arc = arc + torch.einsum("bid,de,bje->bij", p["arc_dependent"], self.arc_bilinear, p["arc_head"])
            arc = arc + self.arc_head_bias(p["arc_head"])[:, None, :, 0]
            dependent_u = torch.einsum("bid,kde->bike", p["label_dependent"], self.label_bilinear)
            labels = labels + torch.einsum("bike,bje->bijk", dependent_u, p["label_head"])
            labels = labels + self.label_dependent(p["label_dependent"])[:, :, None] + self.label_head(p["label_head"])[:, None, :]
        scores = torch.cat([arc[..., None], labels], dim=-1) + self.indicators(missing, unshared)
        if self.attention is not None:
            scores = scores + self.attention(attention)
        return scores
