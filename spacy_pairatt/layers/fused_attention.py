"""Eager self-attention in fewer passes, for the BERT, RoBERTa and MPNet encoders whose attention
the parser reads.

Attention weights are only returned by the eager implementation (SDPA fuses them away), and
Hugging Face's eager BERT self-attention makes a pass over the (B, H, P, P) scores for each of a
matmul on permuted views, the division by sqrt(d), the mask's addition and the softmax, after
three linear maps. Here one linear map gives Q, K and V, one `baddbmm` gives the scaled scores with
the mask added, then the softmax and one `bmm`. Same outputs to float rounding (tests compare both
forwards and gradients with the original); what it gains is bench/speed.py's (a) against (a0)
(results/bench.md). Whatever else the original supports (cross-attention, a key/value cache,
BERT's relative position embeddings, head masks) goes to it.

MPNet has only eager attention. Its self-attention module holds the output projection `o` as
well, and adds a relative position bias (B, H, P, P) that its encoder computes once and hands to
every layer: the bias and the mask are added once, before the same `baddbmm`.
"""

import math
from typing import Optional, Sequence, Tuple

import torch
from torch import nn
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.mpnet.modeling_mpnet import MPNetSelfAttention
from transformers.models.roberta.modeling_roberta import RobertaSelfAttention


def fused_attention(
    hidden_states: torch.Tensor,
    projections: Sequence[nn.Linear],
    additive: torch.Tensor,
    n_heads: int,
    dropout: nn.Module,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """(context (B, P, H * d), weights (B, H, P, P)) of softmax(Q K^T / sqrt(d) + additive) V.

    projections: the query, key and value maps, applied as one; additive: what the scores get
    added before the softmax (the mask, and MPNet's position bias), broadcastable to (B, H, P, P).
    """
    batch, width, _ = hidden_states.shape
    weight = torch.cat([linear.weight for linear in projections])
    bias = torch.cat([linear.bias for linear in projections])
    head_size = weight.shape[0] // (3 * n_heads)
    qkv = nn.functional.linear(hidden_states, weight, bias).view(batch, width, 3, n_heads, head_size)
    device_type = hidden_states.device.type
    if torch.is_autocast_enabled(device_type):
        # Under bfloat16 autocast (layers/precision.py) the (B, H, P, P) part stays float32: a few
        # percent of the layer's products, and the weights leave the encoder as float32 anyway. In
        # bfloat16 the encoder alone ran 7% faster, the parser pipeline 7% slower (the casts).
        with torch.autocast(device_type, enabled=False):
            return attend(qkv.float(), additive.float(), dropout)
    return attend(qkv, additive, dropout)


def attend(qkv: torch.Tensor, additive: torch.Tensor, dropout: nn.Module) -> Tuple[torch.Tensor, torch.Tensor]:
    """`fused_attention` from the projected (B, P, 3, H, d) queries, keys and values on."""
    batch, width, _, n_heads, head_size = qkv.shape
    query, key, value = (part.reshape(batch * n_heads, width, head_size) for part in qkv.permute(2, 0, 3, 1, 4))
    additive = additive.expand(batch, n_heads, additive.shape[-2], width).reshape(batch * n_heads, -1, width)
    scores = torch.baddbmm(additive, query, key.transpose(1, 2), alpha=1 / math.sqrt(head_size))
    probs = dropout(torch.softmax(scores, dim=-1))
    context = torch.bmm(probs, value).view(batch, n_heads, width, head_size).transpose(1, 2)
    return context.reshape(batch, width, n_heads * head_size), probs.view(batch, n_heads, width, width)


class FusedSelfAttentionMixin:
    """`forward` of an eager `BertSelfAttention`-like module in fewer passes (module docstring)."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        encoder_hidden_states: Optional[torch.Tensor] = None,
        encoder_attention_mask: Optional[torch.Tensor] = None,
        past_key_value=None,
        output_attentions: bool = False,
    ):
        if (
            attention_mask is None
            or head_mask is not None
            or encoder_hidden_states is not None
            or past_key_value is not None
            or self.is_decoder
            or self.position_embedding_type != "absolute"
        ):
            return super().forward(
                hidden_states,
                attention_mask,
                head_mask,
                encoder_hidden_states,
                encoder_attention_mask,
                past_key_value,
                output_attentions,
            )
        context, probs = fused_attention(
            hidden_states, (self.query, self.key, self.value), attention_mask, self.num_attention_heads, self.dropout
        )
        return (context, probs) if output_attentions else (context,)


class FusedBertSelfAttention(FusedSelfAttentionMixin, BertSelfAttention):
    pass


class FusedRobertaSelfAttention(FusedSelfAttentionMixin, RobertaSelfAttention):
    pass


class FusedMPNetSelfAttention(MPNetSelfAttention):
    """`MPNetSelfAttention.forward` in fewer passes: its position bias joins the mask (module docstring)."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        position_bias: Optional[torch.Tensor] = None,
        output_attentions: bool = False,
        **kwargs,
    ):
        if attention_mask is None or position_bias is None or head_mask is not None:
            return super().forward(hidden_states, attention_mask, head_mask, position_bias, output_attentions, **kwargs)
        projections = (self.q, self.k, self.v)
        additive = position_bias + attention_mask
        context, probs = fused_attention(hidden_states, projections, additive, self.num_attention_heads, self.dropout)
        output = self.o(context)
        return (output, probs) if output_attentions else (output,)


FUSED_CLASSES = {
    BertSelfAttention: FusedBertSelfAttention,
    RobertaSelfAttention: FusedRobertaSelfAttention,
    MPNetSelfAttention: FusedMPNetSelfAttention,
}


def fuse_self_attention(model: nn.Module) -> int:
    """Give every eager BERT / RoBERTa / MPNet self-attention module of `model` the fused forward, in
    place (same parameters, so state dicts and saved weights are unchanged); returns how many.
    Modules of other classes (SDPA, other architectures) are left as they are."""
    fused = 0
    for module in model.modules():
        replacement = FUSED_CLASSES.get(type(module))
        if replacement is not None:
            module.__class__ = replacement
            fused += 1
    return fused
